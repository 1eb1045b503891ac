"""The dashboard's token, the one-time login codes made from it, and the answer links
notifications carry.

The token is made once, kept 0600 beside the config, and every request to the dashboard needs
it or a session a login opened. The token never goes in a URL: a login link carries a login
code instead, signed with a key derived from the token, good once and for a few minutes.
An answer link is signed with a key derived from it for one clone, one question (its id and
its words) and one option, until the question's timeout: a notification can carry it to a
phone without carrying the token, and it can do nothing but give that one answer, once (the
dashboard remembers the links used, and the node takes an answer only while the question is
open).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote, urlencode

import attrs

from shadowclone import files
from shadowclone.config import Paths
from shadowclone.errors import MalformedFile
from shadowclone.node.schemas import Question

TOKEN_FILE = "dashboard.token"


def token_file(paths: Paths) -> Path:
    return paths.config_file.parent / TOKEN_FILE


def load_token(paths: Paths, create: bool = True) -> tuple[str, bool]:
    """The dashboard's token, and whether it was made now (then it is shown once)."""
    path = token_file(paths)
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        if not create:
            raise
        token = secrets.token_urlsafe(32)
        path.parent.mkdir(parents=True, exist_ok=True)
        files.write_atomic(path, token.encode(), mode=0o600)
        return token, True
    except (OSError, UnicodeDecodeError) as error:
        raise MalformedFile(path, f"cannot read the dashboard's token: {error}") from None
    if os.stat(path).st_mode & 0o077:
        raise MalformedFile(path, "the dashboard's token is readable by others: chmod 600 it")
    if len(text) < 32:
        raise MalformedFile(path, "expected a token of at least 32 characters")
    return text, False


LOGIN_CODE_S = 600.0
"""How long a login code is good for (and only once, and only on the dashboard that was
already running when it was made)."""


def _login_key(token: str) -> bytes:
    return hmac.new(token.encode(), b"shadowclone login codes", hashlib.sha256).digest()


def _login_signature(token: str, nonce: str, issued: int) -> str:
    digest = hmac.new(_login_key(token), f"{nonce}.{issued}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def login_code(token: str, now: float | None = None) -> str:
    """A new one-time login code."""
    nonce, issued = secrets.token_urlsafe(16), int(time.time() if now is None else now)
    return f"{nonce}.{issued}.{_login_signature(token, nonce, issued)}"


def read_login_code(token: str, code: str) -> tuple[str, int] | None:
    """The nonce and the time of issue of a login code signed with `token`, else None."""
    nonce, _, rest = code.partition(".")
    issued, _, signature = rest.partition(".")
    if not nonce or not issued.isdigit() or len(issued) > 12:
        return None
    expected = _login_signature(token, nonce, int(issued))
    if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
        return None
    return nonce, int(issued)


def login_url(base: str, token: str) -> str:
    """A link that logs one browser in, once, within LOGIN_CODE_S."""
    return f"{base.rstrip('/')}/login?{urlencode({'code': login_code(token)})}"


def _link_key(token: str) -> bytes:
    return hmac.new(token.encode(), b"shadowclone answer links", hashlib.sha256).digest()


LINK_GRACE_S = 60.0
"""An answer link is good for its question's timeout and this much more."""


@attrs.frozen
class AnswerLink:
    """What an answer link is signed for: one option of one question of one clone (the
    question named by its id and by a digest of its words, so a later question that takes the
    same id is another), until `expires`, once (`nonce`: shared by the links of one
    notification, so that one used spends them all)."""

    clone_id: str
    question_id: str
    question: str
    choice: str
    expires: int
    nonce: str

    def signature(self, token: str) -> str:
        fields = (self.clone_id, self.question_id, self.question, self.choice)
        message = "\0".join((*fields, str(self.expires), self.nonce))
        digest = hmac.new(
            _link_key(token), message.encode("utf-8", "surrogateescape"), hashlib.sha256
        ).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def question_digest(question: Question) -> str:
    words = "\0".join((question.id, question.text, question.recommended, *question.options))
    return hashlib.sha256(words.encode("utf-8", "surrogateescape")).hexdigest()[:24]


def answer_urls(
    base: str, token: str, clone_id: str, question: Question, now: float | None = None
) -> dict[str, str]:
    """For each option of `question`: the link that answers it with that option when POSTed
    to, good once (for the whole set), until the question's timeout has passed."""
    now = time.time() if now is None else now
    expires = int(now + question.timeout_s + LINK_GRACE_S)
    nonce = secrets.token_urlsafe(12)
    digest = question_digest(question)
    urls = {}
    for choice in question.options:
        link = AnswerLink(clone_id, question.id, digest, choice, expires, nonce)
        query = urlencode(
            {
                "choice": choice,
                "q": digest,
                "exp": expires,
                "n": nonce,
                "sig": link.signature(token),
            }
        )
        urls[choice] = f"{base.rstrip('/')}/answer/{quote(clone_id)}/{quote(question.id)}?{query}"
    return urls


def read_answer_link(
    token: str, clone_id: str, question_id: str, query: Mapping[str, str]
) -> AnswerLink | None:
    """The answer link a request carries, if it is signed with `token`, else None."""
    expires = query.get("exp", "")
    if not expires.isdigit() or len(expires) > 12:
        return None
    link = AnswerLink(
        clone_id,
        question_id,
        query.get("q", ""),
        query.get("choice", ""),
        int(expires),
        query.get("n", ""),
    )
    given = query.get("sig", "").encode("utf-8", "replace")
    return link if hmac.compare_digest(link.signature(token).encode(), given) else None
