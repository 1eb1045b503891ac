"""The rest of what a conversation shows and what bounds it: check runs with their logs and
annotations, pasted images, short-lived signed URLs, and rate limits of both kinds."""

from __future__ import annotations

import math
import secrets
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import attrs

from shadowclone_testing.fakes.github.model import Annotation, Attachment, CheckRun, now
from shadowclone_testing.fakes.github.reviewstore import ReviewStore

PRIMARY_LIMIT = 5000
"""Requests an hour for a signed-in user, as on GitHub; 60 for anonymous ones."""
ANONYMOUS_LIMIT = 60
SIGNED_URL_SECONDS = 60.0
"""How long a signed URL works; GitHub's log links last about a minute."""


@attrs.define
class Refusal:
    """The next `requests` API requests are refused as GitHub refuses when a limit is hit."""

    kind: Literal["primary", "secondary"]
    requests: int
    seconds: float
    status: int


@attrs.frozen
class Verdict:
    """What the rate limiter says of one request: its headers, and a refusal or None."""

    headers: tuple[tuple[str, str], ...]
    refusal: Refusal | None
    user_id: int | None


class ExtrasStore(ReviewStore):
    """Check runs and attachments (kept in the state) and signed URLs and rate limits (kept in
    memory: they live no longer than a server)."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir)
        self._signed: dict[str, tuple[str, float]] = {}
        self._refusals: list[Refusal] = []
        self._used: dict[str, int] = {}
        self._window_start = time.time()
        self._rate_lock = threading.Lock()

    # ------------------------------------------------------------------------- checks

    def add_check_run(
        self,
        full_name: str,
        sha: str,
        *,
        name: str,
        conclusion: str | None,
        log: str | None = None,
        annotations: Iterable[Annotation] = (),
        title: str | None = None,
        summary: str | None = None,
        text: str | None = None,
    ) -> int:
        """A check run on commit `sha`, completed unless `conclusion` is None (then still in
        progress). One with a `log` is a GitHub Actions job whose log the REST API serves."""
        with self.lock:
            repo = self._repo(full_name)
            started = now()
            with_job = log is not None
            run = CheckRun(
                id=self.state.next_id(),
                sha=sha,
                name=name,
                status="completed" if conclusion is not None else "in_progress",
                conclusion=conclusion,
                started_at=started,
                completed_at=started if conclusion is not None else None,
                title=title,
                summary=summary,
                text=text,
                annotations=tuple(annotations),
                run_id=self.state.next_id() if with_job else None,
                log=log,
            )
            # An Actions check run's id is its job's id, as on GitHub.
            run = attrs.evolve(run, job_id=run.id) if with_job else run
            repo.check_runs.append(run)
            self._save()
            return run.id

    # ------------------------------------------------------------------------- attachments

    def store_attachment(self, data: bytes, content_type: str, repo: str | None) -> str:
        """Keep an uploaded file and return its uuid."""
        with self.lock:
            found = self.state.repo(repo) if repo is not None else None
            if repo is not None and found is None:
                raise KeyError(f"no repository {repo}")
            name = str(uuid.uuid4())
            folder = self.state_dir / "attachments"
            folder.mkdir(exist_ok=True)
            (folder / name).write_bytes(data)
            self.state.attachments[name] = Attachment(
                uuid=name, content_type=content_type, repo=found.full_name if found else None
            )
            self._save()
            return name

    def attachment(self, name: str) -> tuple[Attachment, bytes] | None:
        with self.lock:
            found = self.state.attachments.get(name)
            if found is None:
                return None
            return found, (self.state_dir / "attachments" / name).read_bytes()

    # ------------------------------------------------------------------------- signed URLs

    def sign(self, target: str) -> str:
        """A token that opens `target` (a path of the fake) without signing in, for a minute."""
        token = secrets.token_urlsafe(24)
        with self._rate_lock:
            self._signed[token] = (target, time.monotonic() + SIGNED_URL_SECONDS)
        return token

    def signed(self, token: str, target: str) -> bool:
        with self._rate_lock:
            found = self._signed.get(token)
        return found is not None and found[0] == target and time.monotonic() < found[1]

    # ------------------------------------------------------------------------- rate limits

    def limit_rate(
        self,
        kind: Literal["primary", "secondary"],
        *,
        requests: int = 1,
        seconds: float = 1.0,
        status: int | None = None,
    ) -> None:
        """Refuse the next `requests` REST requests as GitHub does past a limit of that kind:
        403 by default (GitHub answers 403 or 429), waiting `seconds` before a retry."""
        if kind not in ("primary", "secondary"):
            raise ValueError(f"no rate limit of kind {kind!r}")
        with self._rate_lock:
            self._refusals.append(Refusal(kind, requests, seconds, status or 403))

    def rate_verdict(self, login: str | None, client: str) -> Verdict:
        """Count one REST request of `login` (or of the address `client`) and say whether a
        limit refuses it."""
        with self._rate_lock:
            moment = time.time()
            if moment >= self._window_start + 3600:
                self._window_start = moment
                self._used.clear()
            key = login or f"ip:{client}"
            limit = PRIMARY_LIMIT if login else ANONYMOUS_LIMIT
            refusal = None
            if self._refusals:
                refusal = attrs.evolve(self._refusals[0])
                self._refusals[0].requests -= 1
                if self._refusals[0].requests <= 0:
                    self._refusals.pop(0)
            if refusal is None or refusal.kind == "secondary":
                self._used[key] = min(limit, self._used.get(key, 0) + 1)
            used = self._used.get(key, 0)
            reset = math.ceil(self._window_start + 3600)
            remaining = limit - used
            if refusal is not None and refusal.kind == "primary":
                reset, remaining, used = math.ceil(moment + refusal.seconds), 0, limit
        user = self.state.users.get(login) if login else None
        headers = (
            ("x-ratelimit-limit", str(limit)),
            ("x-ratelimit-remaining", str(remaining)),
            ("x-ratelimit-reset", str(reset)),
            ("x-ratelimit-used", str(used)),
            ("x-ratelimit-resource", "core"),
        )
        return Verdict(headers, refusal, user.id if user else None)
