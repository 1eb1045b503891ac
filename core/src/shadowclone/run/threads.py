"""Answering a pull request's open review threads after a continuing clone's push.

The engine is given the open threads numbered (run/context.py) and ends its summary with a
line `Thread N: what it did` for each it addressed; after the push the run program replies in
those threads, naming the commit. It never resolves a thread: that is the reviewer's call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from shadowclone.errors import ShadowcloneError
from shadowclone.run.github import GithubClient, ReviewThread

ASK = (
    "The pull request has open review threads, numbered above. For each one your work "
    "addresses, end your summary with a line `Thread N: what you did about it`; your words are "
    "posted as a reply in that thread once the work is pushed."
)
_ADDRESSED = re.compile(r"(?im)^[\s>*_-]*thread\s+#?(\d+)\s*[:.)-]\s*(\S.*)$")
REPLY_CHARS = 2_000


def addressed(summary: str, count: int) -> dict[int, str]:
    """The threads (1 to `count`) the engine says it addressed, with what it said; the last
    line naming a thread wins."""
    said: dict[int, str] = {}
    for number, text in _ADDRESSED.findall(summary):
        if 1 <= int(number) <= count:
            said[int(number)] = text.strip()[:REPLY_CHARS]
    return said


def reply_in_threads(
    client: GithubClient,
    repo: str,
    number: int,
    threads: Sequence[ReviewThread],
    summary: str,
    commit: str,
    redact: Callable[[str], str],
) -> tuple[int, list[str]]:
    """Reply in each open thread the summary names; how many replies went out, and a line
    for each that failed."""
    replied, failed = 0, []
    for index, text in sorted(addressed(summary, len(threads)).items()):
        root = threads[index - 1].comments[0]
        body = redact(f"{text}\n\n(in {commit[:12]}, by a shadowclone clone)")
        try:
            client.reply_in_thread(repo, number, root.id, body)
        except ShadowcloneError as error:
            failed.append(f"thread {index} on {threads[index - 1].path}: {error}")
        else:
            replied += 1
    return replied, failed
