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
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from importlib import resources
from typing import Any
from urllib.parse import quote, urlsplit

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from shadowclone.dashboard.hosts import HostGate, ServedNames
from shadowclone.dashboard.keys import (
    LOGIN_CODE_S,
    question_digest,
    read_answer_link,
    read_login_code,
)
from shadowclone.dashboard.sessions import ABSOLUTE_S, IDLE_S, Session, Sessions
from shadowclone.errors import ShadowcloneError
from shadowclone.node.local import CloneView, LocalNode
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ProgressLine, Via
from shadowclone.redact import redact_tokens

log = logging.getLogger(__name__)

COOKIE = "shadowclone_session"
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

Handler = Callable[[Request], Awaitable[Response]]


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


def _shown(value: object) -> object:
    """Every value a template prints, redacted (then escaped by the autoescape): HTML made by
    another template of ours is already both, and passes as it is."""
    if isinstance(value, Markup):
        return value
    return redact_tokens("" if value is None else str(value))


TEMPLATES = Environment(
    loader=PackageLoader("shadowclone.dashboard", "templates"),
    autoescape=True,
    finalize=_shown,
    undefined=StrictUndefined,
    auto_reload=False,
)
"""The dashboard's pages: autoescaped, and every value redacted as the report is."""


def render(name: str, **values: object) -> Markup:
    return Markup(TEMPLATES.get_template(name).render(**values))


CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""No inline script or style anywhere: the page's script and style are files of their own."""
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
STATIC = {
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
}


def page(
    name: str, title: str, events: str | None = None, csrf: str = "", **values: object
) -> HTMLResponse:
    """A page; `events`: the stream its script follows; `csrf`: its session's, for its forms
    (none: no session, then no form but the login's)."""
    return HTMLResponse(
        render(name, title=title, events=events, csrf=csrf, **values),
        headers={**HEADERS, "Cache-Control": "no-store"},
    )


