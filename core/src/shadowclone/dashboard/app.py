"""The dashboard's web application (Starlette): pages rendered on the server, live updates by
server-sent events, and forms that go through the node's operations as the CLI's commands do.

Every request needs the owner's token: once, as `/login?token=...`, which sets a session
cookie (HttpOnly, SameSite=Strict), or as `Authorization: Bearer TOKEN`. A form posted with
the cookie also carries a CSRF value derived from the token, and a request whose Origin is
not the dashboard's is refused. The one exception is an answer link from a notification:
signed for one clone, one question and one option, it can give that answer and nothing else.
Every text shown passes the report's redaction.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
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

from shadowclone.dashboard.hosts import HostGate, ServedNames
from shadowclone.dashboard.keys import signed
from shadowclone.errors import ShadowcloneError
from shadowclone.node.local import CloneView, LocalNode
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ProgressLine, Via
from shadowclone.run.redact import redact_tokens

log = logging.getLogger(__name__)

COOKIE = "shadowclone_session"
POLL_S = 0.25
"""How often a clone's page looks for news (one run folder's files)."""
LIST_POLL_S = 0.5
"""How often the list looks (every active clone and the latest others)."""
LIST_LIMIT = 50
PROGRESS_SHOWN = 200

Handler = Callable[[Request], Awaitable[Response]]


def _derived(token: str, purpose: str) -> str:
    return hmac.new(token.encode(), purpose.encode(), hashlib.sha256).hexdigest()


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


def page(name: str, title: str, events: str | None = None, **values: object) -> HTMLResponse:
    """A page; `events`: the stream its script follows."""
    return HTMLResponse(
        render(name, title=title, events=events, **values),
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

    def __init__(self, node: LocalNode, token: str, origin: str | None = None) -> None:
        self.node = node
        self.token = token
        self.session = _derived(token, "session")
        self.csrf = _derived(token, "csrf")
        self.origin = origin
        self.files = _static_files()
        routes = [
            Route("/login", self.login, methods=["GET"]),
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

    def _authorized(self, request: Request) -> str | None:
        """How the request proves it is the owner's: "bearer", "cookie", or None."""
        header = request.headers.get("authorization", "")
        if header.startswith("Bearer ") and hmac.compare_digest(
            header[7:].strip().encode(), self.token.encode()
        ):
            return "bearer"
        cookie = request.cookies.get(COOKIE, "")
        if cookie and hmac.compare_digest(cookie.encode(), self.session.encode()):
            return "cookie"
        return None

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
        async def guard(request: Request) -> Response:
            how = self._authorized(request)
            if how is None:
                return PlainTextResponse(
                    "the dashboard needs your token: open /login?token=... (the token is in "
                    "dashboard.token beside your config)",
                    status_code=401,
                )
            if request.method == "POST" and how == "cookie":
                form = await request.form()
                given = str(form.get("csrf", ""))
                if not hmac.compare_digest(given.encode(), self.csrf.encode()) or (
                    not self._same_origin(request)
                ):
                    return PlainTextResponse("refused: a form from elsewhere", status_code=403)
            return await handler(request)

        return guard

    async def login(self, request: Request) -> Response:
        given = request.query_params.get("token", "")
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return PlainTextResponse("wrong or missing token", status_code=401)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            COOKIE,
            self.session,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
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
        error = request.query_params.get("error")
        return page("clones.html", "shadowclone: clones", "/events", error=error, rows=rows)

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

    async def list_events(self, request: Request) -> Response:
        async def stream() -> AsyncIterator[dict[str, str]]:
            last = None
            while not await request.is_disconnected():
                rows = await asyncio.to_thread(self._rows)
                if rows != last:
                    last = rows
                    yield {"event": "clones", "data": json.dumps({"rows": rows})}
                await asyncio.sleep(LIST_POLL_S)

        return EventSourceResponse(stream(), ping=15)

    # ------------------------------------------------------------------ one clone

    async def clone(self, request: Request) -> Response:
        clone_id = request.path_params["clone_id"]
        try:
            view = await asyncio.to_thread(self.node.get, clone_id, 1)
        except ShadowcloneError as missing:
            return page("missing.html", "shadowclone", error=missing)
        folder = RunFolder(self.node.paths.clones_dir / view.id)
        lines, _, offset = await asyncio.to_thread(folder.progress)
        summary, question = self._summary(view), self._question(view)
        events = f"/clones/{quote(view.id)}/events?from={offset}&seen={_digest(summary, question)}"
        return page(
            "clone.html",
            f"shadowclone: {view.id}",
            events,
            error=request.query_params.get("error"),
            said=request.query_params.get("said"),
            view=view,
            summary=summary,
            question=question,
            csrf=self.csrf,
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

    def _question(self, view: CloneView) -> Markup:
        question = view.question if view.state.active else None
        return render("question.html", question=question, clone_id=view.id, csrf=self.csrf)

    async def clone_events(self, request: Request) -> Response:
        clone_id = request.path_params["clone_id"]
        try:
            folder = await asyncio.to_thread(self.node.resolve, clone_id)
        except ShadowcloneError as error:
            return PlainTextResponse(str(error), status_code=404)
        try:
            offset = max(0, int(request.query_params.get("from", "0")))
        except ValueError:
            offset = 0

        async def stream() -> AsyncIterator[dict[str, str]]:
            nonlocal offset
            shown = request.query_params.get("seen")  # what the page shows already
            while not await request.is_disconnected():
                lines, _, offset = await asyncio.to_thread(folder.progress, offset)
                for line in lines:
                    yield {"event": "line", "data": json.dumps({"html": _line(line)})}
                view = await asyncio.to_thread(self.node.get, folder.id, 1)
                summary, question = self._summary(view), self._question(view)
                if (digest := _digest(summary, question)) != shown:
                    shown = digest
                    data = {"summary": summary, "question": question}
                    yield {"event": "view", "data": json.dumps(data)}
                await asyncio.sleep(POLL_S)

        return EventSourceResponse(stream(), ping=15)

    # ------------------------------------------------------------------ acting

    async def _act(self, request: Request, act: Callable[[dict[str, str]], str]) -> Response:
        clone_id = request.path_params["clone_id"]
        form = {k: str(v) for k, v in (await request.form()).items()}
        target = f"/clones/{quote(clone_id)}"
        try:
            said = await asyncio.to_thread(act, form)
        except ShadowcloneError as error:
            if self._authorized(request) == "bearer":
                return PlainTextResponse(str(error), status_code=409)
            return RedirectResponse(f"{target}?error={quote(str(error))}", status_code=303)
        if self._authorized(request) == "bearer":
            return PlainTextResponse(said)
        return RedirectResponse(f"{target}?said={quote(said)}", status_code=303)

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
        choice = request.query_params.get("choice", "")
        if not signed(
            self.token, clone_id, question_id, choice, request.query_params.get("sig", "")
        ):
            return PlainTextResponse("refused: this link is not signed for that", 403)
        try:
            await asyncio.to_thread(
                self.node.answer, clone_id, question_id, choice, Via.NOTIFICATION
            )
        except ShadowcloneError as error:
            return PlainTextResponse(str(error), status_code=409)
        return PlainTextResponse(f"answered {question_id}: {choice}")


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
