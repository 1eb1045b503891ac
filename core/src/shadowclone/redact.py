"""`redact_secrets`: nothing the clone reports may carry a secret out of the container.

Two kinds of thing are replaced by `MARKER`:

- every given secret value (the values of the secrets file), in each form it is likely to take in
  a report or a log: as is; wrapped or split, with whitespace (also JSON `\\n` or `%0A`) between any
  two of its characters; with any of its characters percent-encoded (any subset, either hex case)
  or JSON-escaped (`\\u0041`, `\\"`, `\\/`); and base64-encoded (standard or URL-safe alphabet,
  padded or not, line-wrapped, also inside a longer base64 text such as a Basic credential, where
  at most the one or two base64 characters shared with the text around it are left);
- every token of a known shape, whoever's it is: GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`,
  `github_pat_`), Anthropic (`sk-ant-`), OpenAI (`sk-`, `sk-proj-`), AWS access key ids and
  secret keys named as such, JWTs, Slack, Google API keys, npm tokens, private key blocks, and the
  credential after `Authorization:`/`Bearer` and in `scheme://user:password@` URLs.

Secret values shorter than `MIN_SECRET_LENGTH` characters (whitespace not counted) are skipped:
redacting every `1234` or `true` in a report would destroy it and hide nothing worth hiding. A
value's own whitespace is ignored (`"ab cd"` is matched as `abcd`). Pass leaf values (each token
in a Codex `auth.json`), not whole documents.

Text with no secret and no token shape comes back byte for byte unchanged, and redaction is
idempotent: a marker is never redacted again, so `redact(redact(t)) == redact(t)`.

Speed: each secret's patterns are compiled once per set of secrets (`Redactor`, cached by
`redact_secrets`). Before running a secret's patterns over the text, a cheap check looks for the
tail of the secret in a decoded view of the text (JSON escapes and percent-encoding decoded,
whitespace removed), so text without the secret costs one decode and one substring search per
form, not a regex scan.
"""

from __future__ import annotations

import base64
import bisect
import codecs
import functools
import io
import json
import os
import re
import select
import string
import sys
import threading
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from typing import Generic, TextIO, TypeVar

import attrs

MARKER = "[redacted]"
MIN_SECRET_LENGTH = 8
PARTIAL_MIN = 4
"""The fewest characters of a secret at the end of one write that `HoldBack` holds back, in case
the next write goes on with the rest of it."""

_ASCII_WHITESPACE = {code: None for code in range(128) if chr(code).isspace()}
# Between two characters of a secret: whitespace as is, JSON-escaped or percent-encoded.
_GAP = r"(?:\s|\\[nrt]|%(?:0[9aAdD]|20))*"
_JSON_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f"}
# An escape that starts before a secret can take up to seven of its first characters into the
# decoded view (a `\` before `u0025...`, then the `%` that makes with the next two); the quick
# check looks only past them.
_ANCHOR_SKIP = 8

_WORD = frozenset(string.ascii_letters + string.digits + "_")
_WORD_DASH = _WORD | {"-"}


@attrs.frozen
class _Shape:
    """A token shape. The pattern starts with a literal, so the regex engine can skip ahead to it;
    the check that no token character comes just before is done here, not by a lookbehind, which
    would make the engine try the pattern at every position."""

    pattern: re.Pattern[str]
    not_after: frozenset[str] = frozenset()
    hints: tuple[str, ...] = ()
    """For a pattern whose literal is common letters: one of these must be in the lowercased
    text, or the pattern is not run."""

    def spans(self, text: str, lowered: str) -> Iterator[tuple[int, int]]:
        if self.hints and not any(hint in lowered for hint in self.hints):
            return
        position = 0
        while match := self.pattern.search(text, position):
            start = match.start()
            if start and text[start - 1] in self.not_after:
                position = start + 1
                continue
            yield match.span("secret")
            position = match.end()


