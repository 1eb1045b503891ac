"""A review's findings: what the tool takes, and which fit the diff's lines."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from shadowclone.run.ask.tool import Refused
from shadowclone.run.review.findings import (
    MAX_INLINE,
    Finding,
    FindingsTool,
    commentable,
    parse_finding,
    place,
    review_body,
)

DIFF = """\
diff --git a/lib.py b/lib.py
index 1111111..2222222 100644
--- a/lib.py
+++ b/lib.py
@@ -17,7 +17,7 @@ def f():
 line 17
 line 18
 line 19
-line 20
+broken()
 line 21
 line 22
 line 23
diff --git a/gone.py b/gone.py
deleted file mode 100644
index 3333333..0000000
--- a/gone.py
+++ /dev/null
@@ -1 +0,0 @@
-x
"""


def test_the_diff_gives_each_files_hunks_on_the_new_side() -> None:
    assert commentable(DIFF) == {"lib.py": [range(17, 24)]}
    assert commentable("not a diff at all") == {}


def test_findings_on_the_diff_go_inline_and_the_rest_to_the_body() -> None:
    on = Finding("P2", "lib.py", 20, "t", "b", start_line=18)
    across = Finding("P1", "lib.py", 25, "t", "b", start_line=22)
    elsewhere = Finding("P0", "other.py", 1, "t", "b")
    inline, rest = place([on, across, elsewhere], commentable(DIFF))
    assert inline == [on]
    assert rest == [elsewhere, across]  # the most urgent first
    assert "**[P0] t** (other.py:1): b" in review_body("Summary.", rest)
    assert review_body("Summary.", []) == "Summary."


@given(
    st.lists(
        st.tuples(st.sampled_from(["lib.py", "x.py"]), st.integers(1, 40), st.integers(0, 5)),
        max_size=60,
    )
)
def test_no_finding_inline_is_off_a_hunk_and_none_is_lost(
    spots: list[tuple[str, int, int]],
) -> None:
    findings = [
        Finding("P2", path, line + span, "t", "b", start_line=line if span else None)
        for path, line, span in spots
    ]
    inline, rest = place(findings, commentable(DIFF))
    assert len(inline) <= MAX_INLINE
    assert sorted(map(repr, inline + rest)) == sorted(map(repr, findings))
    for finding in inline:
        assert finding.path == "lib.py" and (finding.start_line or finding.line) >= 17
        assert finding.line <= 23


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ({"priority": "P5", "path": "a", "line": 1, "title": "t", "body": "b"}, "priority"),
        ({"priority": "P1", "path": "/etc/x", "line": 1, "title": "t", "body": "b"}, "path"),
        ({"priority": "P1", "path": "../x", "line": 1, "title": "t", "body": "b"}, "path"),
        ({"priority": "P1", "path": "a", "line": 0, "title": "t", "body": "b"}, "line"),
        ({"priority": "P1", "path": "a", "line": True, "title": "t", "body": "b"}, "line"),
        (
            {"priority": "P1", "path": "a", "line": 3, "start_line": 5, "title": "t", "body": "b"},
            "start_line",
        ),
        ({"priority": "P1", "path": "a", "line": 3, "title": " ", "body": "b"}, "title"),
    ],
)
def test_a_malformed_finding_is_refused_with_what_to_do(
    arguments: dict[str, Any], needle: str
) -> None:
    with pytest.raises(Refused, match=needle):
        parse_finding(arguments)


def test_the_tool_takes_findings_only_while_reviewing() -> None:
    reviewing = False
    tool = FindingsTool(lambda: reviewing)
    finding = {"priority": "p1", "path": "./a.py", "line": 2, "title": "t", "body": "b"}
    with pytest.raises(Refused, match="not reviewing"):
        asyncio.run(tool.call(finding))
    reviewing = True
    assert asyncio.run(tool.call(finding)) == "Noted finding 1 on a.py:2."
    assert tool.findings == [Finding("P1", "a.py", 2, "t", "b")]
