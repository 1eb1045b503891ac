"""How progress lines and a launcher's report become a record."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shadowclone.node.schemas import (
    Answer,
    ProgressKind,
    ProgressLine,
    Question,
    Record,
    State,
    Step,
    Usage,
)
from shadowclone.plugin import CloneStatus, LaunchState, Outcome
from shadowclone.serve import records

AT = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
QUESTION = Question("q1", "Which way?", ("left", "right"), "left")


def line(kind: ProgressKind, **fields: object) -> ProgressLine:
    return ProgressLine(Step.ENGINE, kind, **fields)  # type: ignore[arg-type]


def test_an_open_question_makes_a_running_clone_waiting_and_its_answer_running() -> None:
    asked: dict[str, Question] = {}
    running = Record("c", State.RUNNING)
    waiting = records.fold_progress(
        running,
        [line(ProgressKind.NOTE, text="hi"), line(ProgressKind.QUESTION, question=QUESTION)],
        asked,
    )
    assert (waiting.state, waiting.question) == (State.WAITING, QUESTION)
    answered = records.fold_progress(
        waiting, [line(ProgressKind.ANSWER, answer=Answer("q1", "right"))], asked
    )
    assert (answered.state, answered.question) == (State.RUNNING, None)
    assert answered.last_progress is not None and answered.last_progress.kind is ProgressKind.ANSWER


def test_the_final_line_carries_outcome_report_and_pull_request() -> None:
    final = ProgressLine(
        Step.FINISH, ProgressKind.FINAL, outcome=Outcome.DONE, report="r", pr_url="https://p/1"
    )
    record = records.fold_progress(Record("c", State.RUNNING), [final], {})
    assert (record.outcome, record.report, record.pr_url) == (Outcome.DONE, "r", "https://p/1")
    assert record.state is State.RUNNING  # until the launcher says it exited


def test_no_lines_change_nothing() -> None:
    record = Record("c", State.RUNNING)
    assert records.fold_progress(record, [], {}) is record


@pytest.mark.parametrize(
    ("outcome", "state"),
    [
        (Outcome.DONE, State.DONE),
        (Outcome.FAILED, State.FAILED),
        (Outcome.STOPPED, State.STOPPED),
        (Outcome.STALLED, State.FAILED),
    ],
)
def test_an_exit_after_a_final_line_ends_as_the_line_says(outcome: Outcome, state: State) -> None:
    record = Record("c", State.RUNNING, outcome=outcome)
    status = CloneStatus("c", LaunchState.EXITED, 0, "output")
    ended = records.ended(record, status, stop_requested=False, at=AT)
    assert (ended.state, ended.exit_code, ended.ended_at) == (state, 0, AT)
    assert ended.output_tail == ("" if state is State.DONE else "output")
    assert ended.reason.startswith("stalled") == (outcome is Outcome.STALLED)


def test_an_exit_with_no_final_line_is_failed_with_its_output_kept() -> None:
    status = CloneStatus("c", LaunchState.EXITED, 2, "Traceback: boom")
    ended = records.ended(Record("c", State.RUNNING), status, stop_requested=False, at=AT)
    assert (ended.state, ended.outcome, ended.exit_code) == (State.FAILED, Outcome.FAILED, 2)
    assert ended.output_tail == "Traceback: boom"
    assert "exit code 2" in ended.reason


def test_an_exit_with_no_final_line_after_a_stop_is_stopped() -> None:
    status = CloneStatus("c", LaunchState.EXITED, 137, "")
    ended = records.ended(Record("c", State.WAITING), status, stop_requested=True, at=AT)
    assert (ended.state, ended.outcome, ended.question) == (State.STOPPED, Outcome.STOPPED, None)


def test_serve_keeps_no_token_in_its_copies_of_a_clones_text() -> None:
    """serve never reads the secrets file; tokens of a known shape in what it copies (the
    output tail, a reason, the last line, the report, a question) are redacted all the same."""
    token = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    said = f"push failed with {token} in the remote"
    line = ProgressLine(step=Step.FINISH, kind=ProgressKind.FINAL, text=said, report=said)
    question = Question(id="q1", text=said, options=(said, "no"), recommended=said)
    record = Record(id="x", state=State.RUNNING, last_progress=line, question=question)
    status = CloneStatus("x", LaunchState.EXITED, exit_code=1, output_tail=f"Traceback: {token}")
    ended = records.scrubbed(records.ended(record, status, False, datetime.now(UTC)))
    failed = records.scrubbed(records.failed(record, f"launch failed: {token}", datetime.now(UTC)))
    for kept in (ended, failed):
        assert token not in repr(kept)
    assert "[redacted]" in ended.output_tail and "[redacted]" in failed.reason


USAGES = st.lists(
    st.builds(
        Usage,
        input_tokens=st.integers(0, 10**7),
        output_tokens=st.integers(0, 10**6),
        cost_usd=st.none() | st.floats(0, 50, allow_nan=False),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(usages=USAGES, cuts=st.lists(st.integers(0, 30), max_size=5), restart=st.booleans())
def test_usage_adds_up_however_the_lines_are_read(
    usages: list[Usage], cuts: list[int], restart: bool
) -> None:
    """Serve reads a clone's lines in pieces, and all of them again after a restart: the
    record's usage is the sum of the usage lines, each counted once, with a cost where any
    turn reported one."""
    lines: list[ProgressLine] = []
    for usage in usages:
        lines += [line(ProgressKind.TEXT, text="work"), line(ProgressKind.USAGE, usage=usage)]
    record, offset = Record("c", State.RUNNING), 0
    asked: dict[str, Question] = {}
    for cut in [*sorted(cuts), len(lines)]:
        record = records.fold_progress(record, lines[offset:cut], asked, from_start=offset == 0)
        offset = max(offset, cut)
    if restart:  # serve starts again and reads every line from the first
        record = records.fold_progress(record, lines, {}, from_start=True)
    costs = [u.cost_usd for u in usages if u.cost_usd is not None]
    assert record.turns == len(usages)
    assert record.usage.input_tokens == sum(u.input_tokens for u in usages)
    assert record.usage.output_tokens == sum(u.output_tokens for u in usages)
    if costs:
        assert record.usage.cost_usd == pytest.approx(sum(costs))
    else:
        assert record.usage.cost_usd is None
