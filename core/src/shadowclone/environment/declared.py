"""What a repository declares of the environment its clones need, read from its own files:
`.shadowclone/environment.toml` (shadowclone's format; it wins when both exist) or a Dev
Container configuration (`.devcontainer/devcontainer.json` and the others the specification finds,
read by the reference CLI: `environment/devcontainer.py`).

Both come to one `Environment`: a base (an image, or a Dockerfile with its context and build
arguments), setup commands run when the image is built (network on, no secrets), variables,
the user, the repository's own check commands, the paths whose contents are worth keeping
between clones, and a dev container's lifecycle commands, which need the repository and so run
in each clone's workspace. A file that says something wrong is refused in one line naming the
file and the key.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from shadowclone.environment import compose, devcontainer
from shadowclone.errors import BadInput
from shadowclone.node.lifecycle import LIFECYCLE_KEYS, NO_LIFECYCLE, Lifecycle

TOML_PATH = ".shadowclone/environment.toml"
DEVCONTAINER_PATH = devcontainer.DEFAULT_CONFIG
DECLARATIONS = (TOML_PATH, devcontainer.READING_PATH)
"""What setup keeps of a declaration that `declared` reads, the one that wins first: the TOML
file, or the reference CLI's reading of the chosen devcontainer.json."""

DEFAULT_CACHES = ("/cache/npm", "/cache/pip", "/cache/uv", "/cache/go", "/cache/cargo")
"""Where the clone image points npm, pip, uv, Go and Cargo for their caches (its ENV): kept
per repository for every clone of it, besides the paths an environment declares."""

MAX_ITEMS = 64
"""At most this many commands, variables, arguments or cache paths of one kind."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TAG_UNSAFE = re.compile(r"[^a-z0-9]+")


@attrs.frozen
class Environment:
    """A repository's environment, as declared in `source`."""

    source: str
    """The file it was read from, a path in the repository."""
    image: str | None = None
    """The base image, when the declaration names one rather than a Dockerfile."""
    dockerfile: str | None = None
    """The Dockerfile that makes the base, a path in the repository."""
    context: str = "."
    """The Dockerfile's build context, a folder in the repository."""
    build_args: Mapping[str, str] = attrs.field(factory=dict)
    setup: tuple[str, ...] = ()
    """Shell commands run as the image is built, with the network on and no secrets
    (`.shadowclone/environment.toml`'s `setup`)."""
    lifecycle: Lifecycle = NO_LIFECYCLE
    """A dev container's lifecycle commands: they run in each clone's workspace."""
    features: tuple[str, ...] = ()
    """A dev container's features, installed on the base by the reference CLI's build."""
    env: Mapping[str, str] = attrs.field(factory=dict)
    user: str | None = None
    checks: tuple[str, ...] = ()
    """The repository's own checks (`make test`): run by the toolchain review stage."""
    caches: tuple[str, ...] = ()
    """Absolute paths in the clone kept in a volume per repository (package caches)."""
    found: tuple[str, ...] = ()
    """Every dev container configuration the repository has (`source` is the one used)."""
    not_applied: Mapping[str, str] = attrs.field(factory=dict)
    """Keys that change a container's environment which a clone does not apply (yet), each
    with why."""
    ignored: tuple[str, ...] = ()
    """Keys of the declaration that only concern an editor or the host."""
    compose: compose.Compose | None = None
    """A Compose configuration's services: the clone's (its base and variables are above) and
    those that start beside it."""

    def files(self) -> tuple[str, ...]:
        """The repository files the image is made from: the declaration, and the
        Dockerfile where there is one (its context's other files are read when building)."""
        composed = self.compose.files if self.compose is not None else ()
        return (self.source, *composed) + ((self.dockerfile,) if self.dockerfile else ())


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _fail(path: str, key: str, expected: str) -> BadInput:
    """One line: a key holding a line break (a name from the file) shows it escaped."""
    key = _CONTROL.sub(lambda found: repr(found.group())[1:-1], key)
    where = f"{path}: {key}" if key else path
    return BadInput(f"{where}: expected {expected}")


