"""devcontainer.json, read as the Dev Container specification reads it.

Three parts:

- `configurations` and `choose`: where the specification finds a configuration (the root
  `.devcontainer.json`, `.devcontainer/devcontainer.json`, `.devcontainer/NAME/devcontainer.json`)
  and which one a clone uses when there are several.
- `locate`: the setup check clone's first look at the chosen file (comments and trailing commas
  allowed), only to know which Dockerfile and build context to copy from GitHub: the clone image
  has no Dev Containers CLI.
- `read_configuration` and `from_reading`: the reading itself, by the pinned reference CLI
  (`devcontainer read-configuration`, on the machine that runs setup): every variable substituted
  as the specification says, then mapped to one `Environment`. Every key that changes a clone's
  environment is either applied or named as not applied yet; the keys that only concern an
  editor or the host are named as ignored; what cannot work (no base) is refused in one line
  naming the file and the key. Docker Compose files are read by `environment/compose.py`.
"""

from __future__ import annotations

import functools
import json
import os
import posixpath
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import json5

from shadowclone.errors import BadInput

ROOT_CONFIG = ".devcontainer.json"
DEFAULT_CONFIG = ".devcontainer/devcontainer.json"
FOLDER = ".devcontainer"
MAX_FOLDERS = 32
"""At most this many folders of `.devcontainer` are looked into for a configuration."""

READING_PATH = ".git/devcontainer-reading.json"
"""Where setup keeps the reference CLI's reading beside the repository's files: git tracks
nothing under `.git/`, so no file of the repository can be there."""

CLI_VARIABLE = "SHADOWCLONE_DEVCONTAINER_CLI"
"""A path to the `devcontainer` program (its devcontainer.js) to use instead of the one found."""

READ_TIMEOUT_S = 60.0


def cli_version() -> str:
    """The Dev Containers CLI version this shadowclone reads with (devcontainer-cli.env)."""
    text = resources.files("shadowclone.environment").joinpath("devcontainer-cli.env").read_text()
    found = re.search(r"^DEVCONTAINER_CLI_VERSION=(\S+)$", text, re.MULTILINE)
    assert found is not None, "devcontainer-cli.env names no DEVCONTAINER_CLI_VERSION"
    return found.group(1)


def is_configuration(path: str) -> bool:
    """Whether `path` is where the specification looks for a configuration."""
    if path in (ROOT_CONFIG, DEFAULT_CONFIG):
        return True
    parts = path.split("/")
    return len(parts) == 3 and parts[0] == FOLDER and parts[2] == "devcontainer.json"


def ordered(found: Sequence[str]) -> tuple[str, ...]:
    """The configurations in the order a tool offers them: `.devcontainer/devcontainer.json`,
    the root `.devcontainer.json`, then the folders' by name."""
    rank = {DEFAULT_CONFIG: 0, ROOT_CONFIG: 1}
    return tuple(sorted(set(found), key=lambda path: (rank.get(path, 2), path)))


def choose(found: Sequence[str], wanted: str | None = None) -> str:
    """The configuration a clone uses among those `found`: `wanted` (setup's `--devcontainer`),
    or the one the reference CLI picks by itself (`.devcontainer/devcontainer.json`, then
    `.devcontainer.json`), or the only one there is; BadInput naming every one found otherwise."""
    listed = ordered(found)
    named = ", ".join(listed)
    if wanted is not None:
        wanted = posixpath.normpath(wanted)
        if wanted not in listed:
            raise BadInput(
                f"--devcontainer {wanted}: not a configuration of the repository "
                f"(found: {named or 'none'})"
            )
        return wanted
    for default in (DEFAULT_CONFIG, ROOT_CONFIG):
        if default in listed:
            return default
    if len(listed) == 1:
        return listed[0]
    raise BadInput(
        f"{FOLDER}: {len(listed)} dev container configurations and no default one ({named}): "
        "choose one with `shadowclone setup OWNER/REPO --devcontainer PATH`"
    )


