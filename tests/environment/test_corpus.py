"""Real devcontainer.json files from public repositories (tests/environment/corpus, each with
its SOURCE), read by shadowclone and compared with the pinned Dev Containers CLI's reading stored
beside each (scripts/read-devcontainer-corpus): the same values for every key a clone uses, every
other key named as not applied or ignored, and what cannot work refused in one line naming the
key and the file."""

from __future__ import annotations

import json
import posixpath
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from shadowclone.environment import compose_services, devcontainer
from shadowclone.environment.declared import Environment, from_reading
from shadowclone.errors import BadInput

CORPUS = Path(__file__).parent / "corpus"


def kept_files(case: Path) -> dict[str, str]:
    """The case's files as setup keeps them (its SOURCE and readings aside)."""
    found = {p.relative_to(case).as_posix(): p for p in case.rglob("*") if p.is_file()}
    return {
        path: file.read_text()
        for path, file in found.items()
        if path != "SOURCE" and not path.endswith(".reading.json")
    }


def configurations(case: Path) -> list[str]:
    found = [p.relative_to(case).as_posix() for p in case.rglob("*.json")]
    return sorted(path for path in found if devcontainer.is_configuration(path))


CASES = [(case, path) for case in sorted(CORPUS.iterdir()) for path in configurations(case)]


def stored(case: Path, path: str) -> dict[str, Any]:
    reading: dict[str, Any] = json.loads((case / f"{path}.reading.json").read_text())
    return reading


def commands(value: object) -> list[str]:
    """A lifecycle command as the specification runs it, one shell line per command."""
    if value in (None, "", [], {}):
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [shlex.join(value)]
    assert isinstance(value, dict)
    return [line for item in value.values() for line in commands(item)]


def reference_class(reading: dict[str, Any]) -> str:
    """What the reference reading says a clone can do with the configuration."""
    if "error" in reading:
        return "refused by the CLI"
    configuration = reading["configuration"]
    build = configuration.get("build") or {}
    if "dockerComposeFile" in configuration:
        return "read"
    if "dockerFile" in configuration or "dockerfile" in build or "image" in configuration:
        return "read"
    return "no base"


def compare(
    path: str, text: str, reading: dict[str, Any], found: list[str], kept: dict[str, str]
) -> str:
    """Read the configuration as setup does (the check clone's look at the file, then the
    mapping of the CLI's reading) and check it against the reference reading; returns how it
    ended: "read the same" or "refused clearly"."""
    expected = reference_class(reading)
    if expected == "read" and "dockerComposeFile" in reading["configuration"]:
        return compare_compose(path, reading, found, kept)
    if expected != "read":
        with pytest.raises(BadInput) as raised:
            devcontainer.locate(path, text)
            from_reading(reading, path, found)
        message = str(raised.value)
        assert "\n" not in message and message.startswith(f"{path}: "), message
        key = {"no base": "image"}.get(expected)
        assert key is None or message.startswith(f"{path}: {key}: "), message
        return "refused clearly"
    configuration = reading["configuration"]
    environment = from_reading(reading, path, found)
    assert devcontainer.locate(path, text) == (
        environment.dockerfile,
        environment.context,
        "build.dockerfile" if "dockerfile" in (configuration.get("build") or {}) else "dockerFile",
    )
    check_values(path, configuration, environment, reading["workspaceFolder"])
    return "read the same"


def check_values(
    path: str, configuration: dict[str, Any], environment: Environment, workspace_folder: str
) -> None:
    folder = posixpath.dirname(path)
    build = configuration.get("build") or {}
    dockerfile = build.get("dockerfile", configuration.get("dockerFile"))
    if dockerfile is not None:
        assert environment.dockerfile == posixpath.normpath(posixpath.join(folder, dockerfile))
        context = build.get("context", configuration.get("context", "."))
        assert environment.context == posixpath.normpath(posixpath.join(folder, context))
        assert environment.build_args == (build.get("args") or {})
        assert environment.image is None
    else:
        assert environment.image == configuration["image"]
    assert environment.setup == ()  # nothing of a dev container's runs without the repository
    lifecycle = environment.lifecycle
    assert list(lifecycle.on_create) == commands(configuration.get("onCreateCommand"))
    assert list(lifecycle.update_content) == commands(configuration.get("updateContentCommand"))
    assert list(lifecycle.post_create) == commands(configuration.get("postCreateCommand"))
    assert list(lifecycle.post_start) == commands(configuration.get("postStartCommand"))
    assert lifecycle.workspace_folder == workspace_folder
    remote = configuration.get("remoteEnv") or {}
    assert lifecycle.remote_env == {name: v for name, v in remote.items() if v is not None}
    assert environment.env == (configuration.get("containerEnv") or {})
    user = configuration.get("remoteUser") or configuration.get("containerUser")
    assert environment.user == user
    for key, value in configuration.items():
        named = key in environment.not_applied or key in environment.ignored
        assert key in devcontainer.APPLIED or named, f"{key} dropped silently"
        if key in devcontainer.NOT_APPLIED and value not in ("", [], {}, None, False):
            assert key in environment.not_applied, f"{key} not named as not applied"


