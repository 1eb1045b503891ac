"""What the model proxy forwards, and how: the request rules and the header rewriting.

Pure functions of a request's method, target and headers, kept apart from the sockets so each
rule can be read, and tested, alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import unquote

from shadowclone.proxy.credentials import ENGINE_AUTH_HEADERS, LIST_HEADERS

HOP_BY_HOP: frozenset[str] = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers that describe one connection, not the message (RFC 9110 7.6.1): never forwarded,
in either direction, nor are the headers a Connection header names."""

REQUEST_DROPPED: frozenset[str] = HOP_BY_HOP | ENGINE_AUTH_HEADERS | {"host", "expect"}
"""Removed from every engine request: Host is the upstream's, and the proxy answers a
100-continue itself."""

ALLOWED_METHODS: frozenset[str] = frozenset(
    {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
)
"""What a model API uses. Not CONNECT (a tunnel elsewhere) nor TRACE (it would echo the
injected credential back to the engine)."""

LOGGED_PATH_CHARS = 200


def refusal(method: str, target: bytes, prefix: str) -> tuple[int, str] | None:
    """Why a request must not be forwarded (status, one line), or None to forward it.

    `target` is the raw request target; only origin-form (`/path?query`) under `prefix` (the
    upstream base URL's path, without a trailing slash) is served.
    """
    if method == "CONNECT":
        return 405, "CONNECT is refused: this proxy forwards to one model provider only"
    if method not in ALLOWED_METHODS:
        return 405, f"method {method[:20]!r} is refused"
    try:
        text = target.decode("ascii")
    except UnicodeDecodeError:
        return 400, "the request target is not ASCII"
    if not text.startswith("/") or text.startswith("//"):
        return 403, "only a path is served here, not an absolute URL or another host"
    path = text.split("?", 1)[0]
    decoded = unquote(path)
    if "#" in text or "\\" in decoded or any(ord(char) < 0x20 for char in decoded):
        return 403, "the path holds a character that is refused (#, backslash, control)"
    if any(segment in (".", "..") for segment in decoded.split("/")):
        return 403, "the path holds a dot segment"
    if prefix and path != prefix and not path.startswith(prefix + "/"):
        return 403, f"the path is outside {prefix}/, the only one this proxy serves"
    return None


def _connection_tokens(headers: Iterable[tuple[bytes, bytes]]) -> set[str]:
    """The header names a Connection header lists: hop-by-hop for this message."""
    return {
        token.strip().lower()
        for name, value in headers
        if name.lower() == b"connection"
        for token in value.decode("latin-1").split(",")
        if token.strip()
    }


def _merge_list(engine: str | None, ours: str) -> str:
    """`engine`'s comma-separated tokens, then those of `ours` it lacks."""
    tokens = [token.strip() for token in (engine or "").split(",") if token.strip()]
    tokens += [token.strip() for token in ours.split(",") if token.strip() not in tokens]
    return ",".join(token for token in tokens if token)


def upstream_headers(
    engine: Iterable[tuple[bytes, bytes]], credential: Mapping[str, str]
) -> list[tuple[bytes, bytes]]:
    """The headers of the upstream request: the engine's minus hop-by-hop, Host and its
    authentication, plus the credential's. A credential header in `LIST_HEADERS` is added to
    the engine's value; every other credential header replaces whatever the engine sent."""
    engine = [(name.lower(), value) for name, value in engine]
    ours = {name.lower(): value for name, value in credential.items()}
    dropped = REQUEST_DROPPED | _connection_tokens(engine) | set(ours)
    if any(name == b"transfer-encoding" for name, _ in engine):
        dropped |= {"content-length"}  # the body is re-framed as chunked
    kept: list[tuple[bytes, bytes]] = []
    lists: dict[str, list[str]] = {}
    for raw_name, raw_value in engine:
        name = raw_name.decode("latin-1")
        if name in LIST_HEADERS and name in ours:
            lists.setdefault(name, []).append(raw_value.decode("latin-1"))
        elif name not in dropped:
            kept.append((raw_name, raw_value))
    for name, value in ours.items():
        merged = (
            _merge_list(",".join(lists.get(name, [])), value) if name in LIST_HEADERS else value
        )
        kept.append((name.encode("latin-1"), merged.encode("latin-1")))
    return kept


def response_headers(upstream: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The provider's response headers minus hop-by-hop ones; h11 frames the body again."""
    upstream = list(upstream)
    dropped = HOP_BY_HOP | _connection_tokens(upstream)
    return [(name, value) for name, value in upstream if name.lower().decode() not in dropped]


def logged_path(target: bytes) -> str:
    """The path for a log line: no query (it may carry a key), bounded, repr-quoted."""
    path = target.split(b"?", 1)[0].decode("ascii", "replace")
    return repr(path[:LOGGED_PATH_CHARS])