def _fail(path: str, key: str, expected: str) -> BadInput:
    where = f"{path}: {key}" if key else path
    return BadInput(f"{where}: expected {expected}")


def _inside(path: str, key: str, relative: object) -> str:
    """`relative`, a path from the folder of the configuration `path`, as a path in the
    repository; refused if it is not a path or leaves the repository."""
    if not isinstance(relative, str) or not relative.strip() or "\0" in relative:
        raise _fail(path, key, "a non-empty string")
    if relative.startswith("/"):
        raise _fail(path, key, "a path relative to its file's folder")
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), relative))
    if joined == ".." or joined.startswith("../"):
        raise _fail(path, key, "a path inside the repository")
    return joined


def base_of(path: str, data: Mapping[str, Any]) -> tuple[str | None, str | None, str]:
    """The image, or the Dockerfile and its context (paths in the repository), of a
    configuration's object, as the specification tells which one it is (a Compose
    configuration's is its service's: `compose.read`)."""
    build = data.get("build")
    if build is not None and not isinstance(build, dict):
        raise _fail(path, "build", "an object with dockerfile, context and args")
    build = build or {}
    if "dockerFile" in data or "dockerfile" in build:
        key = "build.dockerfile" if "dockerfile" in build else "dockerFile"
        dockerfile = _inside(path, key, build.get("dockerfile", data.get("dockerFile")))
        context_key = "build.context" if "context" in build else "context"
        relative = build.get("context", data.get("context", "."))
        return None, dockerfile, _inside(path, context_key, relative)
    if "image" in data:
        image = data["image"]
        if not isinstance(image, str) or not image.strip() or "\0" in image:
            raise _fail(path, "image", "a non-empty string")
        return image, None, posixpath.dirname(path) or "."
    raise _fail(path, "image", "image, build.dockerfile or dockerComposeFile")


MAX_FEATURES = 64
"""At most this many features in one configuration."""


def features_of(path: str, data: Mapping[str, Any]) -> tuple[str, ...]:
    """The features a configuration installs, by their ids as written (an OCI reference, a
    tarball's URL, or `./folder` beside the configuration)."""
    features = data.get("features")
    if features is None or features == {}:
        return ()
    if not isinstance(features, dict) or len(features) > MAX_FEATURES:
        raise _fail(path, "features", f"an object of at most {MAX_FEATURES} features")
    for feature, options in features.items():
        if not feature.strip() or "\0" in feature:
            raise _fail(path, "features", "non-empty feature ids")
        if not isinstance(options, (dict, str, bool)):
            raise _fail(path, f"features.{feature}", "an object of options, a version or true")
    return tuple(features)


def local_feature_folders(path: str, data: Mapping[str, Any]) -> tuple[str, ...]:
    """The folders (paths in the repository) of the features kept beside the configuration:
    setup copies them with it, as it copies a Dockerfile's context."""
    return tuple(
        _inside(path, f"features.{feature}", feature)
        for feature in features_of(path, data)
        if feature.startswith(("./", "../"))
    )


