"""What a prebuild is told and what a clone reads of a prebuilt image's files: any commands and
variables survive the trip as they were; anything malformed in an image's info file is never
taken for a prebuild (the clone runs every command itself)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from shadowclone import contract
from shadowclone.node.lifecycle import LIFECYCLE_KEYS, PREBUILT_KEYS, Lifecycle, PrebuildSpec
from shadowclone.run.lifecycle import read_prebuilt

lines = st.lists(st.text(max_size=40), max_size=3).map(tuple)


@st.composite
def lifecycles(draw: st.DrawFn) -> Lifecycle:
    """Any commands, some keys' commands named (a table in devcontainer.json)."""
    commands: dict[str, tuple[str, ...]] = {key: draw(lines) for key in LIFECYCLE_KEYS}
    names: dict[str, tuple[str, ...]] = {}
    for key, found in commands.items():
        named: bool = draw(st.booleans())
        if found and named:
            names[key] = tuple(draw(st.text(min_size=1, max_size=6)) for _ in found)
    return Lifecycle(
        on_create=commands["onCreateCommand"],
        update_content=commands["updateContentCommand"],
        post_create=commands["postCreateCommand"],
        post_start=commands["postStartCommand"],
        remote_env=draw(
            st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=20), max_size=3)
        ),
        names=names,
    )


@given(lifecycles(), st.text(alphabet="0123456789abcdef", min_size=40, max_size=40))
def test_a_spec_comes_back_as_it_was_sent(lifecycle: Lifecycle, commit: str) -> None:
    back = PrebuildSpec.from_json(PrebuildSpec(commit, lifecycle).to_json())
    assert back.commit == commit
    assert back.lifecycle.prebuilt() == lifecycle.prebuilt()
    assert dict(back.lifecycle.remote_env) == dict(lifecycle.remote_env)
    assert back.lifecycle.prebuild_digest() == lifecycle.prebuild_digest()
    assert back.lifecycle.groups(PREBUILT_KEYS) == lifecycle.groups(PREBUILT_KEYS)


@given(lifecycles(), lifecycles())
def test_the_digest_changes_with_what_a_prebuild_runs_and_nothing_else(
    one: Lifecycle, other: Lifecycle
) -> None:
    same = (
        one.prebuilt() == other.prebuilt()
        and dict(one.remote_env) == dict(other.remote_env)
        and one.groups(PREBUILT_KEYS) == other.groups(PREBUILT_KEYS)
    )
    assert (one.prebuild_digest() == other.prebuild_digest()) == same


LIFECYCLE = Lifecycle(on_create=("npm ci",), post_create=("npm test",))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


def of_these_commands(value: object) -> bool:
    return isinstance(value, dict) and value.get("commands") == ["npm ci"]


@given(
    st.one_of(
        json_values.filter(lambda v: not of_these_commands(v)).map(json.dumps),
        st.binary(max_size=40).map(repr),
    )
)
def test_an_info_file_of_anything_else_is_no_prebuild(text: str) -> None:
    folder = Path(tempfile.mkdtemp())
    (folder / contract.PREBUILT_INFO).write_text(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(contract.PREBUILT_VARIABLE, str(folder))
        assert read_prebuilt(LIFECYCLE) is None


def test_an_info_file_of_these_commands_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = {"commit": "ab" * 20, "commands": ["npm ci"], "made": ["node_modules", 3]}
    (tmp_path / contract.PREBUILT_INFO).write_text(json.dumps(info))
    monkeypatch.setenv(contract.PREBUILT_VARIABLE, str(tmp_path))
    found = read_prebuilt(LIFECYCLE)
    assert found is not None
    assert (found.commit, found.made, found.ran) == (
        "ab" * 20,
        ("node_modules", "3"),
        (("onCreateCommand", "npm ci"),),
    )
    assert read_prebuilt(Lifecycle(on_create=("npm install",))) is None
    monkeypatch.setenv(contract.PREBUILT_VARIABLE, str(tmp_path / "missing"))
    assert read_prebuilt(LIFECYCLE) is None
