"""The lifecycle commands of a dev container's features, as an image's `devcontainer.metadata`
label holds them: each key's run before the configuration's, a group per feature in install
order, named ones in parallel; whatever the label holds, it is read or left out with a line,
never a crash."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from shadowclone.node.lifecycle import Lifecycle, feature_commands

METADATA = [
    {"id": "ghcr.io/devcontainers/features/node:1", "postCreateCommand": "npm -v"},
    {"id": "./local", "onCreateCommand": {"a": "echo a", "b": ["echo", "b c"]}},
    {"id": "./broken", "postStartCommand": 7, "privileged": True},
    {"postCreateCommand": "the configuration's own entry"},
]


def test_each_keys_feature_commands_run_first_in_install_order() -> None:
    features, refused = feature_commands(METADATA)
    assert refused == ["feature ./broken: postStartCommand: not a command, left out"]
    lifecycle = Lifecycle(on_create=("make",), post_create=("pytest",))
    assert lifecycle.groups(features=features) == [
        [("onCreateCommand.a of feature ./local", "echo a"),
         ("onCreateCommand.b of feature ./local", "echo 'b c'")],
        [("onCreateCommand", "make")],
        [("postCreateCommand of feature ghcr.io/devcontainers/features/node:1", "npm -v")],
        [("postCreateCommand", "pytest")],
    ]  # fmt: skip
    assert (
        lifecycle.groups(("postCreateCommand",), features)
        == lifecycle.groups(features=features)[2:]
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
entries = st.lists(
    st.fixed_dictionaries(
        {"id": st.text(min_size=1, max_size=8) | st.just("a\nb")},
        optional={
            key: json_values for key in ("onCreateCommand", "postCreateCommand", "postStartCommand")
        },
    )
    | json_values,
    max_size=4,
)


@given(entries | json_values)
def test_any_label_is_read_or_left_out_in_one_line(metadata: object) -> None:
    features, refused = feature_commands(metadata)
    assert all("\n" not in line and line.endswith("left out") for line in refused)
    for group in Lifecycle().groups(features=features):
        assert group and all(isinstance(line, str) for _, line in group)
        assert all("\n" not in label for label, _ in group)
