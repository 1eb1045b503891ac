"""A repository's environment declaration: devcontainer.json and environment.toml read into one
`Environment`, anything malformed refused in one line naming the file and the key, and the
image tag changing with every input and only with them."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shadowclone.environment.declared import (
    DEFAULT_CACHES,
    DEVCONTAINER_PATH,
    TOML_PATH,
    Environment,
    cache_volumes,
    declared,
    from_reading,
    image_tag,
    parse_environment_toml,
)
from shadowclone.environment.devcontainer import READING_PATH, parse_text
from shadowclone.errors import BadInput
from shadowclone.node.lifecycle import Lifecycle


def parse_devcontainer(text: str, path: str = DEVCONTAINER_PATH) -> Environment:
    """`text` read as the reference CLI reads a configuration without variables: its object
    as it is (the corpus test compares with the CLI itself)."""
    reading = {"configuration": parse_text(path, text), "workspaceFolder": "/workspaces/app"}
    return from_reading(reading, path)


DEVCONTAINER = """\
// The project's dev container
{
  "name": "app",
  "build": {
    "dockerfile": "Dockerfile",
    "context": "..",
    "args": {"GO_VERSION": "1.22"},
  },
  /* run once the container exists */
  "onCreateCommand": ["make", "deps"],
  "postCreateCommand": {"tools": "go install ./...", "hooks": ["git", "config", "x", "y"]},
  "containerEnv": {"GOFLAGS": "-mod=mod"},
  "remoteUser": "vscode",
  "features": {"ghcr.io/devcontainers/features/go:1": {}},
}
"""


def test_a_devcontainer_with_a_dockerfile_and_every_command_shape() -> None:
    environment = parse_devcontainer(DEVCONTAINER)
    assert environment == Environment(
        source=DEVCONTAINER_PATH,
        dockerfile=".devcontainer/Dockerfile",
        context=".",
        build_args={"GO_VERSION": "1.22"},
        lifecycle=Lifecycle(
            on_create=("make deps",),
            post_create=("go install ./...", "git config x y"),
            workspace_folder="/workspaces/app",
            names={"postCreateCommand": ("tools", "hooks")},
        ),
        env={"GOFLAGS": "-mod=mod"},
        user="vscode",
        found=(DEVCONTAINER_PATH,),
        features=("ghcr.io/devcontainers/features/go:1",),
        not_applied={"remoteUser": "the engine always runs as the clone's own user"},
        ignored=("name",),
    )
    assert environment.files() == (DEVCONTAINER_PATH, ".devcontainer/Dockerfile")
    assert environment.lifecycle.groups() == [
        [("onCreateCommand", "make deps")],
        [
            ("postCreateCommand.tools", "go install ./..."),
            ("postCreateCommand.hooks", "git config x y"),
        ],
    ]


def test_the_legacy_dockerfile_keys_and_empty_commands() -> None:
    text = '{"dockerFile": "Dockerfile", "context": "..", "postCreateCommand": "",'
    text += ' "onCreateCommand": [], "postStartCommand": "", "updateContentCommand": "make"}'
    environment = parse_devcontainer(text, ".devcontainer/py/devcontainer.json")
    assert (environment.dockerfile, environment.context) == (
        ".devcontainer/py/Dockerfile",
        ".devcontainer",
    )
    assert environment.setup == ()
    assert environment.lifecycle.commands() == [("updateContentCommand", "make")]
    assert environment.not_applied == {}


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            '{"dockerComposeFile": "c.yml", "service": "app"}',
            "dockerComposeFile: .devcontainer/c.yml is not a file of the repository",
        ),
        ('{"name": "x"}', "image: expected image, build.dockerfile or dockerComposeFile"),
        ('{"dockerFile": 3}', "dockerFile: expected a non-empty string"),
    ],
)
def test_what_cannot_work_is_refused_naming_the_key(text: str, where: str) -> None:
    with pytest.raises(BadInput, match=re.escape(f"{DEVCONTAINER_PATH}: {where}")):
        parse_devcontainer(text)


def test_remote_env_is_read_with_null_as_unset_and_container_variables_read_in_the_clone() -> None:
    text = '{"image": "debian", "remoteEnv": {"PATH": "/w/bin:${containerEnv:PATH}", "X": null,'
    text += ' "Y": "${containerEnv:NOPE:fallback}-${containerEnv:MISSING}"}}'
    lifecycle = parse_devcontainer(text).lifecycle
    assert lifecycle.remote_env == {
        "PATH": "/w/bin:${containerEnv:PATH}",
        "Y": "${containerEnv:NOPE:fallback}-${containerEnv:MISSING}",
    }
    assert lifecycle.environment({"PATH": "/usr/bin"}) == {
        "PATH": "/w/bin:/usr/bin",
        "Y": "fallback-",
    }


@given(st.dictionaries(st.from_regex(r"[A-Z_]{1,8}", fullmatch=True), st.text(max_size=20)))
def test_container_variables_are_read_whatever_the_clone_has(inherited: dict[str, str]) -> None:
    names = sorted(inherited)
    remote = {f"V{i}": f"<${{containerEnv:{name}}}>" for i, name in enumerate(names)}
    lifecycle = Lifecycle(remote_env=remote)
    assert lifecycle.environment(inherited) == {
        f"V{i}": f"<{inherited[name]}>" for i, name in enumerate(names)
    }


@pytest.mark.parametrize(
    ("env", "where"),
    [
        ('{"SHADOWCLONE_RUN_FOLDER": "/x"}', "remoteEnv.SHADOWCLONE_RUN_FOLDER: expected a name"),
        ('{"1X": "y"}', "remoteEnv.1X: expected a variable name"),
        ('{"X": 3}', "remoteEnv.X: expected a string"),
    ],
)
def test_a_remote_env_that_cannot_be_set_is_refused(env: str, where: str) -> None:
    with pytest.raises(BadInput, match=re.escape(f"{DEVCONTAINER_PATH}: {where}")):
        parse_devcontainer(f'{{"image": "debian", "remoteEnv": {env}}}')


@pytest.mark.parametrize("folder", ["src", "/", "/usr/src/app", "/work/../etc"])
def test_a_workspace_folder_outside_the_clone_s_own_is_refused(folder: str) -> None:
    reading = {"configuration": {"image": "debian"}, "workspaceFolder": folder}
    with pytest.raises(BadInput, match=re.escape(f"{DEVCONTAINER_PATH}: workspaceFolder: ")):
        from_reading(reading, DEVCONTAINER_PATH)


def test_a_devcontainer_is_read_from_the_kept_reading_only() -> None:
    reading = {"source": ".devcontainer.json", "found": [".devcontainer.json"]}
    reading["configuration"] = {"image": "debian"}  # type: ignore[assignment]
    environment = declared({READING_PATH: json.dumps(reading), ".devcontainer.json": "{}"})
    assert environment is not None and environment.image == "debian"
    with pytest.raises(BadInput, match="kept by an older setup"):
        declared({DEVCONTAINER_PATH: DEVCONTAINER})


def test_environment_toml_wins_over_a_devcontainer() -> None:
    toml = 'image = "debian:bookworm"\nsetup = ["apt-get install -y golang"]\n'
    toml += 'checks = ["make test"]\ncaches = ["/root/go/pkg/mod"]\n[env]\nCGO_ENABLED = "0"\n'
    environment = declared({TOML_PATH: toml, DEVCONTAINER_PATH: DEVCONTAINER})
    assert environment == Environment(
        source=TOML_PATH,
        image="debian:bookworm",
        context=".shadowclone",
        setup=("apt-get install -y golang",),
        env={"CGO_ENABLED": "0"},
        checks=("make test",),
        caches=("/root/go/pkg/mod",),
    )
    assert declared({"README.md": "# app"}) is None


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"image": 3}', "devcontainer.json: image: expected a non-empty string"),
        ("{}", "devcontainer.json: image: expected image, build.dockerfile or dockerComposeFile"),
        ('{"build": {}}', "image: expected image, build.dockerfile or dockerComposeFile"),
        ('{"build": {"dockerfile": "../../D"}}', "build.dockerfile: expected a path inside"),
        ('{"build": {"dockerfile": "/D"}}', "build.dockerfile: expected a path relative"),
        ('{"image": "x", "containerEnv": {"A B": "1"}}', "containerEnv.A B: expected a variable"),
        ('{"image": "x", "containerEnv": {"A": 1}}', "containerEnv.A: expected a string"),
        ('{"image": "x", "containerEnv": {"A": "1\\n2"}}', "containerEnv.A: expected a value on"),
        ('{"image": "x", "onCreateCommand": 3}', "onCreateCommand: expected a command"),
        ('{"image": "x", "postCreateCommand": {"a": [1]}}', "postCreateCommand.a[0]: expected"),
        ('{"image": "x",,}', "devcontainer.json: not valid JSON with comments"),
        ("[]", "devcontainer.json: expected a JSON object"),
    ],
)
def test_a_malformed_devcontainer_is_one_line_naming_the_file_and_the_key(
    text: str, where: str
) -> None:
    with pytest.raises(BadInput) as raised:
        parse_devcontainer(text)
    message = str(raised.value)
    assert where in message and "\n" not in message and message.startswith(DEVCONTAINER_PATH)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('image = "x"\nfeatures = 1\n', "environment.toml: features: expected one of the keys"),
        ('image = "x"\ncaches = ["relative"]\n', "caches[0]: expected an absolute path"),
        ('image = "x"\ncaches = ["/"]\n', "caches[0]: expected an absolute path"),
        ('image = "x"\ncaches = ["/a/../b"]\n', "caches[0]: expected an absolute path"),
        ('image = "x"\ncaches = ["/usr/local/bin"]\n', "caches[0]: expected a path outside"),
        ('image = "x"\ncaches = ["/etc"]\n', "caches[0]: expected a path outside"),
        ('image = "x"\nsetup = "make"\n', "setup: expected a list of at most"),
        ('image = "x"\nchecks = [""]\n', "checks[0]: expected a non-empty string"),
        ('dockerfile = "../../D"\n', "dockerfile: expected a path inside the repository"),
        ('image = "x"\nimage = "y"\n', "environment.toml: not valid TOML"),
        ("", "image: expected either image or dockerfile"),
    ],
)
def test_a_malformed_environment_toml_is_one_line_naming_the_file_and_the_key(
    text: str, where: str
) -> None:
    with pytest.raises(BadInput) as raised:
        parse_environment_toml(text)
    message = str(raised.value)
    assert where in message and "\n" not in message and message.startswith(TOML_PATH)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
KEYS = st.sampled_from(
    ["image", "build", "onCreateCommand", "postCreateCommand", "containerEnv", "remoteUser"]
)


@settings(max_examples=300)
@given(st.dictionaries(KEYS | st.text(max_size=6), JSONISH, max_size=6))
def test_any_devcontainer_is_read_or_refused_in_one_line(data: dict[str, object]) -> None:
    try:
        environment = parse_devcontainer(json.dumps(data))
    except BadInput as error:
        assert "\n" not in str(error) and str(error).startswith(DEVCONTAINER_PATH)
        return
    assert (environment.image is None) != (environment.dockerfile is None)
    assert all(not path.startswith("..") for path in environment.files())


@settings(max_examples=300)
@given(st.text(max_size=200))
def test_any_text_is_read_or_refused_in_one_line(text: str) -> None:
    for parse, path in (
        (parse_devcontainer, DEVCONTAINER_PATH),
        (parse_environment_toml, TOML_PATH),
    ):
        try:
            parse(text)
        except BadInput as error:
            assert "\n" not in str(error) and str(error).startswith(path)


FILES = st.dictionaries(st.text(min_size=1, max_size=12), st.text(max_size=20), max_size=4)


@settings(max_examples=200)
@given(repo=st.text(min_size=1, max_size=30), image=st.text(max_size=10), files=FILES)
def test_the_image_tag_is_a_docker_reference_and_follows_its_inputs(
    repo: str, image: str, files: dict[str, str]
) -> None:
    tag = image_tag(repo, image, files)
    assert re.fullmatch(r"shadowclone-env/[a-z0-9]+(-[a-z0-9]+)*:[0-9a-f]{20}", tag), tag
    assert image_tag(repo, image, dict(reversed(files.items()))) == tag  # order is no input
    assert image_tag(repo, image + "x", files) != tag
    assert image_tag(repo, image, {**files, "extra": "x"}) != tag or "extra" in files
    for name, text in files.items():
        assert image_tag(repo, image, {**files, name: text + "!"}) != tag


@settings(max_examples=100)
@given(repo=st.text(min_size=1, max_size=40), paths=st.lists(st.text(max_size=10), max_size=4))
def test_each_repository_and_path_has_its_own_cache_volume(repo: str, paths: list[str]) -> None:
    volumes = cache_volumes(repo, tuple(paths))
    assert list(volumes.values())[: len(DEFAULT_CACHES)] == list(DEFAULT_CACHES)
    assert sorted(volumes.values()) == sorted(set(DEFAULT_CACHES) | set(paths))
    assert all(re.fullmatch(r"shadowclone-cache-[a-z0-9-]+-[0-9a-f]{12}", v) for v in volumes)
    assert cache_volumes(repo.upper(), tuple(paths)) == volumes  # one repository, any case
    assert not set(cache_volumes(repo + "x", tuple(paths))) & set(volumes)
