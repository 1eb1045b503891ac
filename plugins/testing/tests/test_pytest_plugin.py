"""The kit's pytest plugin loads only in a project that asks for it: installing the kit gives a
project (a third party's included) none of its fixtures, and every one it gives carries sc_."""

from __future__ import annotations

import importlib.metadata

import pytest

pytest_plugins = ["pytester"]

ASKS_FOR_THE_HOME = """
import os
from pathlib import Path

def test_home(sc_home):
    assert sc_home.config_file.parent == Path(os.environ["SHADOWCLONE_HOME"])
"""

KIT_NAMES = (
    "home",
    "node",
    "cli",
    "folder",
    "scripts",
    "ready",
    "owner",
    "engines_on_path",
    "devcontainer_cli",
)


def test_the_kit_has_no_pytest11_entry_point() -> None:
    found = importlib.metadata.distribution("shadowclone-testing").entry_points
    assert [each for each in found if each.group == "pytest11"] == []


def test_a_project_that_does_not_opt_in_gets_none_of_the_fixtures(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_inner=ASKS_FOR_THE_HOME)
    done = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    done.assert_outcomes(errors=1)
    done.stdout.fnmatch_lines(["*fixture 'sc_home' not found*"])


def test_a_project_that_opts_in_gets_them_under_sc(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["shadowclone_testing.pytest_plugin"]\n')
    pytester.makepyfile(test_inner=ASKS_FOR_THE_HOME)
    done = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fixtures")
    for name in KIT_NAMES:
        done.stdout.fnmatch_lines([f"sc_{name}*"])
        assert not any(line.startswith(f"{name} ") for line in done.stdout.lines), name
    done = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    done.assert_outcomes(passed=1)
