"""What a registry says of a name it lacks: the distribution of the project's own plugin that
provides it (a core-only install), or the closest installed name."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from shadowclone.errors import PluginUnavailable
from shadowclone.plugin import Registry, load_registry


@pytest.mark.parametrize(
    ("ask", "distribution"),
    [
        (lambda r: r.engine("claude"), "shadowclone-claude"),
        (lambda r: r.engine("codex"), "shadowclone-codex"),
        (lambda r: r.launcher("docker"), "shadowclone-docker-launch"),
        (lambda r: r.launcher("fake"), "shadowclone-fake-launch"),
    ],
)
def test_a_core_only_install_names_the_distribution_to_add(
    ask: Callable[[Registry], object], distribution: str
) -> None:
    core_only = load_registry(entry_points=[])
    with pytest.raises(PluginUnavailable) as refused:
        ask(core_only)
    said = str(refused.value)
    assert f"(it comes with {distribution}: install that beside shadowclone)" in said
    assert "installed: none" in said


def test_a_mistyped_name_gets_the_closest_installed_one() -> None:
    with pytest.raises(
        PluginUnavailable, match=r"no engine named 'cdex' \(did you mean 'codex'\?\)"
    ):
        load_registry().engine("cdex")
