"""The conversation a clone works from: an issue's comments, a pull request's reviews, review
threads and checks, read through every page before the engine's first turn.

What the owner and those who can push wrote is the task; anyone else's words are fenced as
untrusted, each on its own (or left out), with hidden text stripped from all of it, since an
HTML comment or an invisible character is read by the model and never seen by the owner.
Items made or edited after the owner started the clone are left out: the clone works on what
the owner saw. A size budget keeps the prompt within reason; what goes first is what matters
least (resolved threads, then outdated ones, then the oldest comments), and the prompt says
what was left out.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import attrs

from shadowclone.errors import ShadowcloneError
from shadowclone.run.github import (
    GHOST,
    CheckRun,
    GithubClient,
    IssueComment,
    Review,
    ReviewThread,
)
from shadowclone.run.plan import Mode, Plan

T = TypeVar("T")

BUDGET_CHARS = 60_000
"""About 15,000 tokens of conversation at most."""
ITEM_CHARS = 8_000
"""One comment, review, thread or check at most: a longer one keeps its start and end."""
LOG_TAIL_BYTES = 6_000
"""The end of a failing job's log: where its error is."""
MAX_ANNOTATIONS = 20
MAX_IMAGES = 10
IMAGE_BYTES = 5 * 1024 * 1024

_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_REFERENCE_COMMENT = re.compile(r"(?m)^\s{0,3}\[(?://|comment)\]:\s*#.*$")
_IMAGE = re.compile(
    r"!\[[^\]]*\]\(\s*<?(https?://[^\s)>]+)>?[^)]*\)|<img\b[^>]*\bsrc=[\"'](https?://[^\"']+)[\"']"
)
_IMAGE_TYPES = {b"\x89PNG\r\n\x1a\n": "png", b"\xff\xd8\xff": "jpg", b"GIF8": "gif"}


def strip_hidden(text: str) -> str:
    """`text` without what GitHub renders as nothing: HTML comments, comment-like link
    references, and invisible or direction-changing characters (Unicode's format class:
    zero-width spaces and joiners, bidi controls, tag characters, soft hyphens)."""
    text = _HTML_COMMENT.sub("", text)
    text = _REFERENCE_COMMENT.sub("", text)
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


def fence(kind: str, author: str, text: str) -> str:
    """Untrusted text in a fence it cannot close: its closing tag is escaped inside."""
    tag = f"untrusted-{kind}"
    inner = re.sub(rf"(?i)<\s*/\s*{tag}", f"< /{tag}", text)
    return f'<{tag} author="{author}">\n{inner}\n</{tag}>'


def _trimmed(text: str, limit: int = ITEM_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters left out ...]\n{text[-half:]}"


@attrs.frozen
class Item:
    """One part of the conversation as the engine reads it."""

    kind: str
    """comment, review, thread or check."""
    text: str
    when: datetime
    rank: int
    """What goes first when the budget is short: lower first, then older first."""
    left_out_as: str
    """How a left-out one is counted: 'resolved threads', 'older comments'..."""


@attrs.define
class Context:
    """The conversation as given to the engine, and what was left out of it and why."""

    items: list[Item] = attrs.Factory(list)
    counts: Counter[str] = attrs.Factory(Counter)
    """What was given, by kind ('comments', 'by others (fenced)'...)."""
    left_out: Counter[str] = attrs.Factory(Counter)
    """What was not, by reason."""
    images: list[Path] = attrs.Factory(list)
    open_threads: list[ReviewThread] = attrs.Factory(list)
    """A pull request's unresolved, current threads: those a continuing clone answers."""
    problems: list[str] = attrs.Factory(list)
    """Reads that failed: the clone goes on without them, and says so."""

    def prompt(self) -> str:
        if not self.items and not +self.left_out and not self.images:
            return ""
        parts = ["The conversation so far, oldest first:"]
        parts += [item.text for item in sorted(self.items, key=lambda item: item.when)]
        if self.images:
            listed = "\n".join(f"- {path}" for path in self.images)
            parts.append(f"Images pasted in the conversation, saved for you to open:\n{listed}")
        if +self.left_out:
            said = ", ".join(f"{count} {why}" for why, count in sorted((+self.left_out).items()))
            parts.append(f"Left out of this conversation: {said}.")
        return "\n\n".join(parts)

    def summary(self) -> str:
        """One line for the owner: counts, never text."""
        given = ", ".join(f"{count} {what}" for what, count in self.counts.items() if count)
        line = f"context: {given or 'no comments'}"
        if self.images:
            line += f", {len(self.images)} images"
        if +self.left_out:
            line += "; left out: " + ", ".join(
                f"{count} {why}" for why, count in sorted((+self.left_out).items())
            )
        if self.problems:
            line += "; not read: " + "; ".join(self.problems)
        return line