def parse_text(path: str, text: str) -> dict[str, Any]:
    """The JSON object of a configuration (comments and trailing commas allowed)."""
    try:
        data: Any = json5.loads(text)
    except (ValueError, RecursionError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise BadInput(f"{path}: not valid JSON with comments ({first})") from None
    if not isinstance(data, dict):
        raise _fail(path, "", "a JSON object")
    return data


def locate(path: str, text: str) -> tuple[str | None, str, str]:
    """The Dockerfile (None for an image) and build context a configuration names, as paths in
    the repository, and the key that names the Dockerfile: what the check clone copies besides
    the configuration (and its local features' folders: `local_feature_folders`)."""
    data = parse_text(path, text)
    features_of(path, data)
    if "dockerComposeFile" in data:  # the Compose files say: `compose.references`
        return None, posixpath.dirname(path) or ".", "dockerComposeFile"
    _, dockerfile, context = base_of(path, data)
    build = data.get("build")
    named = isinstance(build, dict) and "dockerfile" in build
    return dockerfile, context, "build.dockerfile" if named else "dockerFile"


# What a clone does with each key of a configuration.
APPLIED = frozenset(
    {"image", "build", "dockerFile", "context", "containerEnv", "workspaceFolder"}
    | {"features", "overrideFeatureInstallOrder", "remoteEnv"}
    | {"onCreateCommand", "updateContentCommand", "postCreateCommand", "postStartCommand"}
    | {"dockerComposeFile", "service", "runServices"}
)
"""Used to make the clone's image (the base, its features, the build's arguments, the
variables), to start the Compose services beside it, or run in the clone's workspace before the
engine starts (the lifecycle commands, in the workspace folder the configuration names)."""
NOT_APPLIED = {
    "postAttachCommand": "not run: no tool attaches to a clone",
    "initializeCommand": "not run (it runs on the host)",
    "remoteUser": "the engine always runs as the clone's own user",
    "containerUser": "the engine always runs as the clone's own user",
    "workspaceMount": "the clone mounts nothing of the host",
    "mounts": "the clone mounts nothing of the host",
    "runArgs": "the launcher sets the container's options",
    "capAdd": "the launcher sets the container's capabilities",
    "privileged": "the launcher sets the container's capabilities",
    "securityOpt": "the launcher sets the container's security options",
    "init": "the launcher sets the container's init",
    "build.target": "not applied yet",
    "build.cacheFrom": "not applied yet",
    "build.options": "not applied yet",
}
"""Keys that change a container's environment but not yet a clone's: each named, with why."""
BUILD_APPLIED = frozenset({"dockerfile", "context", "args"})


def not_applied(configuration: Mapping[str, Any]) -> dict[str, str]:
    """Each key of a configuration that would change the environment but a clone does not apply
    (empty values left out), with the reason."""
    found: dict[str, str] = {}
    build = configuration.get("build")
    keys = list(configuration)
    if isinstance(build, dict):
        keys += [f"build.{key}" for key in build if key not in BUILD_APPLIED]
    for key in keys:
        value = (
            build.get(key.removeprefix("build."))
            if key.startswith("build.") and isinstance(build, dict)
            else configuration.get(key)
        )
        if key in NOT_APPLIED and value not in ("", [], {}, None, False):
            found[key] = NOT_APPLIED[key]
        elif key.startswith("build.") and key not in NOT_APPLIED:
            found[key] = "not applied yet"
    return found


def ignored(configuration: Mapping[str, Any]) -> tuple[str, ...]:
    """The keys that only concern an editor or the host (name, customizations, ports...), and
    those left empty (`"features": {}`)."""
    left = set(configuration) - APPLIED - set(not_applied(configuration)) - {"configFilePath"}
    return tuple(sorted(left))


# Running the reference CLI.


def _checkout_cli() -> Path:
    """Where scripts/install-devcontainer-cli puts the CLI in a checkout of shadowclone."""
    root = Path(__file__).resolve().parents[4]
    return root / "tools/devcontainer-cli/node_modules/@devcontainers/cli/devcontainer.js"


def find_cli() -> Path | None:
    """The pinned CLI's program: `SHADOWCLONE_DEVCONTAINER_CLI`, a checkout's tools/, or
    `devcontainer` on PATH; None when none is there."""
    named = os.environ.get(CLI_VARIABLE)
    if named:
        return Path(named)
    if _checkout_cli().is_file():
        return _checkout_cli()
    found = shutil.which("devcontainer")
    return Path(found).resolve() if found else None


def _missing() -> str:
    version = cli_version()
    return (
        f"reading it needs the Dev Containers CLI {version} (`npm install -g "
        f"@devcontainers/cli@{version}`, or scripts/install-devcontainer-cli in a checkout)"
    )


@functools.cache
def checked_command(program: Path) -> tuple[str, ...]:
    """The command that runs `program` with node, once its version is the pinned one;
    BadInput (without the file's name) otherwise."""
    node = shutil.which("node")
    if node is None:
        raise BadInput(f"{_missing()}: no node on PATH")
    command = (node, str(program))
    try:
        done = subprocess.run(
            [*command, "--version"],
            check=False,
            capture_output=True,
            text=True,
            timeout=READ_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise BadInput(f"{_missing()}: {program} did not run ({error})") from None
    version = done.stdout.strip()
    if done.returncode != 0 or version != cli_version():
        raise BadInput(f"{_missing()}: {program} is version {version or 'unknown'}")
    return command


def clean_env(node: str) -> dict[str, str]:
    """The CLI's environment: nothing of the owner's (`${localEnv:X}` is read from it)."""
    return {"PATH": os.pathsep.join(dict.fromkeys([str(Path(node).parent), "/usr/bin", "/bin"]))}


def cli_command() -> tuple[str, ...]:
    """The pinned CLI, ready to run (node and its program): what builds an image with
    features. BadInput saying how to install it when it is missing or another version."""
    program = find_cli()
    if program is None:
        raise BadInput(_missing())
    return checked_command(program)


def _last_error(stderr: str) -> str:
    """The CLI's error, from its JSON log lines: the first line of the last message."""
    message = ""
    for line in stderr.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("text"), str):
            text = entry["text"].strip()
            if text and not text.startswith(("Run: ", "@devcontainers/cli ")):
                message = text.splitlines()[0]
    return message or "no message"


def _replace(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_replace(item, old, new) for item in value]
    if isinstance(value, dict):
        return {key: _replace(item, old, new) for key, item in value.items()}
    return value


def read_configuration(text: str, source: str, name: str) -> dict[str, Any]:
    """The reference CLI's reading of the configuration `text`, found at `source` in the
    repository called `name`: {"configuration": ..., "workspaceFolder": ...}, every variable
    substituted. A clone has no host folder: the local workspace folder is read as the
    container's, and `${localEnv:X}` as the CLI's own clean environment has it (empty but for
    PATH). BadInput in one line naming `source` when the CLI is missing or refuses it."""
    program = find_cli()
    if program is None:
        raise BadInput(f"{source}: {_missing()}")
    try:
        command = checked_command(program)
    except BadInput as error:
        raise BadInput(f"{source}: {error}") from None
    true = shutil.which("true")
    if true is None:
        raise BadInput(f"{source}: reading it needs a `true` program on PATH")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "repository"
    with tempfile.TemporaryDirectory(prefix="shadowclone-devcontainer-") as temporary:
        workspace = Path(temporary).resolve() / safe
        config = workspace / source
        config.parent.mkdir(parents=True)
        config.write_text(text)
        args = ["read-configuration", "--workspace-folder", str(workspace), "--config", str(config)]
        args += ["--docker-path", true, "--log-format", "json"]
        try:
            done = subprocess.run(
                [*command, *args],
                check=False,
                capture_output=True,
                text=True,
                timeout=READ_TIMEOUT_S,
                env=clean_env(command[0]),
                cwd=temporary,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise BadInput(f"{source}: the Dev Containers CLI did not run ({error})") from None
        if done.returncode != 0:
            said = _last_error(done.stderr).replace(str(workspace) + "/", "")
            raise BadInput(f"{source}: the Dev Containers CLI refused it: {said}")
        try:
            answer = json.loads(done.stdout)
            configuration = dict(answer["configuration"])
            folder = str(answer["workspace"]["workspaceFolder"])
        except (ValueError, KeyError, TypeError):
            raise BadInput(f"{source}: the Dev Containers CLI gave no configuration") from None
        configuration.pop("configFilePath", None)
        configuration = _replace(configuration, str(workspace), folder)
    return {"cli": cli_version(), "configuration": configuration, "workspaceFolder": folder}