def compare_compose(
    path: str, reading: dict[str, Any], found: list[str], kept: dict[str, str]
) -> str:
    """A Compose configuration: read with its files, or refused in one line naming a file
    and a key. Read, the clone's base is its service's as the file writes it, every service
    that starts is one of the files', and every key of every service is applied, or named as
    not applied or ignored: none dropped silently."""
    configuration = reading["configuration"]
    try:
        environment = from_reading(reading, path, found, kept)
    except BadInput as error:
        message = str(error)
        assert "\n" not in message and ": " in message, message
        where = message.partition(": ")[0].split(" + ")
        assert all(name == path or name in kept for name in where), message
        return "refused clearly"
    composed = environment.compose
    assert composed is not None
    files = [yaml.safe_load(kept[name]) or {} for name in composed.files]
    services: dict[str, dict[str, Any]] = {}
    for data in files:
        for name, service in (data.get("services") or {}).items():
            services.setdefault(name, {}).update(service or {})
    clone = services[configuration["service"]]
    assert composed.service.name == configuration["service"]
    if "build" not in clone:
        assert environment.image == clone["image"]
    else:
        assert environment.dockerfile is not None and environment.dockerfile in kept
    assert {s.name for s in composed.others} <= set(services) - {composed.service.name}
    named = set(environment.ignored) | {key.partition(": ")[2] for key in environment.not_applied}
    for name, service in services.items():
        applied = (
            compose_services.CLONE_APPLIED
            if name == composed.service.name
            else (compose_services.APPLIED)
        )
        for key, value in service.items():
            if key in applied or key.startswith("x-") or value in (None, [], {}, False):
                continue
            assert f"services.{name}.{key}" in named or any(
                item.startswith(f"services.{name}.{key}") for item in named
            ), f"services.{name}.{key} dropped silently"
    return "read the same"


@pytest.mark.parametrize(("case", "path"), CASES, ids=[f"{c.name}/{p}" for c, p in CASES])
def test_each_configuration_is_read_as_the_reference_reads_it(case: Path, path: str) -> None:
    found = configurations(case)
    compare(path, (case / path).read_text(), stored(case, path), found, kept_files(case))


def test_the_corpus_figures() -> None:
    """Over 30 real files, every layout; each read the same as the reference or refused
    clearly, none other."""
    outcomes: Counter[str] = Counter()
    for case, path in CASES:
        try:
            text, kept = (case / path).read_text(), kept_files(case)
            outcomes[compare(path, text, stored(case, path), [path], kept)] += 1
        except AssertionError:
            outcomes["other"] += 1
    layouts = {path.count("/") for _, path in CASES}
    assert len(CASES) >= 30 and layouts == {0, 1, 2}
    assert outcomes["other"] == 0, outcomes
    print(f"corpus: {dict(outcomes)}")


def test_the_default_configuration_is_chosen_among_several() -> None:
    found = configurations(CORPUS / "dotnet--runtime")
    assert devcontainer.choose(found) == devcontainer.DEFAULT_CONFIG
    chosen = devcontainer.choose(found, ".devcontainer/wasm/devcontainer.json")
    assert chosen == ".devcontainer/wasm/devcontainer.json"


@pytest.mark.parametrize(("case", "path"), CASES, ids=[f"{c.name}/{p}" for c, p in CASES])
def test_the_stored_reading_is_the_pinned_clis(
    case: Path, path: str, sc_devcontainer_cli: Path
) -> None:
    name = case.name.partition("--")[2]
    try:
        reading: dict[str, Any] = devcontainer.read_configuration(
            (case / path).read_text(), path, name
        )
    except BadInput as error:
        reading = {"cli": devcontainer.cli_version(), "error": str(error)}
    assert reading == stored(case, path)