_TOKEN_SHAPES = (
    # GitHub: classic, OAuth, user-to-server, server-to-server, refresh; fine-grained.
    _Shape(re.compile(r"(?P<secret>gh[pousr]_[A-Za-z0-9]{16,})"), _WORD),
    _Shape(re.compile(r"(?P<secret>github_pat_[A-Za-z0-9_]{16,})"), _WORD),
    # Anthropic (api and oauth); OpenAI (legacy, project, service account, admin).
    _Shape(re.compile(r"(?P<secret>sk-ant-[A-Za-z0-9_-]{16,})"), _WORD_DASH),
    _Shape(re.compile(r"(?P<secret>sk-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{16,})"), _WORD_DASH),
    # AWS: access key ids by shape, secret keys only where named.
    _Shape(re.compile(r"(?P<secret>A(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16})(?![A-Z0-9])"), _WORD),
    _Shape(
        re.compile(
            r"(?:aws_secret_access_key|AWS_SECRET_ACCESS_KEY|SecretAccessKey|secretAccessKey"
            r"|secret_access_key)[\"']?\s*[:=]\s*[\"']?(?P<secret>[A-Za-z0-9/+=]{20,})"
        ),
        hints=("secret_access_key", "secretaccesskey"),
    ),
    # JWTs: a JSON header and payload, base64url.
    _Shape(
        re.compile(r"(?P<secret>eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*)"),
        _WORD_DASH,
    ),
    # Slack, Google API keys, npm.
    _Shape(re.compile(r"(?P<secret>xox[abposr]-[A-Za-z0-9-]{10,})"), _WORD_DASH),
    _Shape(re.compile(r"(?P<secret>AIza[A-Za-z0-9_-]{35})"), _WORD_DASH),
    _Shape(re.compile(r"(?P<secret>npm_[A-Za-z0-9]{36})"), _WORD),
    # Private keys: the body between the armour lines.
    _Shape(
        re.compile(
            r"-----BEGIN[A-Z0-9 ]{0,30} PRIVATE KEY-----(?P<secret>(?s:.+?))"
            r"-----END[A-Z0-9 ]{0,30} PRIVATE KEY-----"
        )
    ),
    # Credentials by position: headers, bearer tokens, passwords in URLs.
    _Shape(
        re.compile(
            r"(?:Authorization|authorization|AUTHORIZATION)[\"']?\s*[:=]\s*[\"']?"
            r"(?i:bearer|basic|token|bot)\s+(?P<secret>[A-Za-z0-9._~+/=-]+)"
        ),
        hints=("authorization",),
    ),
    _Shape(
        re.compile(
            r"(?:Bearer|bearer|BEARER)\s+"
            r"(?P<secret>(?=[A-Za-z0-9._~+/-]*[0-9])[A-Za-z0-9._~+/-]{16,}=*)"
        ),
        _WORD,
        hints=("bearer",),
    ),
    _Shape(re.compile(r"://[^/\s:@\[\]?#]*:(?P<secret>[^/\s@\[\]?#]+)@")),
    _Shape(re.compile(r"x-access-token:(?P<secret>[^/\s:@\[\]?#]+)@")),
)

_JSON_ESCAPE = re.compile(
    r"\\(?:u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})"
    r"|u([0-9a-fA-F]{4})|([\"\\/bfnrt]))"
)
# An escape the next write may finish (`\\`, `\\u00`, `%`, `%0`).
_UNFINISHED_ESCAPE = re.compile(r"(?:\\(?:u[0-9a-fA-F]{0,3})?|%[0-9a-fA-F]?)\Z")
_JSON_SHORT_DECODED = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


@attrs.frozen
class _Form:
    """One way a secret may be written: its pattern, and the text that must appear in the decoded
    view for the pattern to have a chance (empty: always scan). The pattern is compiled the first
    time the anchor is seen: most forms of most secrets never are."""

    source: str
    anchor: str