def _static_files() -> dict[str, bytes]:
    folder = resources.files("shadowclone.dashboard") / "static"
    return {name: folder.joinpath(name).read_bytes() for name in STATIC}


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
        self.token = token
        self.origin = origin
        self.clock = clock
        self.started = clock()
        self.sessions = Sessions(clock, idle_s, absolute_s)
        self.used_codes: dict[str, int] = {}
        self.used_links: dict[str, int] = {}
        """The answer links used (by nonce), until they expire."""
        self.streams: dict[str, int] = {}
        """Live streams by client (a session's key, or "bearer")."""
        self.files = _static_files()
        routes = [
            Route("/login", self.login_page, methods=["GET"]),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", self.guarded(self.logout), methods=["POST"]),
            Route("/static/{name}", self.static, methods=["GET"]),
            Route("/", self.guarded(self.clones), methods=["GET"]),
            Route("/events", self.guarded(self.list_events), methods=["GET"]),
            Route("/clones/{clone_id}", self.guarded(self.clone), methods=["GET"]),
            Route("/clones/{clone_id}/events", self.guarded(self.clone_events), methods=["GET"]),
            Route("/clones/{clone_id}/answer", self.guarded(self.answer), methods=["POST"]),
            Route("/clones/{clone_id}/send", self.guarded(self.send), methods=["POST"]),
            Route("/clones/{clone_id}/stop", self.guarded(self.stop), methods=["POST"]),
            Route("/answer/{clone_id}/{question_id}", self.linked_answer, methods=["POST"]),
        ]
        self.app = Starlette(routes=routes)

    # ------------------------------------------------------------------ the gate

    def _bearer(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        return header.startswith("Bearer ") and hmac.compare_digest(
            header[7:].strip().encode(), self.token.encode()
        )

    def _same_origin(self, request: Request) -> bool:
        origin = request.headers.get("origin") or request.headers.get("referer")
        if not origin:
            return True  # no browser sends a cross-site form without one of them
        found = urlsplit(origin)
        host = request.headers.get("host", "")
        allowed = {host}
        if self.origin:
            allowed.add(urlsplit(self.origin).netloc)
        return found.netloc in allowed

    def guarded(self, handler: Handler) -> Handler:
        """Only the owner's: with the token in the Authorization header (a script), or in a
        live session whose forms carry its CSRF value (a browser)."""

        async def guard(request: Request) -> Response:
            request.state.session = None
            if self._bearer(request):
                return await handler(request)
            streaming = request.url.path.endswith("/events")
            session = self.sessions.find(request.cookies.get(COOKIE, ""), touch=not streaming)
            if session is None:
                return PlainTextResponse(
                    "log in first: open the login link `shadowclone dashboard` prints, or /login",
                    status_code=401,
                )
            if request.method == "POST":
                form = await request.form()
                given = str(form.get("csrf", ""))
                if not hmac.compare_digest(given.encode(), session.csrf.encode()) or (
                    not self._same_origin(request)
                ):
                    return PlainTextResponse("refused: a form from elsewhere", status_code=403)
            request.state.session = session
            return await handler(request)

        return guard

    @staticmethod
    def _session(request: Request) -> Session | None:
        """The request's session (None: a script with the token)."""
        session: Session | None = request.state.session
        return session

    def _flash(self, request: Request) -> list[tuple[str, str]]:
        """What the session's last action said, shown once. Only the dashboard's own words
        reach a page this way: nothing a link's query carries is shown."""
        session = self._session(request)
        if session is None:
            return []
        said, session.flash = session.flash, []
        return said

    def _csrf(self, request: Request) -> str:
        session = self._session(request)
        return session.csrf if session is not None else ""

    def _logged_in(self, request: Request) -> Response:
        """A new session for this browser (a login rotates it: any session it had ends)."""
        old = self.sessions.find(request.cookies.get(COOKIE, ""), touch=False)
        if old is not None:
            self.sessions.end(old)
        cookie, _ = self.sessions.open()
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            COOKIE,
            cookie,
            max_age=int(self.sessions.absolute_s),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    def _login_form(self, error: str | None, status: int) -> Response:
        response = page("login.html", "shadowclone: log in", error=error)
        response.status_code = status
        return response

    async def login_page(self, request: Request) -> Response:
        """A login link (`?code=`, good once), or the form to give the token in."""
        if "token" in request.query_params:
            return PlainTextResponse(
                "refused: the token goes in no URL; open the login link `shadowclone dashboard`"
                " prints, or give the token in the form at /login",
                status_code=401,
            )
        code = request.query_params.get("code")
        if code is None:
            return self._login_form(None, 200)
        now = self.clock()
        for nonce, issued in list(self.used_codes.items()):
            if now - issued > LOGIN_CODE_S:
                del self.used_codes[nonce]
        found = read_login_code(self.token, code)
        if found is None:
            return self._login_form("That login link is not one of this dashboard's.", 401)
        nonce, issued = found
        if nonce in self.used_codes:
            return self._login_form("That login link was used already: it logs in once.", 401)
        if now - issued > LOGIN_CODE_S or issued < int(self.started):
            return self._login_form("That login link has expired.", 401)
        self.used_codes[nonce] = issued
        return self._logged_in(request)

    async def login(self, request: Request) -> Response:
        """The login form: the token, posted (never in a URL)."""
        form = await request.form()
        given = str(form.get("token", "")).strip()
        if not self._same_origin(request):
            return PlainTextResponse("refused: a form from elsewhere", status_code=403)
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return self._login_form("That is not the dashboard's token.", 401)
        return self._logged_in(request)

    async def logout(self, request: Request) -> Response:
        session = self._session(request)
        if session is None:
            return PlainTextResponse("no session to end: a script's token has none")
        self.sessions.end(session)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

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
            self._csrf(request),
            flash=self._flash(request),
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

    def _streams_on(self, request: Request) -> bool:
        """A stream ends with its session (idle, too old, or logged out)."""
        session = self._session(request)
        return session is None or self.sessions.alive(session)

    def _streamed(self, request: Request, events: AsyncIterator[dict[str, str]]) -> Response:
        """`events` as a live stream, if the client and the dashboard have room for one more;
        else 429, with when to try again."""
        session = self._session(request)
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
            while self._streams_on(request) and not await request.is_disconnected():
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
                csrf=self._csrf(request),
                error="No clone has that id (or more than one starts so).",
            )
            missing.status_code = 404
            return missing
        folder = RunFolder(self.node.paths.clones_dir / view.id)
        lines, _, offset = await asyncio.to_thread(folder.progress)
        csrf = self._csrf(request)
        summary, question = self._summary(view), self._question(view, csrf)
        events = f"/clones/{quote(view.id)}/events?from={offset}&seen={_digest(summary, question)}"
        return page(
            "clone.html",
            f"shadowclone: {view.id}",
            events,
            flash=self._flash(request),
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

        csrf = self._csrf(request)

        async def stream() -> AsyncIterator[dict[str, str]]:
            nonlocal offset
            shown = request.query_params.get("seen")  # what the page shows already
            while self._streams_on(request) and not await request.is_disconnected():
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

    # ------------------------------------------------------------------ acting

    async def _act(self, request: Request, act: Callable[[dict[str, str]], str]) -> Response:
        clone_id = request.path_params["clone_id"]
        form = {k: str(v) for k, v in (await request.form()).items()}
        target = f"/clones/{quote(clone_id)}"
        session = self._session(request)
        try:
            said = await asyncio.to_thread(act, form)
        except ShadowcloneError as error:
            if session is None:
                return PlainTextResponse(str(error), status_code=409)
            session.flash.append(("error", str(error)))
            return RedirectResponse(target, status_code=303)
        if session is None:
            return PlainTextResponse(said)
        session.flash.append(("said", said))
        return RedirectResponse(target, status_code=303)

    async def answer(self, request: Request) -> Response:
        clone_id = request.path_params["clone_id"]

        def act(form: dict[str, str]) -> str:
            question_id, choice = form.get("question_id", ""), form.get("choice", "")
            self.node.answer(clone_id, question_id, choice, via=Via.DASHBOARD)
            return f"answered {question_id}: {choice}"

        return await self._act(request, act)

    async def send(self, request: Request) -> Response:
        clone_id = request.path_params["clone_id"]

        def act(form: dict[str, str]) -> str:
            line = self.node.send(clone_id, form.get("text", ""), via=Via.DASHBOARD)
            return f"message {line.id} sent"

        return await self._act(request, act)

    async def stop(self, request: Request) -> Response:
        clone_id = request.path_params["clone_id"]

        def act(_form: dict[str, str]) -> str:
            view = self.node.stop(clone_id)
            return f"clone {view.id} is stopping"

        return await self._act(request, act)

    async def linked_answer(self, request: Request) -> Response:
        """An answer link from a notification: it answers its one question, once."""
        clone_id = request.path_params["clone_id"]
        question_id = request.path_params["question_id"]
        link = read_answer_link(self.token, clone_id, question_id, request.query_params)
        if link is None:
            return PlainTextResponse("refused: this link is not signed for that", 403)
        now = self.clock()
        for nonce, expires in list(self.used_links.items()):
            if expires < now:
                del self.used_links[nonce]
        if link.nonce in self.used_links:
            return PlainTextResponse("this answer link was used already", status_code=410)
        if link.expires < now:
            return PlainTextResponse("this answer link has expired", status_code=410)
        self.used_links[link.nonce] = link.expires  # before the answer: a second press waits
        try:
            view = await asyncio.to_thread(self.node.get, clone_id, 1)
            asked = view.question
            if (
                asked is not None
                and asked.id == question_id
                and question_digest(asked) != link.question
            ):
                del self.used_links[link.nonce]
                return PlainTextResponse("refused: this link is for another question", 403)
            await asyncio.to_thread(
                self.node.answer, clone_id, question_id, link.choice, Via.NOTIFICATION
            )
        except ShadowcloneError as error:
            self.used_links.pop(link.nonce, None)  # not spent: the node's refusal stands
            return PlainTextResponse(str(error), status_code=409)
        return PlainTextResponse(f"answered {question_id}: {link.choice}")


def web_link(url: str | None) -> str | None:
    """`url` when it is a plain web address to link to, else None (then it is shown as text).

    The record is the clone's word: a `javascript:` or `data:` URL would run in the page, and
    `https://github.com@elsewhere/` leads elsewhere than it reads; anything a browser might
    read otherwise than this check (spaces, control characters, backslashes) is no link."""
    if not url or any(c.isspace() or c == "\\" or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        return None
    if not url.lower().startswith(("http://", "https://")):
        return None
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is no number raises
    except ValueError:
        return None
    if not parts.hostname or parts.username is not None or parts.password is not None:
        return None
    return url


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
