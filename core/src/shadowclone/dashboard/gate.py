"""Who may use the dashboard: the owner, by the token (a script's Authorization header), or in
a session a login opened (a one-time login code, or the token posted in the form; never the
token in a URL). A session's forms carry its CSRF value and come from the dashboard's origin."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from shadowclone.dashboard.keys import LOGIN_CODE_S, read_login_code
from shadowclone.dashboard.pages import page
from shadowclone.dashboard.sessions import Session, Sessions

COOKIE = "shadowclone_session"

Handler = Callable[[Request], Awaitable[Response]]


class Gate:
    """The owner's way in, and the sessions it opened."""

    def __init__(
        self, token: str, origin: str | None, clock: Callable[[], float], sessions: Sessions
    ) -> None:
        self.token = token
        self.origin = origin
        self.clock = clock
        self.started = clock()
        self.sessions = sessions
        self.used_codes: dict[str, int] = {}

    def bearer(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        return header.startswith("Bearer ") and hmac.compare_digest(
            header[7:].strip().encode(), self.token.encode()
        )

    def same_origin(self, request: Request) -> bool:
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
            if self.bearer(request):
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
                    not self.same_origin(request)
                ):
                    return PlainTextResponse("refused: a form from elsewhere", status_code=403)
            request.state.session = session
            return await handler(request)

        return guard

    @staticmethod
    def session_of(request: Request) -> Session | None:
        """The request's session (None: a script with the token)."""
        session: Session | None = request.state.session
        return session

    def flash(self, request: Request) -> list[tuple[str, str]]:
        """What the session's last action said, shown once. Only the dashboard's own words
        reach a page this way: nothing a link's query carries is shown."""
        session = self.session_of(request)
        if session is None:
            return []
        said, session.flash = session.flash, []
        return said

    def csrf(self, request: Request) -> str:
        session = self.session_of(request)
        return session.csrf if session is not None else ""

    def logged_in(self, request: Request) -> Response:
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

    def login_form(self, error: str | None, status: int) -> Response:
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
            return self.login_form(None, 200)
        now = self.clock()
        for nonce, issued in list(self.used_codes.items()):
            if now - issued > LOGIN_CODE_S:
                del self.used_codes[nonce]
        found = read_login_code(self.token, code)
        if found is None:
            return self.login_form("That login link is not one of this dashboard's.", 401)
        nonce, issued = found
        if nonce in self.used_codes:
            return self.login_form("That login link was used already: it logs in once.", 401)
        if now - issued > LOGIN_CODE_S or issued < int(self.started):
            return self.login_form("That login link has expired.", 401)
        self.used_codes[nonce] = issued
        return self.logged_in(request)

    async def login(self, request: Request) -> Response:
        """The login form: the token, posted (never in a URL)."""
        form = await request.form()
        given = str(form.get("token", "")).strip()
        if not self.same_origin(request):
            return PlainTextResponse("refused: a form from elsewhere", status_code=403)
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return self.login_form("That is not the dashboard's token.", 401)
        return self.logged_in(request)

    async def logout(self, request: Request) -> Response:
        session = self.session_of(request)
        if session is None:
            return PlainTextResponse("no session to end: a script's token has none")
        self.sessions.end(session)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    def alive(self, request: Request) -> bool:
        """A stream ends with its session (idle, too old, or logged out)."""
        session = self.session_of(request)
        return session is None or self.sessions.alive(session)