class Redactor:
    """Redacts one set of secrets; build once, call on each progress line and on the report."""

    def __init__(self, secrets: Iterable[str]) -> None:
        values = sorted({_without_whitespace(secret) for secret in secrets})
        values = [value for value in values if len(value) >= MIN_SECRET_LENGTH]
        forms: dict[str, _Form] = {}
        for value in values:
            for form in _forms_of(value):
                forms.setdefault(form.source, form)
        self._forms = tuple(forms.values())
        self._values = tuple(values)
        self._learning = threading.Lock()

    def __call__(self, text: str) -> str:
        # A marker a pass inserts can make a new match: a secret with a bracket across it, or
        # a token shape whose word boundary the marker supplies (`[redacted]Bearer ...`). So
        # redact again until nothing changes (see `_replace` for why that ends).
        while True:
            redacted = self._once(text)
            if redacted == text:
                return redacted
            text = redacted

    def _once(self, text: str) -> str:
        spans = self.spans(text)
        return _replace(text, spans) if spans else text

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where `text` holds a secret or a token (overlapping spans, unmerged)."""
        spans: list[tuple[int, int]] = []
        decoded: str | None = None
        for form in self._forms:
            if form.anchor:
                if decoded is None:
                    decoded = _decoded_view(text)
                if form.anchor not in decoded:
                    continue
            spans.extend(match.span() for match in _compiled(form.source).finditer(text))
        lowered = text.lower()
        for shape in _TOKEN_SHAPES:
            spans.extend(shape.spans(text, lowered))
        return spans

    def between(self, before: str, text: str, after: str = "") -> str:
        """`text`, written right after `before` and right before `after` (both as written,
        unredacted), redacted: also a secret that runs into it from either side."""
        whole = before + text + after
        start_of, end_of = len(before), len(before) + len(text)
        head = tail = 0
        if before or after:
            for start, end in self.spans(whole):
                if start < start_of < end:
                    head = max(head, min(end, end_of) - start_of)
                if start < end_of < end:
                    tail = max(tail, end_of - max(start, start_of))
        if head + tail >= len(text):
            return MARKER if text else text
        body = self(text[head : len(text) - tail])
        return (MARKER if head else "") + body + (MARKER if tail else "")

    def partial_tail(self, text: str) -> int:
        """How many characters at the end of `text` begin a secret value (at least
        `PARTIAL_MIN` of them, fewer than all), whitespace and escapes between them or after
        them not counted: what the next write may go on with."""
        longest = 0
        values = self._values
        text = (
            _decoded_view(_UNFINISHED_ESCAPE.sub("", text[-4 * self.longest :])) if values else ""
        )
        for value in values:
            for size in range(min(len(value) - 1, len(text)), PARTIAL_MIN - 1, -1):
                if size <= longest:
                    break
                if text.endswith(value[:size]):
                    longest = size
                    break
        return longest

    def learn(self, secrets: Iterable[str]) -> bool:
        """Redact these values too from now on (a token the login rotated after the secrets
        file was read); True if any was new. Safe beside threads that redact meanwhile."""
        offered = {_without_whitespace(secret) for secret in secrets}
        offered = {value for value in offered if len(value) >= MIN_SECRET_LENGTH}
        with self._learning:
            known = set(self._values)
            new = offered - known
            if not new:
                return False
            forms = {form.source: form for form in self._forms}
            for value in sorted(new):
                for form in _forms_of(value):
                    forms.setdefault(form.source, form)
            self._forms = tuple(forms.values())
            self._values = tuple(sorted(known | new))
        return True

    @property
    def longest(self) -> int:
        """The longest secret value: how much of the text before a write may matter."""
        return max((len(value) for value in self._values), default=0)


Piece = TypeVar("Piece")

HOLD_S = 1.0
"""How long a piece that may begin a secret is held back when nothing follows it."""

_HELD_MOST = 64


class HoldBack(Generic[Piece]):
    """Pieces written one after another (progress lines, a program's output) redacted so that a
    secret split across them is found: each is redacted with the text before it and, where its
    end (with what came before) begins a secret value, held back until the next piece shows
    whether it goes on with the secret. So text that holds no secret comes out as written, only
    later, and a secret split across pieces that come together never comes out at all."""

    def __init__(self, redactor: Redactor, context: int = 256) -> None:
        self._redactor = redactor
        self._context = context
        self._before = ""
        """The end of the pieces let out so far, as written."""
        self._held: list[tuple[Piece, str]] = []

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def push(self, piece: Piece, text: str) -> list[tuple[Piece, str]]:
        """The pieces to write now, each with its text redacted, in order: those held before
        and this one, or none while this one may go on into the next."""
        self._held.append((piece, text))
        joined = self._before + "".join(held for _, held in self._held)
        if len(self._held) < _HELD_MOST and self._redactor.partial_tail(joined):
            return []
        return self.release()

    def release(self) -> list[tuple[Piece, str]]:
        """Everything held, as it stands with nothing after it (the writer gave up waiting)."""
        held, self._held = self._held, []
        out: list[tuple[Piece, str]] = []
        keep = max(self._context, 2 * self._redactor.longest)
        for index, (piece, text) in enumerate(held):
            after = "".join(later for _, later in held[index + 1 :])
            out.append((piece, self._redactor.between(self._before, text, after)))
            self._before = (self._before + text)[-keep:]
        return out


class RedactingWriter(io.TextIOBase):
    """A text stream that writes whole lines to `stream`, each redacted with the lines before
    it (`HoldBack`): the run program's own output is what a launcher keeps of a clone that
    failed, and serve copies it into the record."""

    def __init__(self, stream: TextIO, redactor: Redactor) -> None:
        self._stream = stream
        self._pieces: HoldBack[None] = HoldBack(redactor)
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending or len(self._pending) > _PENDING_MAX:
            cut = self._pending.rfind("\n") + 1 or len(self._pending)
            self._emit(self._pieces.push(None, self._pending[:cut]))
            self._pending = self._pending[cut:]
        return len(text)

    def flush(self) -> None:
        """Write what is pending, but what may begin a secret (see `release`)."""
        if self._pending:
            self._emit(self._pieces.push(None, self._pending))
            self._pending = ""
        self._stream.flush()

    def release(self) -> None:
        """Write everything, what was held back too: nothing more is coming soon."""
        self.flush()
        self._emit(self._pieces.release())
        self._stream.flush()

    def _emit(self, pieces: list[tuple[None, str]]) -> None:
        for _, text in pieces:
            self._stream.write(text)

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def pending(self) -> bool:
        """Part of a line is held back, for the rest of it."""
        return bool(self._pending)

    @property
    def holding(self) -> bool:
        """Text that may begin a secret is held back, for what comes next."""
        return self._pieces.holding


class RedactedDescriptors:
    """Descriptors 1 and 2 of this process, and so of every process it starts from now on (git,
    a review's checks, anything the engine leaves writing to them), lead into pipes; a thread
    per pipe writes what comes, redacted, to where they led before. Only this process holds
    those: nothing a child writes reaches the launcher's log unredacted."""

    def __init__(self, redactor: Redactor) -> None:
        self._threads: list[threading.Thread] = []
        self._writers: list[RedactingWriter] = []
        for target in (1, 2):
            (sys.stdout if target == 1 else sys.stderr).flush()
            original = os.dup(target)  # not inherited: no child gets the way around
            read_end, write_end = os.pipe()
            os.dup2(write_end, target)
            os.close(write_end)
            stream = open(original, "w", encoding="utf-8", errors="replace", buffering=1)  # noqa: SIM115
            writer = RedactingWriter(stream, redactor)
            thread = threading.Thread(
                target=_copy, args=(read_end, writer), name=f"redact-fd{target}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
            self._writers.append(writer)

    def close(self, timeout_s: float = 2.0) -> None:
        """Flush what this process wrote, let go of the pipes, and wait (a while) for what
        children still write to come through."""
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        null = os.open(os.devnull, os.O_WRONLY)
        for target in (1, 2):
            os.dup2(null, target)
        os.close(null)
        for thread in self._threads:
            thread.join(timeout_s)


def _copy(source: int, writer: RedactingWriter) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    with open(source, "rb", buffering=0) as pipe:
        while True:
            if writer.holding and not select.select([pipe], [], [], HOLD_S)[0]:
                writer.release()  # nothing went on with it
                continue
            chunk = pipe.read(65536)
            if not chunk:
                break
            writer.write(decoder.decode(chunk))
            if not writer.pending:
                writer.flush()
    writer.write(decoder.decode(b"", final=True))
    writer.release()


_PENDING_MAX = 64 * 1024


def redact_tokens(text: str) -> str:
    """`text` with every token of a known shape redacted: all a process that never reads the
    secrets file (serve, the CLI) can do with a clone's text."""
    return _redactor(frozenset())(text)


def login_values(value: str) -> list[str]:
    """A secret and, if it is a JSON document (a pasted login such as a Codex `auth.json`),
    every string inside it: each must be recognised alone, not only the whole blob."""
    found = [value]
    try:
        document = json.loads(value)
    except (ValueError, RecursionError):
        return found
    stack = [document]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def redact_secrets(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret value and every token of a known shape replaced by `MARKER`."""
    return _redactor(frozenset(secrets))(text)


@functools.lru_cache(maxsize=8)
def _redactor(secrets: frozenset[str]) -> Redactor:
    return Redactor(secrets)


@functools.lru_cache(maxsize=1024)
def _compiled(source: str) -> re.Pattern[str]:
    return re.compile(source)


def _forms_of(value: str) -> list[_Form]:
    plain_anchor = "" if "%" in value or "\\" in value else value[_ANCHOR_SKIP:]
    forms = [_Form(_written(value), plain_anchor)]
    encoded = value.encode("utf-8", "surrogatepass")
    for offset in range(3):
        whole = base64.b64encode(b"\0" * offset + encoded).decode("ascii")
        start = -(-8 * offset // 6)
        end = 8 * (offset + len(encoded)) // 6
        middle = whole[start:end]
        for alphabet in (None, str.maketrans("+/", "-_")):
            fragment = middle.translate(alphabet) if alphabet else middle
            pattern = _written(fragment)
            if offset == 0 and end < len(whole):
                # The last character and the padding belong to the secret only when the encoding
                # ends with it.
                tail = whole[end:].rstrip("=")
                padding = whole[len(tail) + end :]
                pattern += f"(?:{_GAP}{_written(tail)}(?:{_GAP}{_written(padding)})?)?"
            forms.append(_Form(pattern, fragment[_ANCHOR_SKIP:]))
    return forms


def _written(chars: str) -> str:
    """A pattern for `chars` in any of the forms the module docstring lists."""
    return _GAP.join(_character(char) for char in chars)


@functools.cache
def _character(char: str) -> str:
    forms = [re.escape(char)]
    forms.append("".join("%" + _hex(byte, 2) for byte in char.encode("utf-8", "surrogatepass")))
    code = ord(char)
    if code > 0xFFFF:
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        forms.append(rf"\\u{_hex(high, 4)}\\u{_hex(low, 4)}")
    else:
        forms.append(rf"\\u{_hex(code, 4)}")
    if char in _JSON_SHORT_ESCAPES:
        forms.append(re.escape(_JSON_SHORT_ESCAPES[char]))
    return "(?:" + "|".join(forms) + ")"


def _hex(number: int, width: int) -> str:
    return "".join(
        f"[{digit}{digit.upper()}]" if digit.isalpha() else digit for digit in f"{number:0{width}x}"
    )


def _decoded_view(text: str) -> str:
    """The text with JSON escapes and percent-encoding decoded and whitespace removed: any secret
    written in a form `_written` matches appears here as itself, but for its first few
    characters."""
    if "\\" in text:
        text = _JSON_ESCAPE.sub(_json_character, text)
    if "%" in text:
        text = urllib.parse.unquote(text, errors="surrogateescape")
    return _without_whitespace(text)


def _without_whitespace(text: str) -> str:
    """What `\\s` matches, removed; `translate` is the fastest way for ASCII text only."""
    return text.translate(_ASCII_WHITESPACE) if text.isascii() else "".join(text.split())


def _json_character(match: re.Match[str]) -> str:
    high, low, single, short = match.groups()
    if high is not None:
        return chr(0x10000 + ((int(high, 16) - 0xD800) << 10) + (int(low, 16) - 0xDC00))
    if single is not None:
        return chr(int(single, 16))
    return _JSON_SHORT_DECODED.get(short, short)


def _replace(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """Replace each run of overlapping or touching spans by one marker.

    A span that overlaps a marker already in the text is widened to cover it, so a marker is
    never cut, and one inside a marker changes nothing. So each change removes at least one
    character that was not part of a marker, which is why redacting again until nothing changes
    must end.
    """
    markers: list[tuple[int, int]] = []
    position = text.find(MARKER)
    while position != -1:
        markers.append((position, position + len(MARKER)))
        position = text.find(MARKER, position + len(MARKER))
    starts = [start for start, _ in markers]

    merged: list[tuple[int, int]] = []
    for span in sorted(spans):
        start, end = span
        before = bisect.bisect_right(starts, start) - 1
        if before >= 0 and markers[before][1] > start:
            start = markers[before][0]
        last = bisect.bisect_left(starts, end) - 1
        if last >= 0 and markers[last][1] > end:
            end = markers[last][1]
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))

    pieces: list[str] = []
    done = 0
    for start, end in merged:
        pieces.append(text[done:start])
        pieces.append(MARKER)
        done = end
    pieces.append(text[done:])
    return "".join(pieces)
