"""The lifecycle commands of a repository's dev container configuration, as setup keeps them
in its record and `start` hands them to a clone in its request (both sides read them)."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping, Sequence

import attrs

LIFECYCLE_KEYS = (
    "onCreateCommand",
    "updateContentCommand",
    "postCreateCommand",
    "postStartCommand",
)
"""A dev container's lifecycle commands a clone runs, in the order the specification runs
them when a container is created."""
PREBUILT_KEYS = LIFECYCLE_KEYS[:2]
"""The commands a prebuild runs once per commit of the default branch (run/prebuild.py); a
clone from its image runs only the others."""


_CONTAINER_ENV = re.compile(r"\$\{containerEnv:([^}:]+)(?::([^}]*))?\}")


@attrs.frozen
class Lifecycle:
    """The lifecycle commands of a repository's dev container configuration (each a shell
    line), which a clone runs in its workspace once its branch is there, before the engine."""

    on_create: tuple[str, ...] = ()
    update_content: tuple[str, ...] = ()
    post_create: tuple[str, ...] = ()
    post_start: tuple[str, ...] = ()
    workspace_folder: str | None = None
    """Where the configuration puts the workspace in the container (`workspaceFolder`, or the
    specification's default): a clone's workspace is reachable there too."""
    remote_env: Mapping[str, str] = attrs.field(factory=dict)
    """`remoteEnv`: variables for the lifecycle commands and the engine (never over one the run
    program sets for the engine); `${containerEnv:NAME}` in a value is read in the clone."""
    names: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    """By key, the names of its commands when the configuration names them (a command given as
    a table): named commands of one key run in parallel, as the specification runs them."""

    def environment(self, inherited: Mapping[str, str]) -> dict[str, str]:
        """`remote_env` with `${containerEnv:NAME}` (and `${containerEnv:NAME:DEFAULT}`) read
        from `inherited`, the clone's own environment."""

        def value(found: re.Match[str]) -> str:
            return inherited.get(found.group(1), found.group(2) or "")

        return {name: _CONTAINER_ENV.sub(value, text) for name, text in self.remote_env.items()}

    def commands(self) -> list[tuple[str, str]]:
        """(key, shell line) in the order they run."""
        groups = (self.on_create, self.update_content, self.post_create, self.post_start)
        pairs = zip(LIFECYCLE_KEYS, groups, strict=True)
        return [(key, line) for key, lines in pairs for line in lines]

    def groups(
        self, keys: tuple[str, ...] = LIFECYCLE_KEYS, features: Sequence[FeatureCommands] = ()
    ) -> list[list[tuple[str, str]]]:
        """The commands of `keys` in the order they run, a list per key: (label, shell line),
        the label `key` or, for a named command, `key.name`; each key's commands of
        `features` come first, a list per feature, as the specification runs them. The
        commands of one list run in parallel; a list starts once the one before it has ended
        well."""
        groups = (self.on_create, self.update_content, self.post_create, self.post_start)
        found = []
        for key, lines in zip(LIFECYCLE_KEYS, groups, strict=True):
            if key not in keys:
                continue
            found += [feature.group(key) for feature in features if feature.group(key)]
            names = self.names.get(key, ())
            if not lines:
                continue
            labels = [f"{key}.{name}" for name in names] if len(names) == len(lines) else []
            found.append(list(zip(labels or [key] * len(lines), lines, strict=True)))
        return found

    def prebuilt(self) -> list[tuple[str, str]]:
        """The commands a prebuild runs (`PREBUILT_KEYS`), in order."""
        return [(key, line) for key, line in self.commands() if key in PREBUILT_KEYS]

    def prebuild_digest(self) -> str:
        """What a prebuilt image of these commands depends on besides its commit and base."""
        made_of: dict[str, object] = {
            "commands": self.prebuilt(),
            "remote_env": sorted(self.remote_env.items()),
        }
        if any(self.names.get(key) for key in PREBUILT_KEYS):
            made_of["names"] = {key: list(self.names.get(key, ())) for key in PREBUILT_KEYS}
        return hashlib.sha256(json.dumps(made_of).encode()).hexdigest()


NO_LIFECYCLE = Lifecycle()


@attrs.frozen
class FeatureCommands:
    """The lifecycle commands a dev container feature declares (its `devcontainer-feature.json`,
    as the image's `devcontainer.metadata` label keeps it): by key, (name or "", shell line)."""

    feature: str
    commands: Mapping[str, tuple[tuple[str, str], ...]]

    def group(self, key: str) -> list[tuple[str, str]]:
        where = f" of feature {self.feature}"
        return [
            (f"{key}.{name}{where}" if name else f"{key}{where}", line)
            for name, line in self.commands.get(key, ())
        ]


def feature_commands(metadata: object) -> tuple[list[FeatureCommands], list[str]]:
    """From the entries of a `devcontainer.metadata` label (a list of objects; the features'
    carry an `id`), each feature's lifecycle commands, in install order; and one line for each
    command that is no command (a string, a list of strings, or a table of them), left out."""
    found, refused = [], []
    for entry in metadata if isinstance(metadata, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue  # the configuration's own entry: its commands are setup's reading
        feature = " ".join(entry["id"].split())  # shown in one line
        commands: dict[str, tuple[tuple[str, str], ...]] = {}
        for key in LIFECYCLE_KEYS:
            try:
                lines = _lines(entry.get(key))
            except ValueError:
                refused.append(f"feature {feature}: {key}: not a command, left out")
                continue
            if lines:
                commands[key] = lines
        if commands:
            found.append(FeatureCommands(feature, commands))
    return found, refused


def _lines(value: object) -> tuple[tuple[str, str], ...]:
    if value in (None, "", [], {}):
        return ()
    if isinstance(value, str):
        return (("", value),)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return (("", shlex.join(value)),)
    if isinstance(value, dict) and all(isinstance(name, str) for name in value):
        named = [(name, _lines(item)) for name, item in value.items() if not isinstance(item, dict)]
        if len(named) == len(value):
            return tuple((name, line) for name, lines in named for _, line in lines)
    raise ValueError("not a command")


@attrs.frozen
class PrebuildSpec:
    """What a prebuild runs (run/prebuild.py): the default branch's commit, and the commands
    of `lifecycle` that a prebuild runs."""

    commit: str
    lifecycle: Lifecycle

    def to_json(self) -> str:
        lifecycle = self.lifecycle
        return json.dumps(
            {
                "commit": self.commit,
                "on_create": list(lifecycle.on_create),
                "update_content": list(lifecycle.update_content),
                "remote_env": dict(lifecycle.remote_env),
                "names": {key: list(lifecycle.names.get(key, ())) for key in PREBUILT_KEYS},
            }
        )

    @classmethod
    def from_json(cls, text: str) -> PrebuildSpec:
        data = json.loads(text)
        lifecycle = Lifecycle(
            on_create=tuple(str(line) for line in data.get("on_create", ())),
            update_content=tuple(str(line) for line in data.get("update_content", ())),
            remote_env={str(k): str(v) for k, v in data.get("remote_env", {}).items()},
            names={
                str(key): tuple(str(name) for name in names)
                for key, names in data.get("names", {}).items()
                if names
            },
        )
        return cls(str(data["commit"]), lifecycle)
