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
import html
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

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


def e(text: object) -> str:
    """Escaped and redacted: every text of a clone goes through here."""
    return html.escape(redact_tokens(str(text)), quote=True)


STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;gap:16px;align-items:center}
header a{color:#fff;text-decoration:none;font-weight:600}
main{padding:16px 20px;max-width:1100px}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{padding:6px 8px;border-bottom:1px solid #e3e6eb;text-align:left;vertical-align:top}
.state{font-weight:600}.waiting,.paused{color:#b35c00}.failed{color:#b3261e}
.done{color:#1e7b34}.running,.preparing{color:#1a5fb4}.queued,.scheduled{color:#666}
.question{background:#fff7e6;border:1px solid #f0c36d;padding:10px;margin:10px 0}
.error{background:#fdecea;border:1px solid #b3261e;padding:8px;margin:10px 0}
form.inline{display:inline}button{margin:2px 4px 2px 0;cursor:pointer}
ol.progress{background:#fff;padding:8px 8px 8px 48px;font:12px/1.4 monospace}
.muted{color:#666}
"""


def page(title: str, body: str, script: str = "") -> HTMLResponse:
    return HTMLResponse(
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{e(title)}</title><style>{STYLE}</style></head><body>"
        "<header><a href='/'>shadowclone</a><span class='muted'>your clones</span></header>"
        f"<main>{body}</main>{script}</body></html>",
        headers={
            "Content-Security-Policy": "default-src 'self'; style-src 'unsafe-inline'; "
            "script-src 'unsafe-inline'; frame-ancestors 'none'",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "same-origin",
            "Cache-Control": "no-store",
        },
    )


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
        routes = [
            Route("/login", self.login, methods=["GET"]),
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

    # ------------------------------------------------------------------ the list

    async def clones(self, request: Request) -> Response:
        rows = await asyncio.to_thread(self._rows)
        error = request.query_params.get("error")
        body = (f"<div class='error'>{e(error)}</div>" if error else "") + (
            "<h1>Clones</h1><table><thead><tr><th>clone</th><th>target</th><th>state</th>"
            "<th>cost</th><th>question</th><th>last</th></tr></thead>"
            f"<tbody id='clones'>{rows}</tbody></table>"
        )
        script = (
            "<script>const s=new EventSource('/events');"
            "s.addEventListener('clones',ev=>{document.getElementById('clones').innerHTML="
            "JSON.parse(ev.data).rows;});</script>"
        )
        return page("shadowclone: clones", body, script)

    def _rows(self) -> str:
        listing = self.node.list(include_all=False, limit=LIST_LIMIT)
        out = []
        for view in listing.clones:
            question = view.question
            asked = e(question.text) if question else ""
            last = view.last_progress[-1].text if view.last_progress else view.reason
            out.append(
                f"<tr data-id='{e(view.id)}'><td><a href='/clones/{quote(view.id)}'>"
                f"{e(view.id)}</a></td><td>{e(view.target.key)}</td>"
                f"<td class='state {e(view.state)}'>{e(view.state)}</td>"
                f"<td>{e(_cost(view))}</td><td>{asked}</td>"
                f"<td class='muted'>{e(last[:160])}</td></tr>"
            )
        return "".join(out) or "<tr><td colspan='6' class='muted'>no clones yet</td></tr>"

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
            return page("shadowclone", f"<div class='error'>{e(missing)}</div>")
        folder = RunFolder(self.node.paths.clones_dir / view.id)
        lines, _, offset = await asyncio.to_thread(folder.progress)
        problem = request.query_params.get("error")
        said = request.query_params.get("said")
        items = "".join(_line(line) for line in lines[-PROGRESS_SHOWN:])
        seen = _digest(self._summary(view), self._question(view))
        body = (
            (f"<div class='error'>{e(problem)}</div>" if problem else "")
            + (f"<div class='muted'>{e(said)}</div>" if said else "")
            + f"<h1>{e(view.target.key)} <span class='muted'>{e(view.id)}</span></h1>"
            + f"<div id='summary'>{self._summary(view)}</div>"
            + f"<div id='question'>{self._question(view)}</div>"
            + self._actions(view)
            + f"<h2>Progress</h2><ol class='progress' id='progress'>{items}</ol>"
        )
        script = (
            f"<script>const s=new EventSource('/clones/{quote(view.id)}/events?from={offset}"
            f"&seen={seen}');"
            "s.addEventListener('line',ev=>{const p=document.getElementById('progress');"
            "p.insertAdjacentHTML('beforeend',JSON.parse(ev.data).html);});"
            "s.addEventListener('view',ev=>{const d=JSON.parse(ev.data);"
            "document.getElementById('summary').innerHTML=d.summary;"
            "document.getElementById('question').innerHTML=d.question;});</script>"
        )
        return page(f"shadowclone: {view.id}", body, script)

    def _summary(self, view: CloneView) -> str:
        pr = ""
        if view.pr_url and urlsplit(view.pr_url).scheme in ("http", "https"):
            # A link only to the web: the record is the clone's word, and a `javascript:` URL
            # would run in this page.
            pr = f" · <a href='{e(view.pr_url)}'>pull request</a>"
        elif view.pr_url:
            pr = f" · pull request {e(view.pr_url)}"
        stop = " (stop requested)" if view.stop_requested and view.state.active else ""
        waiting = (
            f"<div class='muted'>waits for {e(view.waiting_for)}</div>"
            if (view.waiting_for)
            else ""
        )
        return (
            f"<p><span class='state {e(view.state)}'>{e(view.state)}</span>{e(stop)} · "
            f"{e(view.engine)} · {e(_cost(view))} · {view.turns} turns · started "
            f"{e(_when(view.started_at))}{pr}</p>{waiting}"
            + (f"<p>{e(view.reason)}</p>" if view.reason else "")
        )

    def _question(self, view: CloneView) -> str:
        question = view.question
        if question is None or not view.state.active:
            return ""
        buttons = "".join(
            f"<button name='choice' value='{e(option)}'>{e(option)}"
            + (" (recommended)" if option == question.recommended else "")
            + "</button>"
            for option in question.options
        )
        return (
            f"<div class='question'><b>Question {e(question.id)}</b>: {e(question.text)}"
            f"<form method='post' action='/clones/{quote(view.id)}/answer'>"
            f"<input type='hidden' name='csrf' value='{self.csrf}'>"
            f"<input type='hidden' name='question_id' value='{e(question.id)}'>{buttons}"
            "</form></div>"
        )

    def _actions(self, view: CloneView) -> str:
        if not view.state.active:
            return ""
        csrf = f"<input type='hidden' name='csrf' value='{self.csrf}'>"
        base = f"/clones/{quote(view.id)}"
        return (
            f"<form method='post' action='{base}/send'>{csrf}"
            "<input name='text' size='60' placeholder='a message for the clone'>"
            "<button>Send</button></form>"
            f"<form method='post' action='{base}/stop' class='inline'>{csrf}"
            "<button>Stop</button></form>"
        )

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


def _digest(*parts: str) -> str:
    """A short name for what a page shows, so its stream sends only what changed."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _line(line: ProgressLine) -> str:
    stamp = line.at.astimezone().strftime("%H:%M:%S")
    return f"<li><span class='muted'>{stamp} {e(line.step)}</span> {e(line.words)}</li>"


def build_app(node: LocalNode, token: str, origin: str | None = None) -> Any:
    """The ASGI application."""
    return Dashboard(node, token, origin).app