def _string(path: str, key: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise _fail(path, key, "a non-empty string")
    return value


def _strings(path: str, key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > MAX_ITEMS:
        raise _fail(path, key, f"a list of at most {MAX_ITEMS} strings")
    return tuple(_string(path, f"{key}[{index}]", item) for index, item in enumerate(value))


def _table(path: str, key: str, value: object, names: bool = False) -> dict[str, str]:
    if not isinstance(value, dict) or len(value) > MAX_ITEMS:
        raise _fail(path, key, f"a table of at most {MAX_ITEMS} string values")
    table: dict[str, str] = {}
    for name, item in value.items():
        if names and not _NAME.fullmatch(name):
            raise _fail(path, f"{key}.{name}", "a variable name (letters, digits, _)")
        if not isinstance(item, str) or "\0" in item:
            raise _fail(path, f"{key}.{name}", "a string")
        if names and ("\n" in item or "\r" in item):
            raise _fail(path, f"{key}.{name}", "a value on one line")
        table[name] = item
    return table


def _inside(path: str, key: str, base: str, relative: str) -> str:
    """`relative`, a path from the folder `base`, as a path in the repository; refused if it
    leaves the repository."""
    if relative.startswith("/"):
        raise _fail(path, key, "a path relative to its file's folder")
    joined = posixpath.normpath(posixpath.join(base, relative))
    if joined == ".." or joined.startswith("../"):
        raise _fail(path, key, "a path inside the repository")
    return joined


SYSTEM_FOLDERS = (
    "/bin", "/boot", "/clone", "/dev", "/egress", "/etc", "/lib", "/lib32", "/lib64",
    "/libx32", "/opt/shadowclone", "/proc", "/run", "/sbin", "/sys", "/tmp", "/usr",
)  # fmt: skip
"""Where no cache and no workspace folder goes: a volume or a link there would hide the
clone's own programs or its in-memory /tmp, or hand later clones programs an earlier engine
wrote."""


def _absolute_paths(path: str, key: str, value: object) -> tuple[str, ...]:
    found = _strings(path, key, value)
    return tuple(_container_path(path, f"{key}[{index}]", item) for index, item in enumerate(found))


def _container_path(path: str, key: str, value: object) -> str:
    """An absolute path in the clone, outside the system's folders."""
    found = _string(path, key, value)
    if not found.startswith("/") or ".." in found.split("/") or found.rstrip("/") == "":
        raise _fail(path, key, "an absolute path in the clone, not /")
    if any(found == folder or found.startswith(folder + "/") for folder in SYSTEM_FOLDERS):
        raise _fail(path, key, "a path outside the system's folders")
    return found


def _remote_env(path: str, value: object) -> dict[str, str]:
    """`remoteEnv`: variables by name; null (the specification's "unset") is left out, and
    shadowclone's own names are refused."""
    if isinstance(value, dict):
        value = {name: item for name, item in value.items() if item is not None}
    table = _table(path, "remoteEnv", value, names=True)
    for name in table:
        if name.upper().startswith("SHADOWCLONE_"):
            raise _fail(path, f"remoteEnv.{name}", "a name that is not shadowclone's own")
    return table


def _commands(path: str, key: str, value: object) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A lifecycle command of devcontainer.json: a shell line, an argv list, or named commands
    (each either, run in parallel); its shell lines, and their names when it names them."""
    if value in ("", [], {}, None):
        return (), ()  # the specification's "no command"
    if isinstance(value, str):
        return (_string(path, key, value),), ()
    if isinstance(value, list):
        return (shlex.join(_strings(path, key, value)),), ()
    if isinstance(value, dict) and len(value) <= MAX_ITEMS:
        lines: list[str] = []
        names: list[str] = []
        for name, item in value.items():
            if isinstance(item, dict):
                raise _fail(path, f"{key}.{name}", "a command: a string or a list of strings")
            found, _ = _commands(path, f"{key}.{name}", item)
            lines += found
            names += [name] * len(found)
        return tuple(lines), tuple(names)
    raise _fail(path, key, "a command: a string, a list of strings or a table of commands")


def from_reading(
    reading: Mapping[str, Any],
    source: str,
    found: Sequence[str] = (),
    kept: Mapping[str, str] | None = None,
) -> Environment:
    """The environment of the configuration at `source`, from the reference CLI's reading of
    it (`devcontainer.read_configuration`, every variable substituted); `found` names every
    configuration the repository has; `kept` holds the repository's files setup kept (the
    Compose files a configuration names)."""
    data = reading.get("configuration")
    if not isinstance(data, dict):
        raise _fail(source, "", "a JSON object")
    composed = None
    env = _table(source, "containerEnv", data.get("containerEnv") or {}, names=True)
    if "dockerComposeFile" in data:
        composed = compose.read(source, data, kept or {})
        service = composed.service
        image, dockerfile, context = service.image, service.dockerfile, service.context or "."
        build_args = dict(service.build_args)
        files, key = " + ".join(composed.files), f"services.{service.name}.environment"
        # containerEnv overrides the service's variables
        env = {**_table(files, key, dict(service.environment), names=True), **env}
    else:
        image, dockerfile, context = devcontainer.base_of(source, data)
        build = data.get("build")
        build = build if isinstance(build, dict) else {}
        build_args = _table(source, "build.args", build.get("args") or {}) if dockerfile else {}
    commands = {key: _commands(source, key, data.get(key)) for key in LIFECYCLE_KEYS}
    folder = reading.get("workspaceFolder")
    lifecycle = Lifecycle(
        on_create=commands["onCreateCommand"][0],
        update_content=commands["updateContentCommand"][0],
        post_create=commands["postCreateCommand"][0],
        post_start=commands["postStartCommand"][0],
        names={key: names for key, (_, names) in commands.items() if names},
        workspace_folder=_container_path(source, "workspaceFolder", folder) if folder else None,
        remote_env=_remote_env(source, data.get("remoteEnv") or {}),
    )
    user = data.get("remoteUser") or data.get("containerUser")
    return Environment(
        source=source,
        image=image,
        dockerfile=dockerfile,
        context=context,
        build_args=build_args,
        lifecycle=lifecycle,
        features=devcontainer.features_of(source, data),
        env=env,
        user=_string(source, "remoteUser", user) if user else None,
        found=devcontainer.ordered(found or (source,)),
        not_applied={
            **devcontainer.not_applied(data),
            **(composed.not_applied if composed else {}),
        },
        ignored=devcontainer.ignored(data) + (composed.ignored if composed else ()),
        compose=composed,
    )


TOML_KEYS = frozenset(
    {"image", "dockerfile", "context", "build_args", "setup", "env", "user", "checks", "caches"}
)


def parse_environment_toml(text: str, path: str = TOML_PATH) -> Environment:
    """shadowclone's own declaration: every key known, none ignored."""
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as error:
        raise BadInput(f"{path}: not valid TOML ({error})") from None
    unknown = sorted(set(data) - TOML_KEYS)
    if unknown:
        raise _fail(path, unknown[0], f"one of the keys {', '.join(sorted(TOML_KEYS))}")
    folder = posixpath.dirname(path)
    image = _string(path, "image", data["image"]) if "image" in data else None
    dockerfile = None
    if "dockerfile" in data:
        relative = _string(path, "dockerfile", data["dockerfile"])
        dockerfile = _inside(path, "dockerfile", folder, relative)
    if (image is None) == (dockerfile is None):
        raise _fail(path, "image", "either image or dockerfile, not both nor neither")
    context = folder or "."
    if "context" in data:
        context = _inside(path, "context", folder, _string(path, "context", data["context"]))
    return Environment(
        source=path,
        image=image,
        dockerfile=dockerfile,
        context=context,
        build_args=_table(path, "build_args", data.get("build_args", {})),
        setup=_strings(path, "setup", data.get("setup", [])),
        env=_table(path, "env", data.get("env", {}), names=True),
        user=_string(path, "user", data["user"]) if "user" in data else None,
        checks=_strings(path, "checks", data.get("checks", [])),
        caches=_absolute_paths(path, "caches", data.get("caches", [])),
    )


def declared(files: Mapping[str, str]) -> Environment | None:
    """The environment `files` (repository path -> text, as setup kept them) declare, or None
    when they hold neither declaration. A devcontainer.json is read from the reference CLI's
    reading setup kept beside it."""
    if TOML_PATH in files:
        return parse_environment_toml(files[TOML_PATH])
    if devcontainer.READING_PATH in files:
        try:
            kept = json.loads(files[devcontainer.READING_PATH])
            source, found = kept["source"], kept["found"]
            assert isinstance(source, str) and isinstance(found, list)
        except (ValueError, KeyError, TypeError, AssertionError):
            raise BadInput(
                f"{devcontainer.READING_PATH}: not the reading setup keeps: run setup again"
            ) from None
        return from_reading(kept, source, [str(path) for path in found], files)
    kept_configs = sorted(path for path in files if devcontainer.is_configuration(path))
    if kept_configs:
        raise BadInput(
            f"{kept_configs[0]}: kept by an older setup, without its reading: run setup again"
        )
    return None


RECIPE_VERSION = "2"
"""How an environment image is made from its files; a change makes every tag anew (2: a dev
container's lifecycle commands run in the clone, not in the image)."""


def image_tag(repo: str, clone_image_id: str, files: Mapping[str, str]) -> str:
    """The tag of the image made for `repo` from `files` (every file it reads, by path) on the
    clone image `clone_image_id`: a change of any of them makes another tag, so an image is
    built once per change of its inputs."""
    digest = hashlib.sha256()
    parts = [RECIPE_VERSION, repo, clone_image_id]
    for name in sorted(files):
        parts += [name, files[name]]
    for part in parts:  # each with its length: no two lists of parts hash alike
        data = part.encode("utf-8", "surrogateescape")
        digest.update(len(data).to_bytes(8, "big") + data)
    name = _TAG_UNSAFE.sub("-", repo.lower()).strip("-") or "repository"
    return f"shadowclone-env/{name}:{digest.hexdigest()[:20]}"


def cache_volumes(repo: str, paths: tuple[str, ...]) -> dict[str, str]:
    """The Docker volume of each cache path of `repo`'s clones (the defaults first): volume
    name -> path in the clone. One volume per repository and path, whatever the letter case
    of the repository's name."""
    volumes: dict[str, str] = {}
    key = repo.casefold()
    name = _TAG_UNSAFE.sub("-", key).strip("-") or "repository"
    for path in dict.fromkeys((*DEFAULT_CACHES, *paths)):
        digest = hashlib.sha256(f"{key}\0{path}".encode("utf-8", "surrogateescape")).hexdigest()
        volumes[f"shadowclone-cache-{name[:60].strip('-') or 'repository'}-{digest[:12]}"] = path
    return volumes
