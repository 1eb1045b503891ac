"""What a clone says when it ends: the pull request's body (or the review comment) and the
final report, with what became of each of the owner's messages and what the work cost.

Plain functions of what the run gathered; the run program redacts the result before it leaves
the clone.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from shadowclone.node.schemas import InboxKind, InboxLine, ProgressLine
from shadowclone.plugin.types import Outcome
from shadowclone.run.carry import ReviewLine
from shadowclone.run.drive import EngineResult
from shadowclone.run.save import Saved

LAST_WORDS = 2000
"""How much of an ending's reason the report keeps (its end, where the cause is)."""


def _verdict(review: ReviewLine) -> str:
    return f"{review.stage}: {'passed' if review.passed else 'failed'}: {review.summary}"


def pr_body(result: EngineResult, reviews: Sequence[ReviewLine], engine: str, clone: str) -> str:
    """The pull request's body, or the review comment."""
    parts = [result.last_text.strip() or f"shadowclone ended: {result.outcome}"]
    if reviews:
        parts.append("Review:\n" + "\n".join(f"- {_verdict(r)}" for r in reviews))
    parts.append(f"Made by a shadowclone ({engine}), clone {clone}.")
    return "\n\n".join(parts)


def message_fates(inbox: Sequence[InboxLine], result: EngineResult) -> list[str]:
    """Every message the owner sent, and whether it reached the engine."""
    taken = set(result.taken)
    if result.outcome is Outcome.STOPPED:
        missed = "not delivered: the clone was stopped first"
    else:
        missed = f"not delivered: the engine had ended ({result.outcome})"
    rows = []
    for line in inbox:
        if line.kind is not InboxKind.MESSAGE:
            continue
        text = " ".join(line.text.split())
        text = text if len(text) <= 80 else text[:79] + "…"
        fate = "reached the engine" if line.id in taken else missed
        rows.append(f"message {line.at:%H:%M:%S} {text!r}: {fate}")
    return rows


def usage_line(progress: Sequence[ProgressLine], turns: int, minutes: float) -> str:
    """Tokens and cost over the clone's usage lines, its turns and minutes of work; "" when
    the engine reported none."""
    tokens_in = sum(p.usage.input_tokens for p in progress if p.usage)
    tokens_out = sum(p.usage.output_tokens for p in progress if p.usage)
    costs = [p.usage.cost_usd for p in progress if p.usage and p.usage.cost_usd is not None]
    if not (tokens_in or tokens_out or costs):
        return ""
    cost = f", ${sum(costs):.4f}" if costs else ""
    work = f"; {turns} turn" + ("" if turns == 1 else "s") + f", {minutes:.1f} minutes of work"
    return f"usage: {tokens_in} tokens in, {tokens_out} out{cost}{work}"


@attrs.frozen
class Ending:
    """What the final report tells."""

    target: str
    result: EngineResult
    reviews: Sequence[ReviewLine] = ()
    saved: Saved | None = None
    login_problem: str = ""
    changes: str = ""
    """The change's diff stat, if there is one."""
    usage: str = ""
    fates: Sequence[str] = ()


def final_report(ending: Ending) -> str:
    result = ending.result
    rows = [f"shadowclone report: {ending.target}", f"outcome: {result.outcome}"]
    if result.detail and result.outcome is not Outcome.DONE:
        rows.append(f"why: {result.detail.strip()[-LAST_WORDS:]}")
    if ending.login_problem:
        rows.append(f"login: {ending.login_problem}")
    if ending.saved is not None:
        rows.append(f"saved: {ending.saved.note}")
        if ending.saved.pr_url:
            rows.append(f"pull request: {ending.saved.pr_url}")
    rows += [f"review {_verdict(review)}" for review in ending.reviews]
    if ending.changes:
        rows.append("changes:\n" + ending.changes)
    if ending.usage:
        rows.append(ending.usage)
    rows.extend(ending.fates)
    if result.last_text.strip():
        rows.append("the engine's last words:\n" + result.last_text.strip())
    return "\n".join(rows)
