"""A dev container's Compose files, read as the Compose specification reads them: variables,
merged files, which services start and in what order, and one clear line for what cannot work."""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st
from shadowclone.environment import compose
from shadowclone.environment.compose_yaml import interpolate
from shadowclone.environment.declared import from_reading
from shadowclone.errors import BadInput

CONFIG = ".devcontainer/devcontainer.json"
NAMES = st.text(string.ascii_letters + "_", min_size=1, max_size=6).filter(
    lambda name: not name[0].isdigit()
)
VALUES = st.text(string.ascii_letters + string.digits + " -/:", max_size=10)


def read(files: dict[str, str], **configuration: object) -> compose.Compose:
    found = {"dockerComposeFile": "compose.yaml", "service": "app", **configuration}
    kept = {f".devcontainer/{name}": text for name, text in files.items()}
    return compose.read(CONFIG, found, kept)


@given(st.text(max_size=40))
def test_a_doubled_dollar_is_one_dollar(text: str) -> None:
    assert interpolate(text.replace("$", "$$"), {"A": "x"}, "f") == text


@given(NAMES, st.one_of(st.none(), VALUES), VALUES)
def test_defaults_follow_the_specification(name: str, value: str | None, default: str) -> None:
    variables = {} if value is None else {name: value}
    assert interpolate(f"${{{name}:-{default}}}", variables, "f") == (value or default)
    assert interpolate(f"${{{name}-{default}}}", variables, "f") == (
        default if value is None else value
    )
    assert interpolate(f"${{{name}:+{default}}}", variables, "f") == (default if value else "")
    assert interpolate(f"${name}", variables, "f") == (value or "")
    if not value:
        with pytest.raises(BadInput, match=f"^f: variable {name} is not set"):
            interpolate(f"${{{name}:?needed}}", variables, "f")


@given(st.text(alphabet="${}:-?+ab_", max_size=20))
def test_any_text_is_read_or_refused_in_one_line(text: str) -> None:
    try:
        interpolate(text, {"a": "1"}, "compose.yaml: services.x.image")
    except BadInput as error:
        assert "\n" not in str(error) and str(error).startswith("compose.yaml: services.x.image")


def test_a_default_may_hold_another_variable() -> None:
    assert interpolate("${A:-${B:-deep}}/x", {}, "f") == "deep/x"
    assert interpolate("${A:-${B}}", {"B": "b"}, "f") == "b"


@given(
    st.dictionaries(st.sampled_from("abcdefgh"), st.lists(st.sampled_from("abcdefgh"), max_size=3))
)
def test_each_service_starts_after_those_it_needs(edges: dict[str, list[str]]) -> None:
    """Any graph of `depends_on` without a cycle starts in an order that respects it; one with
    a cycle is refused in one line naming it."""
    names = sorted({"app", *edges, *(n for needed in edges.values() for n in needed)})
    services = {
        name: {"image": "img", "depends_on": sorted(set(edges.get(name, [])) - {name})}
        for name in names
    }
    text = json.dumps({"services": services})  # JSON is YAML
    try:
        found = read({"compose.yaml": text})
    except BadInput as error:
        assert "in a cycle" in str(error) and "\n" not in str(error)
        return
    order = [service.name for service in found.others]
    assert sorted(order) == sorted(set(names) - {"app"})
    for position, name in enumerate(order):
        for needed in services[name]["depends_on"]:
            assert needed == "app" or order.index(needed) < position


def test_files_merge_in_order_and_variables_come_from_the_projects_env() -> None:
    base = (
        "services:\n  app:\n    build: .\n    environment: [A=1, B=2]\n"
        "  db:\n    image: postgres:${PG:-15}\n    volumes: [data:/var/lib/data]\n"
    )
    override = (
        "services:\n  app:\n    environment:\n      B: three\n"
        "  db:\n    volumes: ['tmp-data:/tmp/data']\n    ports: ['5432:5432']\n"
    )
    found = read(
        {"compose.yaml": base, "more.yaml": override, ".env": "PG=16\n"},
        dockerComposeFile=["compose.yaml", "more.yaml"],
    )
    assert found.service.dockerfile == ".devcontainer/Dockerfile"
    assert found.service.environment == {"A": "1", "B": "three"}
    [db] = found.others
    assert db.image == "postgres:16"
    assert [v.name for v in db.volumes] == ["data", "tmp-data"]
    assert "services.db.ports" in found.ignored


def test_what_is_not_applied_names_the_file_that_wrote_it() -> None:
    base = (
        "services:\n  app:\n    image: a\n  db:\n    image: d\n    privileged: true\n"
        "    volumes: [data:/data]\n    cap_add: [NET_ADMIN]\n"
    )
    override = (
        "services:\n  db:\n    privileged: false\n    volumes: ['./seed.sql:/seed.sql']\n"
        "    devices: ['/dev/fuse']\n"
    )
    found = read(
        {"compose.yaml": base, "more.yaml": override},
        dockerComposeFile=["compose.yaml", "more.yaml"],
    )
    first, second = ".devcontainer/compose.yaml", ".devcontainer/more.yaml"
    assert set(found.not_applied) == {
        f"{first}: services.db.cap_add",  # only the first file has it
        f"{second}: services.db.devices",  # only the second
        f"{first} + {second}: services.db.volumes[1]",  # both files' lists are merged
    }  # privileged: the second file's false replaced the first's true


