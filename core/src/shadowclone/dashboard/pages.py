"""The dashboard's pages: Jinja2 templates, autoescaped, every value redacted as the report is,
served with a strict Content-Security-Policy; and the one rule for what may be a link."""

from __future__ import annotations

from importlib import resources
from urllib.parse import urlsplit

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup
from starlette.responses import HTMLResponse

from shadowclone.redact import redact_tokens


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


def static_files() -> dict[str, bytes]:
    folder = resources.files("shadowclone.dashboard") / "static"
    return {name: folder.joinpath(name).read_bytes() for name in STATIC}


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
