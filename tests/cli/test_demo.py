"""`shadowclone demo` runs one whole clone with no account and no Docker, and says so."""

from __future__ import annotations

import re

from tests.conftest import run_shadowclone


def test_the_demo_runs_a_whole_clone_and_prints_its_pull_request() -> None:
    result = run_shadowclone("demo")
    assert result.code == 0, result.out[-3000:] + result.err[-3000:]
    out = result.out
    assert re.search(r"question q1: Which greeting style", out)
    assert re.search(r"\$ shadowclone answer \S+ q1 friendly", out)
    assert re.search(r"pull request http://127\.0\.0\.1:\d+/you/hello/pull/\d+", out)
    assert "Hello, in a friendly style!" in out
    assert "final report" in out and "outcome: done" in out