def test_run_services_and_profiles_choose_what_starts() -> None:
    text = (
        "services:\n  app:\n    image: a\n    depends_on: [db]\n  db:\n    image: d\n"
        "  cache:\n    image: c\n  debug:\n    image: x\n    profiles: [debug]\n"
    )
    assert [s.name for s in read({"compose.yaml": text}).others] == ["db", "cache"]
    chosen = read({"compose.yaml": text}, runServices=["debug"])
    assert [s.name for s in chosen.others] == ["db", "debug"]  # the clone's needs start too


def test_what_a_service_may_not_do_is_named_never_dropped() -> None:
    text = (
        "services:\n  app:\n    image: a\n    volumes: ['..:/workspaces:cached']\n"
        "  db:\n    image: d\n    privileged: true\n    volumes: ['./init.sql:/init.sql']\n"
        "    network_mode: host\n"
    )
    found = read({"compose.yaml": text})
    where = ".devcontainer/compose.yaml: services.db"
    assert set(found.not_applied) == {
        f"{where}.privileged",
        f"{where}.volumes[0]",
        f"{where}.network_mode",
    }
    assert found.others[0].volumes == () and found.others[0].network_mode is None
    assert "services.app.volumes" in found.ignored


@pytest.mark.parametrize(
    ("files", "configuration", "line"),
    [
        ({}, {}, f"{CONFIG}: dockerComposeFile: .devcontainer/compose.yaml is not a file"),
        ({"compose.yaml": "services: [\n"}, {}, ".devcontainer/compose.yaml: not valid YAML"),
        ({"compose.yaml": "services: {db: {image: d}}"}, {}, f"{CONFIG}: service: expected"),
        (
            {"compose.yaml": "services: {app: {image: a, extends: {service: b}}}"},
            {},
            ".devcontainer/compose.yaml: services.app.extends: not supported",
        ),
        (
            {"compose.yaml": "services: {app: {image: a, depends_on: [nowhere]}}"},
            {},
            f"{CONFIG}: a Compose service needs nowhere, which is not defined",
        ),
        (
            {"compose.yaml": "services: {app: {image: '${TAG:?set TAG}'}}"},
            {},
            ".devcontainer/compose.yaml: services.app.image: variable TAG is not set (set TAG)",
        ),
        ({"compose.yaml": "services: {app: {image: a}}"}, {"dockerComposeFile": "/etc/x"}, ""),
        (
            {"compose.yaml": "services: {app: {image: a, depends_on: {db: now}}, db: {image: d}}"},
            {},
            ".devcontainer/compose.yaml: services.app.depends_on.db: expected a mapping",
        ),
        (
            {"compose.yaml": "services: {app: {}}"},
            {},
            ".devcontainer/compose.yaml: services.app.image: expected image or build",
        ),
    ],
)
def test_what_cannot_work_is_one_line(
    files: dict[str, str], configuration: dict[str, object], line: str
) -> None:
    with pytest.raises(BadInput) as raised:
        read(files, **configuration)
    assert "\n" not in str(raised.value)
    assert str(raised.value).startswith(line or f"{CONFIG}: dockerComposeFile: expected")


def test_a_key_no_one_knows_is_named_as_not_applied() -> None:
    found = read({"compose.yaml": "services: {app: {image: a}, db: {image: d, 1: x}}"})
    assert found.not_applied == {
        ".devcontainer/compose.yaml: services.db.1": "not a key shadowclone knows"
    }


def test_an_alias_bomb_is_refused() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 12)]
    text = "\n".join([*lines, "services: {app: {image: a, command: *a11}}"])
    with pytest.raises(BadInput, match="over 20000 values"):
        read({"compose.yaml": text})


@given(st.text(max_size=200))
def test_any_file_is_read_or_refused_in_one_line(text: str) -> None:
    try:
        read({"compose.yaml": text})
    except BadInput as error:
        assert "\n" not in str(error)


def test_the_reading_survives_its_trip_through_an_image_label() -> None:
    text = (
        "services:\n  app:\n    image: a\n    depends_on: {db: {condition: service_healthy}}\n"
        "  db:\n    image: d\n    command: run --fast\n    tmpfs: /run\n"
        "    healthcheck: {test: pg_isready, interval: 1m30s, retries: 3}\n"
    )
    found = read({"compose.yaml": text})
    assert compose.Compose.from_json(json.loads(json.dumps(found.to_json()))) == found
    assert found.others[0].healthcheck is not None
    assert found.others[0].healthcheck.interval_s == 90.0
    with pytest.raises(BadInput, match="^not a Compose reading"):
        compose.Compose.from_json({"files": 3})


def test_the_clone_takes_its_services_base_and_variables() -> None:
    kept = {
        ".devcontainer/compose.yaml": (
            "services:\n  app:\n    build: {context: .., dockerfile: .devcontainer/Dockerfile,"
            " args: [V=1]}\n    environment: {FROM_SERVICE: s, BOTH: service}\n"
        )
    }
    configuration = {
        "dockerComposeFile": "compose.yaml",
        "service": "app",
        "containerEnv": {"BOTH": "container"},
    }
    environment = from_reading({"configuration": configuration}, CONFIG, (), kept)
    assert (environment.dockerfile, environment.context) == (".devcontainer/Dockerfile", ".")
    assert environment.build_args == {"V": "1"}
    assert environment.env == {"FROM_SERVICE": "s", "BOTH": "container"}
    assert environment.files() == (CONFIG, ".devcontainer/compose.yaml", ".devcontainer/Dockerfile")
