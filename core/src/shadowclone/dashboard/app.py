"""The dashboard's web application (Starlette): pages rendered on the server, live updates by
server-sent events, and forms that go through the node's operations as the CLI's commands do.

Every request needs the owner: a browser in a session, opened by a login (a one-time login
code from the link `shadowclone dashboard` prints, or the token posted in the login form;
never the token in a URL), or a script with `Authorization: Bearer TOKEN`. A session has a
random cookie (HttpOnly, SameSite=Strict) and a CSRF value of its own for its forms, and ends
when idle, when too old, or at logout; a form from another origin is refused. The one
exception is an answer link from a notification: signed for one clone, one question and one
option, it can give that answer and nothing else.
Every text shown passes the report's redaction.

The parts: who may come in (gate.py), what the forms and links do (acting.py), the pages
(pages.py); this module is the application, its routes, the list and a clone's page and their
live streams.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any
from urllib.parse import quote

from markupsafe import Markup
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from shadowclone.dashboard.acting import Actions
from shadowclone.dashboard.gate import Gate
from shadowclone.dashboard.hosts import HostGate, ServedNames
from shadowclone.dashboard.pages import HEADERS, STATIC, page, render, static_files, web_link
from shadowclone.dashboard.pages import TEMPLATES as TEMPLATES  # noqa: PLC0414  (tests read it)
from shadowclone.dashboard.sessions import ABSOLUTE_S, IDLE_S, Sessions
from shadowclone.errors import ShadowcloneError
from shadowclone.node.local import CloneView
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ProgressLine
from shadowclone.plugin.node import LocalNode
from shadowclone.redact import redact_tokens

log = logging.getLogger(__name__)

POLL_S = 0.25
"""How often a clone's page looks for news (one run folder's files)."""
LIST_POLL_S = 0.5
"""How often the list looks (every active clone and the latest others)."""
LIST_LIMIT = 50
PROGRESS_SHOWN = 200
STREAMS_PER_CLIENT = 4
"""Live streams at once for one session (or for the scripts with the token, together)."""
STREAMS_TOTAL = 64
"""Live streams at once in all: each polls files, so many would slow every page."""
STREAM_RETRY_S = 10


class _Stream(EventSourceResponse):
    """A live stream that gives its place back when it ends, however it ends."""

    def __init__(self, events: AsyncIterator[dict[str, str]], release: Callable[[], None]) -> None:
        super().__init__(events, ping=15)
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()


def _cost(view: CloneView) -> str:
    cost = view.usage.cost_usd
    return f"${cost:.2f}" if cost is not None else f"{view.usage.input_tokens} tokens in"


def _when(moment: datetime | None) -> str:
    return moment.astimezone().strftime("%m-%d %H:%M:%S") if moment else ""


class Dashboard:
    """The application, over one node (the same operations the CLI runs)."""

    def __init__(
        self,
        node: LocalNode,
        token: str,
        origin: str | None = None,
        clock: Callable[[], float] = time.time,
        idle_s: float = IDLE_S,
        absolute_s: float = ABSOLUTE_S,
    ) -> None:
        self.node = node
        self.gate = Gate(token, origin, clock, Sessions(clock, idle_s, absolute_s))
        self.acts = Actions(node, self.gate, clock)
        self.streams: dict[str, int] = {}
        """Live streams by client (a session's key, or "bearer")."""
        self.files = static_files()
        gate, acts, guarded = self.gate, self.acts, self.gate.guarded
        routes = [
            Route("/login", gate.login_page, methods=["GET"]),
            Route("/login", gate.login, methods=["POST"]),
            Route("/logout", guarded(gate.logout), methods=["POST"]),
            Route("/static/{name}", self.static, methods=["GET"]),
            Route("/", guarded(self.clones), methods=["GET"]),
            Route("/events", guarded(self.list_events), methods=["GET"]),
            Route("/clones/{clone_id}", guarded(self.clone), methods=["GET"]),
            Route("/clones/{clone_id}/events", guarded(self.clone_events), methods=["GET"]),
            Route("/clones/{clone_id}/answer", guarded(acts.answer), methods=["POST"]),
            Route("/clones/{clone_id}/send", guarded(acts.send), methods=["POST"]),
            Route("/clones/{clone_id}/stop", guarded(acts.stop), methods=["POST"]),
            Route("/answer/{clone_id}/{question_id}", acts.linked_answer, methods=["POST"]),
        ]
        self.app = Starlette(routes=routes)

    @property
    def token(self) -> str:
        return self.gate.token

    @property
    def started(self) -> float:
        return self.gate.started

    async def static(self, request: Request) -> Response:
        """The pages' script and style (no secret: served without the token)."""
        name = request.path_params["name"]
        if name not in self.files:
            return PlainTextResponse("no such file", status_code=404)
        return Response(
            self.files[name],
            media_type=STATIC[name],
            headers={**HEADERS, "Cache-Control": "no-cache"},
        )

    # ------------------------------------------------------------------ the list

    async def clones(self, request: Request) -> Response:
        rows = await asyncio.to_thread(self._rows)
        return page(
            "clones.html",
            "shadowclone: clones",
            "/events",
            self.gate.csrf(request),
            flash=self.gate.flash(request),
            rows=rows,
        )

    def _rows(self) -> Markup:
        listing = self.node.list(include_all=False, limit=LIST_LIMIT)
        rows = []
        for view in listing.clones:
            last = view.last_progress[-1].text if view.last_progress else view.reason
            rows.append(
                {
                    "id": view.id,
                    "target": view.target.key,
                    "state": view.state,
                    "cost": _cost(view),
                    "asked": view.question.text if view.question else "",
                    "last": redact_tokens(last)[:160],
                }
            )
        return render("rows.html", rows=rows)

    def _streamed(self, request: Request, events: AsyncIterator[dict[str, str]]) -> Response:
        """`events` as a live stream, if the client and the dashboard have room for one more;
        else 429, with when to try again."""
        session = self.gate.session_of(request)
        client = session.key if session is not None else "bearer"
        if (
            self.streams.get(client, 0) >= STREAMS_PER_CLIENT
            or sum(self.streams.values()) >= STREAMS_TOTAL
        ):
            return PlainTextResponse(
                f"too many live pages: at most {STREAMS_PER_CLIENT} for each session and "
                f"{STREAMS_TOTAL} in all; close some and reload",
                status_code=429,
                headers={"Retry-After": str(STREAM_RETRY_S)},
            )
        self.streams[client] = self.streams.get(client, 0) + 1

        def release() -> None:
            self.streams[client] -= 1
            if not self.streams[client]:
                del self.streams[client]

        return _Stream(events, release)

    async def list_events(self, request: Request) -> Response:
        async def stream() -> AsyncIterator[dict[str, str]]:
            last = None
            while self.gate.alive(request) and not await request.is_disconnected():
                rows = await asyncio.to_thread(self._rows)
                if rows != last:
                    last = rows
                    yield {"event": "clones", "data": json.dumps({"rows": rows})}
                await asyncio.sleep(LIST_POLL_S)

        return self._streamed(request, stream())

    # ------------------------------------------------------------------ one clone

    async def clone(self, request: Request) -> Response:
        clone_id = request.path_params["clone_id"]
        try:
            view = await asyncio.to_thread(self.node.get, clone_id, 1)
        except ShadowcloneError:
            # The node's words would repeat the URL's: a fixed line instead.
            missing = page(
                "missing.html",
                "shadowclone",
                csrf=self.gate.csrf(request),
                error="No clone has that id (or more than one starts so).",
            )
            missing.status_code = 404
            return missing
        folder = RunFolder(self.node.paths.clones_dir / view.id)
        lines, _, offset = await asyncio.to_thread(folder.progress)
        csrf = self.gate.csrf(request)
        summary, question = self._summary(view), self._question(view, csrf)
        events = f"/clones/{quote(view.id)}/events?from={offset}&seen={_digest(summary, question)}"
        return page(
            "clone.html",
            f"shadowclone: {view.id}",
            events,
            flash=self.gate.flash(request),
            view=view,
            summary=summary,
            question=question,
            csrf=csrf,
            lines=lines[-PROGRESS_SHOWN:],
        )

    def _summary(self, view: CloneView) -> Markup:
        return render(
            "summary.html",
            view=view,
            cost=_cost(view),
            started=_when(view.started_at),
            pr_link=web_link(view.pr_url),
        )

    def _question(self, view: CloneView, csrf: str) -> Markup:
        question = view.question if view.state.active else None
        return render("question.html", question=question, clone_id=view.id, csrf=csrf)

    async def clone_events(self, request: Request) -> Response:
        clone_id = request.path_params["clone_id"]
        try:
            folder = await asyncio.to_thread(self.node.resolve, clone_id)
        except ShadowcloneError:
            return PlainTextResponse("no clone has that id", status_code=404)
        try:
            offset = max(0, int(request.query_params.get("from", "0")))
        except ValueError:
            offset = 0

        csrf = self.gate.csrf(request)

        async def stream() -> AsyncIterator[dict[str, str]]:
            nonlocal offset
            shown = request.query_params.get("seen")  # what the page shows already
            while self.gate.alive(request) and not await request.is_disconnected():
                lines, _, offset = await asyncio.to_thread(folder.progress, offset)
                for line in lines:
                    yield {"event": "line", "data": json.dumps({"html": _line(line)})}
                view = await asyncio.to_thread(self.node.get, folder.id, 1)
                summary, question = self._summary(view), self._question(view, csrf)
                if (digest := _digest(summary, question)) != shown:
                    shown = digest
                    data = {"summary": summary, "question": question}
                    yield {"event": "view", "data": json.dumps(data)}
                await asyncio.sleep(POLL_S)

        return self._streamed(request, stream())


def _digest(*parts: str) -> str:
    """A short name for what a page shows, so its stream sends only what changed."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _line(line: ProgressLine) -> Markup:
    return render("line.html", line=line)


def build_app(
    node: LocalNode, token: str, origin: str | None = None, host: str = "127.0.0.1"
) -> Any:
    """The ASGI application, bound to `host` (and reached at `origin`, when set)."""
    return HostGate(Dashboard(node, token, origin).app, ServedNames(host, [origin]))