@attrs.define
class Trust:
    """Who may give the clone its task: the owner and whoever can push."""

    client: GithubClient
    plan: Plan
    known: dict[str, bool] = attrs.Factory(dict)

    def __call__(self, login: str) -> bool:
        key = login.casefold()
        if key not in self.known:
            if login == GHOST:
                self.known[key] = False
            elif key == self.plan.user.login.casefold():
                self.known[key] = True
            else:
                self.known[key] = self.client.can_push(self.plan.repository.full_name, login)
        return self.known[key]


def gather(
    client: GithubClient,
    plan: Plan,
    started: datetime,
    *,
    omit_strangers: bool = False,
    budget: int = BUDGET_CHARS,
    images: Path | None = None,
    trust: Trust | None = None,
) -> Context:
    """The conversation of the plan's issue or pull request as it was at `started`; images
    pasted by trusted authors are saved under `images` when given."""
    repo, number = plan.repository.full_name, plan.number
    context = Context()
    trust = trust or Trust(client, plan)
    pull = plan.pull_request
    trusted_texts: list[str] = []
    if plan.stranger is None:
        trusted_texts.append(plan.issue.body)

    def read(what: str, call: Callable[[], T]) -> T | None:
        try:
            return call()
        except ShadowcloneError as error:
            context.problems.append(f"{what} ({error})")
            return None

    # One after another, as GitHub asks of one user's requests; the clone of the repository
    # goes on meanwhile.
    found_comments = read("comments", lambda: client.issue_comments(repo, number))
    if found_comments is not None:
        listed, cut = found_comments
        if cut:
            context.left_out["comments past the 10,000th"] += 1
        _comments(context, listed, started, trust, omit_strangers, trusted_texts)
    if pull is not None:
        reviews = read("reviews", lambda: client.reviews(repo, number)) or []
        _reviews(context, reviews, started, trust, omit_strangers)
        threads = read("review threads", lambda: client.review_threads(repo, number)) or []
        _threads(context, threads, started, trust, omit_strangers)
        runs = read("checks", lambda: client.check_runs(repo, pull.head_sha)) or []
        _checks(context, client, repo, runs, started, fenced=plan.mode is Mode.REVIEW)
    _fit(context, budget)
    if images is not None:
        _save_images(context, client, trusted_texts, images)
    return context


def _later(when: datetime, started: datetime) -> bool:
    return when > started


def render(trusted: bool, kind: str, author: str, head: str, body: str) -> str:
    """An author's words as the engine reads them: hidden text stripped, fenced unless the
    author may give the clone its task."""
    body = _trimmed(strip_hidden(body).strip())
    if trusted:
        return f"{head}\n{body}" if body else head
    return f"{head}\n{fence(kind, author, body)}"


def _say(
    trusted: bool, omit: bool, context: Context, kind: str, author: str, head: str, body: str
) -> str | None:
    """An author's words as the engine reads them, or None when they are left out."""
    if not trusted:
        if omit:
            context.left_out["by people who cannot push ([security] strangers_text)"] += 1
            return None
        context.counts["by others (fenced)"] += 1
    return render(trusted, kind, author, head, body)


def _comments(
    context: Context,
    comments: Iterable[IssueComment],
    started: datetime,
    trust: Callable[[str], bool],
    omit: bool,
    trusted_texts: list[str],
) -> None:
    for comment in comments:
        if _later(comment.created_at, started) or _later(comment.updated_at, started):
            context.left_out["made or edited after the clone was started"] += 1
            continue
        trusted = trust(comment.author)
        when = comment.created_at.strftime("%Y-%m-%d %H:%M UTC")
        head = f"[comment by @{comment.author}, {when}]"
        text = _say(trusted, omit, context, "comment", comment.author, head, comment.body)
        if text is None:
            continue
        if trusted:
            trusted_texts.append(comment.body)
        context.counts["comments"] += 1
        context.items.append(Item("comment", text, comment.created_at, 2, "older comments"))


def _reviews(
    context: Context,
    reviews: Iterable[Review],
    started: datetime,
    trust: Callable[[str], bool],
    omit: bool,
) -> None:
    for review in reviews:
        if review.state == "PENDING" or review.submitted_at is None:
            continue  # a draft only its author sees
        if _later(review.submitted_at, started):
            context.left_out["made or edited after the clone was started"] += 1
            continue
        if not review.body.strip() and review.state == "COMMENTED":
            continue  # the envelope of line comments, which their threads carry
        head = f"[review by @{review.author}: {review.state.lower().replace('_', ' ')}]"
        text = _say(trust(review.author), omit, context, "review", review.author, head, review.body)
        if text is not None:
            context.counts["reviews"] += 1
            context.items.append(Item("review", text, review.submitted_at, 3, "older reviews"))


def _threads(
    context: Context,
    threads: Iterable[ReviewThread],
    started: datetime,
    trust: Callable[[str], bool],
    omit: bool,
) -> None:
    for thread in threads:
        kept = [c for c in thread.comments if not _later(c.created_at, started)]
        kept = [c for c in kept if not _later(c.updated_at, started)]
        context.left_out["made or edited after the clone was started"] += len(
            thread.comments
        ) - len(kept)
        if not kept:
            continue
        state = "resolved" if thread.resolved else "outdated" if thread.outdated else "open"
        lines = f"{thread.start_line}-{thread.line}" if thread.start_line else f"{thread.line}"
        where = f"{thread.path}:{lines}" if thread.line else f"{thread.path} (lines since changed)"
        said: list[str] = []
        for comment in kept:
            head = f"@{comment.author}:"
            text = _say(
                trust(comment.author), omit, context, "comment", comment.author, head, comment.body
            )
            if text is not None:
                said.append(text)
        if not said:
            continue
        if state == "open":
            context.open_threads.append(attrs.evolve(thread, comments=tuple(kept)))
            number = len(context.open_threads)
            title = f"[review thread {number} on {where}, open]"
        else:
            title = f"[review thread on {where}, {state}]"
        context.counts[f"{state} threads"] += 1
        rank, left = {"resolved": (0, "resolved threads"), "outdated": (1, "outdated threads")}.get(
            state, (4, "open threads")
        )
        text = title + "\n" + "\n".join(said)
        context.items.append(Item("thread", text, kept[0].created_at, rank, left))


def _checks(
    context: Context,
    client: GithubClient,
    repo: str,
    runs: Iterable[CheckRun],
    started: datetime,
    *,
    fenced: bool,
) -> None:
    """Failing checks with their annotations and the end of their log; passing ones are
    counted. A stranger's pull request's checks ran the stranger's code: their output is
    fenced as theirs."""
    for run in runs:
        if run.completed_at is not None and _later(run.completed_at, started):
            context.left_out["made or edited after the clone was started"] += 1
            continue
        if not run.failed:
            context.counts["checks passing or running"] += 1
            continue
        parts = [f"{run.title}\n{run.summary}".strip()]
        try:
            notes = client.annotations(repo, run.id)[:MAX_ANNOTATIONS]
        except ShadowcloneError as error:
            context.problems.append(f"annotations of {run.name} ({error})")
            notes = []
        if notes:
            parts.append(
                "annotations:\n"
                + "\n".join(
                    f"- {n.path}:{n.start_line}-{n.end_line} {n.level}: {n.title} {n.message}"
                    for n in notes
                )
            )
        if run.app == "github-actions":
            try:
                tail = client.job_log_tail(repo, run.id, LOG_TAIL_BYTES)
            except ShadowcloneError as error:
                context.problems.append(f"log of {run.name} ({error})")
            else:
                parts.append(f"the end of its log:\n```\n{tail.strip()}\n```")
        elif run.text.strip():
            parts.append(run.text.strip())
        body = "\n".join(part for part in parts if part)
        body = _trimmed(strip_hidden(body))
        head = f"[check {run.name!r} {run.conclusion}]"
        text = f"{head}\n{fence('check', run.app or 'ci', body)}" if fenced else f"{head}\n{body}"
        context.counts["failing checks"] += 1
        when = run.completed_at or started
        context.items.append(Item("check", text, when, 5, "failing checks"))


def _fit(context: Context, budget: int) -> None:
    """Leave out what matters least until the conversation fits the budget."""
    total = sum(len(item.text) for item in context.items)
    for item in sorted(context.items, key=lambda item: (item.rank, item.when)):
        if total <= budget:
            return
        context.items.remove(item)
        total -= len(item.text)
        context.left_out[f"{item.left_out_as} (for size)"] += 1


def image_urls(text: str) -> list[str]:
    return [found[0] or found[1] for found in _IMAGE.findall(strip_hidden(text))]


def _save_images(
    context: Context, client: GithubClient, texts: Iterable[str], folder: Path
) -> None:
    """Images in trusted text, from GitHub's own hosts, saved as files the engine opens; only
    raster images, by their first bytes."""
    seen: set[str] = set()
    for url in (url for text in texts for url in image_urls(text)):
        if url in seen or len(context.images) >= MAX_IMAGES:
            continue
        seen.add(url)
        if not client.wire.on_github(url):
            context.left_out["images not on GitHub"] += 1
            continue
        try:
            data = client.download(url, IMAGE_BYTES)
        except ShadowcloneError as error:
            context.problems.append(f"an image ({error})")
            continue
        kind = next(
            (ext for magic, ext in _IMAGE_TYPES.items() if data and data.startswith(magic)), None
        )
        if data is not None and kind is None and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            kind = "webp"
        if data is None or kind is None:
            context.left_out["pasted files that are no image or too large"] += 1
            continue
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"image-{len(context.images) + 1}.{kind}"
        path.write_bytes(data)
        path.chmod(0o644)
        context.images.append(path)
