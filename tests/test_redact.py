"""redact_secrets: no secret survives in any form it is written in; text without secrets is left
byte for byte; redacting twice changes nothing."""

from __future__ import annotations

import base64
import json
import re
import string
import subprocess
import sys
import urllib.parse

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from shadowclone.redact import (
    MARKER,
    MIN_SECRET_LENGTH,
    PARTIAL_MIN,
    HoldBack,
    Redactor,
    login_values,
    redact_secrets,
    redact_tokens,
)

WHITESPACE = re.compile(r"\s+")
TOKEN_ALPHABET = string.ascii_letters + string.digits + "-_./+="
# Characters that escapes are made of, and that the marker is made of: the hard cases.
TRICKY_ALPHABET = '0123456789abcdefuABCDEF%\\[]/"redact'
NOT_SPACE = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zs", "Zl", "Zp")).filter(
    lambda char: not char.isspace()
)

SECRETS = st.one_of(
    st.text(TOKEN_ALPHABET, min_size=MIN_SECRET_LENGTH, max_size=48),
    st.text(NOT_SPACE, min_size=MIN_SECRET_LENGTH, max_size=24),
    st.text(TRICKY_ALPHABET, min_size=MIN_SECRET_LENGTH, max_size=16),
)
FILLERS = st.one_of(
    st.text(max_size=24),
    st.text(TRICKY_ALPHABET + " \n\t", max_size=8),
    st.sampled_from(["\\", "%", "\\u", "%2", "\\u00", "[", MARKER, "[redac", "ted]", ":", "@"]),
)
TOKEN_HINTS = re.compile(
    r"gh[pousr]_|github_pat_|sk-|A[KS]IA|ABIA|ACCA|secret_?access_?key|eyJ|xox|AIza|npm_|PRIVATE"
    r"|authorization|bearer|://|x-access-token",
    re.IGNORECASE,
)


# --------------------------------------------------------------------------- the oracle


def strip(text: str) -> str:
    return WHITESPACE.sub("", text)


def json_unescaped(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        escape = match.group(1)
        if escape.startswith("u"):
            return chr(int(escape[1:], 16))
        return {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}.get(escape, escape)

    joined = re.sub(r"\\(u[0-9a-fA-F]{4}|[\"\\/bfnrt])", one, text)
    return joined.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def base64_decodings(text: str) -> list[bytes]:
    """Every run of base64 characters, decoded from each of its first four characters."""
    decoded = []
    for found in re.findall(r"[A-Za-z0-9+/_-]{4,}", strip(text)):
        run = found.translate(str.maketrans("-_", "+/"))
        for offset in range(4):
            part = run[offset:]
            part = part[: len(part) - len(part) % 4]
            decoded.append(base64.b64decode(part))
    return decoded


def views(text: str) -> list[str]:
    """The text as a reader could decode it. Markers are taken out first: a secret that is part
    of the marker (`redacted`) is no leak."""
    text = text.replace(MARKER, "\0")
    return [
        text,
        strip(text),
        strip(urllib.parse.unquote(text, errors="surrogateescape")),
        strip(json_unescaped(text)),
    ]


def leaks(text: str, secret: str) -> bool:
    secret = strip(secret)
    if any(secret in view for view in views(text)):
        return True
    encoded = secret.encode("utf-8")
    return any(encoded in decoded for decoded in base64_decodings(text.replace(MARKER, "\0")))


# --------------------------------------------------------------------------- ways to write a secret


def percent(char: str, upper: bool) -> str:
    quoted = urllib.parse.quote(char, safe="")
    if quoted == char:
        quoted = "".join(f"%{byte:02x}" for byte in char.encode("utf-8"))
    return quoted.upper() if upper else quoted.lower()


@st.composite
def split_up(draw: st.DrawFn, units: list[str]) -> str:
    """Whitespace (also JSON- or percent-escaped) between any of the units."""
    gaps = st.lists(st.sampled_from([" ", "\n", "\r\n", "\t", "\\n", "%0A", "%20", "\n    "]))
    return "".join(
        unit + ("".join(draw(gaps)) if i < len(units) - 1 else "") for i, unit in enumerate(units)
    )


@st.composite
def written(draw: st.DrawFn, secret: str) -> str:
    how = draw(
        st.sampled_from(
            [
                "plain",
                "split",
                "url",
                "url split",
                "json",
                "json ascii",
                "base64",
                "base64 url",
                "base64 wrapped",
                "base64 inside",
                "basic",
            ]
        )
    )
    chars = list(secret)
    if how == "plain":
        return secret
    if how == "split":
        return draw(split_up(chars))
    if how in ("url", "url split"):
        units = [
            percent(char, draw(st.booleans())) if draw(st.booleans()) else char for char in chars
        ]
        return draw(split_up(units)) if how == "url split" else "".join(units)
    if how in ("json", "json ascii"):
        return json.dumps(secret, ensure_ascii=how == "json ascii")[1:-1]
    raw = secret.encode("utf-8")
    if how == "base64":
        return base64.b64encode(raw).decode().rstrip("=" if draw(st.booleans()) else "")
    if how == "base64 url":
        return base64.urlsafe_b64encode(raw).decode()
    if how == "base64 wrapped":
        encoded = base64.b64encode(raw).decode()
        width = draw(st.integers(1, 20))
        return "\n".join(encoded[i : i + width] for i in range(0, len(encoded), width))
    before = draw(st.binary(max_size=7))
    after = draw(st.binary(max_size=7))
    if how == "basic":
        before = b"x-access-token:"
    return base64.b64encode(before + raw + after).decode()


@st.composite
def texts_with_secrets(draw: st.DrawFn) -> tuple[str, list[str], list[str]]:
    secrets = draw(st.lists(SECRETS, min_size=1, max_size=4))
    pieces: list[str] = []
    forms: list[str] = []
    for _ in range(draw(st.integers(1, 6))):
        pieces.append(draw(FILLERS))
        form = draw(written(draw(st.sampled_from(secrets))))
        forms.append(form)
        pieces.append(form)
    pieces.append(draw(FILLERS))
    return "".join(pieces), secrets, forms


# --------------------------------------------------------------------------- properties


@settings(max_examples=300, deadline=None)
@given(texts_with_secrets())
@example(("key=abcd%EFGH1234 done", ["abcd%EFGH1234"], ["abcd%EFGH1234"]))
@example(("\\u00" + "41bcdefghij", ["Abcdefghij"], ["\\u0041bcdefghij"]))
@example(("%" + "4142434445464748", ["4142434445464748"], ["4142434445464748"]))
@example(("\\u" + "0041424344454647", ["0041424344454647"], ["0041424344454647"]))
@example(("\\" + "u002541bcdefghij", ["u002541bcdefghij"], ["u002541bcdefghij"]))
@example(("a]redacted[b", ["]redacted[", "a]redacted"], ["]redacted["]))
def test_no_secret_survives(case: tuple[str, list[str], list[str]]) -> None:
    text, secrets, forms = case
    redacted = redact_secrets(text, secrets)
    for secret in secrets:
        assert not leaks(redacted, secret), (secret, redacted)
    for form in forms:
        assert form not in redacted.replace(MARKER, "\0")


@settings(max_examples=300, deadline=None)
@given(st.text(), st.lists(SECRETS, max_size=4))
@example("the bearer instruments; risk-assessment-2026; https://example.com:8080/a?b=c@d", [])
@example("progress 50% \\n done [redacted] ok", ["progress"])
@example("short: abc1234 and ok", ["abc1234"])
def test_text_without_secrets_is_unchanged(text: str, secrets: list[str]) -> None:
    assume(not TOKEN_HINTS.search(text))
    assume(not any(leaks(text, secret) for secret in secrets))
    assert redact_secrets(text, secrets) == text


@settings(max_examples=150, deadline=None)
@given(texts_with_secrets(), st.lists(st.text(TRICKY_ALPHABET, min_size=8, max_size=12)))
@example(("redacted", ["redacted"], []), [])
@example(("abcdefgh12yzyzyzyz", ["abcdefgh12", "d]yzyzyzyz"], []), [])
@example(("[redacted]]", ["[redacted]", "redacted]]"], []), [])
@example(("x [redacted] y", ["ed] y-and-more"], []), ["]redacted"])
def test_redacting_twice_changes_nothing(
    case: tuple[str, list[str], list[str]], more_secrets: list[str]
) -> None:
    text, secrets, _ = case
    secrets = secrets + more_secrets
    once = redact_secrets(text, secrets)
    assert redact_secrets(once, secrets) == once


# --------------------------------------------------------------------------- examples

GITHUB_CLASSIC = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
TOKENS = [
    GITHUB_CLASSIC,
    "gho_16C7e42F292c6912E7710c838347Ae178B4a",
    "ghs_" + "x" * 36,
    "github_pat_11ABCDEFG0aBcDeFgHiJkLmN_OpQrStUvWxYz0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456",
    "sk-ant-api03-" + "aB3_" * 20 + "AA",
    "sk-ant-oat01-" + "Zz9-" * 20,
    "sk-proj-" + "Ab1" * 30,
    "sk-" + "abcdefghij0123456789ABCDEFGHIJ0123456789abcdefgh",
    "AKIAIOSFODNN7EXAMPLE",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "AIzaSyA-" + "b" * 31,
    "npm_" + "a1B2" * 9,
]


@pytest.mark.parametrize("token", TOKENS)
@pytest.mark.parametrize(
    "around", ["{}", "token: {}\n", '{{"key": "{}"}}', "export X={};", "({})", "'{}'"]
)
def test_a_token_of_a_known_shape_is_redacted_without_being_given(token: str, around: str) -> None:
    text = around.format(token)
    assert redact_secrets(text, []) == around.format(MARKER)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc.DEF-123", f"Authorization: Bearer {MARKER}"),
        ("authorization: token abcdef", f"authorization: token {MARKER}"),
        ('"Authorization": "Basic dXNlcjpwYXNz"', f'"Authorization": "Basic {MARKER}"'),
        ("curl -H 'Bearer 0123456789abcdefXYZ'", f"curl -H 'Bearer {MARKER}'"),
        (
            "git clone https://x-access-token:s3cr3t@github.com/o/r.git",
            f"git clone https://x-access-token:{MARKER}@github.com/o/r.git",
        ),
        ("remote: x-access-token:abc123@host", f"remote: x-access-token:{MARKER}@host"),
        ("postgres://app:hunter2@db:5432/x", f"postgres://app:{MARKER}@db:5432/x"),
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            f"aws_secret_access_key = {MARKER}",
        ),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n"
            "-----END OPENSSH PRIVATE KEY-----",
            f"-----BEGIN OPENSSH PRIVATE KEY-----{MARKER}-----END OPENSSH PRIVATE KEY-----",
        ),
    ],
)
def test_credentials_by_position(text: str, expected: str) -> None:
    assert redact_secrets(text, []) == expected


@pytest.mark.parametrize(
    "text",
    [
        "the bearer of bad news; Bearer tokens are explained below",
        "risk-assessment-and-mitigation-plan-2026",
        "task-0123456789abcdefghij",
        "see https://example.com:8443/path?q=a@b and http://localhost:8080/",
        "ghp_short and sk-short and AKIA1234",
        "AKIAIOSFODNN7EXAMPLEX is too long for an access key id",
        "Authorization: Bearer [redacted]",
        "eyJ alone, eyJhbGci.notajwt",
    ],
)
def test_text_that_only_looks_like_a_token_is_kept(text: str) -> None:
    assert redact_secrets(text, []) == text


def test_every_form_of_a_given_secret() -> None:
    secret = "Zq8/x+Lm%Tk3é"
    quoted = urllib.parse.quote(secret, safe="")
    cases = [
        f"value {secret} end",
        f"value {secret[:4]}\n  {secret[4:]} end",
        f"value {quoted} end",
        "value " + re.sub("%..", lambda escape: escape.group().lower(), quoted) + " end",
        "value " + json.dumps(secret) + " end",
        "value " + json.dumps(secret, ensure_ascii=False) + " end",
        "value " + base64.b64encode(secret.encode()).decode() + " end",
        "value " + base64.urlsafe_b64encode(secret.encode()).decode().rstrip("=") + " end",
    ]
    for text in cases:
        redacted = redact_secrets(text, [secret])
        assert redacted.startswith("value ") and redacted.endswith(" end"), redacted
        assert MARKER in redacted
        assert not leaks(redacted, secret), redacted


def test_a_short_secret_is_not_redacted() -> None:
    text = "port 5432, user admin"
    assert redact_secrets(text, ["5432", "admin", "", "   "]) == text
    assert redact_secrets("abcdefgh", ["abcd efgh"]) == MARKER


def test_overlapping_secrets_are_both_gone() -> None:
    first, second = "abcdefgh12", "gh12345678xyz"
    text = "x abcdefgh12345678xyz y"
    assert redact_secrets(text, [first, second]) == f"x {MARKER} y"


def test_a_redactor_is_reused_and_takes_any_iterable() -> None:
    redactor = Redactor(secret for secret in ["first-secret", "second-secret"])
    assert redactor("a first-secret b second-secret c") == f"a {MARKER} b {MARKER} c"
    assert redactor("nothing to see") == "nothing to see"


def test_a_long_text_with_many_secrets() -> None:
    """Many secrets, a long text: every one found, nothing else touched (bench/ measures speed)."""
    secrets = [f"tok{i:03d}-" + "q7Z" * 10 for i in range(60)]
    lines = [f'line {i}: nothing here, 50% done \\n {{"k": {i}}}' for i in range(5000)]
    planted = {
        100: secrets[0],
        4000: "".join(percent(char, upper=True) for char in secrets[59]),
        2500: secrets[30][:9] + "\n   " + secrets[30][9:],
        4999: base64.b64encode(secrets[7].encode()).decode(),
    }
    text = "\n".join(line + " " + planted.get(i, "") for i, line in enumerate(lines))
    redacted = redact_secrets(text, secrets)
    expected = "\n".join(
        line + " " + (MARKER if i in planted else "") for i, line in enumerate(lines)
    )
    assert redacted == expected


SECRET_CHARS = string.ascii_letters + string.digits + "-_"


def push_all(redactor: Redactor, pieces: list[str], releases: set[int]) -> list[str]:
    """The pieces through a `HoldBack`, released (as a writer that gave up waiting does) after
    the pieces whose index is in `releases`, and at the end; their texts, in the order out."""
    held: HoldBack[int] = HoldBack(redactor)
    out: list[tuple[int, str]] = []
    for index, piece in enumerate(pieces):
        out.extend(held.push(index, piece))
        if index in releases:
            out.extend(held.release())
    out.extend(held.release())
    assert [index for index, _ in out] == list(range(len(pieces)))  # each once, in order
    return [text for _, text in out]


def cut(text: str, points: list[int]) -> list[str]:
    marks = sorted({min(point, len(text)) for point in points})
    return [text[a:b] for a, b in zip([0, *marks], [*marks, len(text)], strict=True)]


@settings(max_examples=300, deadline=None)
@given(
    secret=st.text(SECRET_CHARS, min_size=MIN_SECRET_LENGTH, max_size=60),
    before=st.text(" .,;:!?()éü\n", max_size=30),
    after=st.text(" .,;:!?()éü\n", max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=4),
    gap=st.sampled_from(("", "\n", " ", "\\n")),
)
def test_a_secret_split_across_writes_never_comes_out(
    secret: str, before: str, after: str, cuts: list[int], gap: str
) -> None:
    """Written in pieces one after another (progress lines, or writes of the engine), the pieces
    as written, joined, hold no secret and at most `PARTIAL_MIN - 1` of its first characters
    (the text around it shares no character with it, so what is left came from it)."""
    text = before + secret[: len(secret) // 2] + gap + secret[len(secret) // 2 :] + after
    pieces = cut(text, [*cuts, len(before) + len(secret) // 2])
    written = push_all(Redactor([secret]), pieces, set())
    joined = "".join(written)
    assert secret not in re.sub(r"\s|\\n", "", joined)
    for size in range(PARTIAL_MIN, len(secret) + 1):
        assert secret[:size] not in "".join(w.replace(MARKER, "\0") for w in written)


@settings(max_examples=200, deadline=None)
@given(texts_with_secrets(), st.lists(st.integers(0, 400), max_size=6), st.data())
def test_a_secret_in_any_form_split_anywhere_never_comes_out_whole(
    case: tuple[str, list[str], list[str]], cuts: list[int], data: st.DataObject
) -> None:
    """Every form the redactor knows, cut anywhere, and the held pieces let go at any moment
    (a writer that waited long enough): the pieces as written, joined, never hold the secret."""
    text, secrets, _ = case
    pieces = cut(text, cuts)
    releases = data.draw(st.sets(st.integers(0, max(0, len(pieces) - 1))))
    joined = "".join(push_all(Redactor(secrets), pieces, releases))
    for secret in secrets:
        assert not leaks(joined, secret), (secret, pieces, joined)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(max_size=30), max_size=8),
    st.lists(SECRETS, max_size=3),
    st.sets(st.integers(0, 8)),
)
@example(["Bash"], ["Bashful99"], set())
@example(["The", " end"], ["Therapy-2026"], set())
@example(["npm test", "\n", "ok"], ["testing-password"], set())
def test_pieces_that_hold_no_secret_come_out_as_written(
    pieces: list[str], secrets: list[str], releases: set[int]
) -> None:
    """Text that only begins a secret (a tool named `Bash` where a secret is `Bashful99`) is
    held back at most until what follows shows it is no secret, and then comes out unchanged."""
    joined = "".join(pieces)
    assume(not TOKEN_HINTS.search(joined) and MARKER not in joined)
    assume(not any(leaks(joined, secret) for secret in secrets))
    assert push_all(Redactor(secrets), pieces, releases) == pieces


def test_only_what_may_begin_a_secret_is_held_back() -> None:
    redactor = Redactor(["s3cr3t-value-123"])
    held: HoldBack[str] = HoldBack(redactor)
    assert held.push("a", "hello ") == [("a", "hello ")]
    assert held.push("b", "a line ending in s3c") == [("b", "a line ending in s3c")]
    assert held.push("c", "a line ending in s3cr") == []  # four characters of it: held
    assert held.holding
    assert held.push("d", "3t-va") == []
    assert held.push("e", "lue-123 then more") == [
        ("c", "a line ending in " + MARKER),
        ("d", MARKER),
        ("e", MARKER + " then more"),
    ]
    assert held.push("f", "s3cr") == [] and held.release() == [("f", "s3cr")]


def test_a_learned_value_is_redacted_from_then_on() -> None:
    redactor = Redactor(["first-secret-1"])
    assert redactor("rotated-token-2") == "rotated-token-2"
    assert redactor.learn(["rotated-token-2", "short"])
    assert not redactor.learn(["rotated-token-2"])
    assert redactor("a rotated-token-2 and first-secret-1") == f"a {MARKER} and {MARKER}"
    assert redactor.partial_tail("rota") == 4


def test_every_string_inside_a_json_login_is_a_secret_alone() -> None:
    auth = json.dumps(
        {"tokens": {"refresh_token": "rt-0123456789abcdefghij", "id_token": "plain-idtoken-1234"}}
    )
    redactor = Redactor(login_values(auth))
    said = "refresh with rt-0123456789abcdefghij and plain-idtoken-1234 and the whole " + auth
    redacted = redactor(said)
    assert "rt-0123456789abcdefghij" not in redacted and "plain-idtoken-1234" not in redacted
    assert login_values("not json") == ["not json"]


@given(st.text(max_size=40))
def test_tokens_alone_are_what_a_host_process_redacts(around: str) -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    assert token not in redact_tokens(around + " " + token + " " + around)
    assume(MARKER not in around)
    assert redact_tokens(around) == redact_secrets(around, [])


CHILD = """
import shlex, subprocess, sys
from shadowclone.redact import RedactedDescriptors, Redactor
secret, pieces = sys.argv[1], sys.argv[2:]
descriptors = RedactedDescriptors(Redactor([secret]))
print("the run program's own line:", secret)
sys.stderr.write(" ".join(["logged", secret]) + "\\n")
# A child writes the secret to the inherited stderr in pieces, one write each, with pauses.
script = "; ".join(f"printf '%s' {shlex.quote(piece)} >&2; sleep 0.01" for piece in pieces)
subprocess.run(["sh", "-c", script + "; echo >&2; echo done >&2"], check=True)
whole = f"printf '%s\\\\n' {shlex.quote(secret)}"
subprocess.run(["sh", "-c", f"{whole}; {whole} >&2"], check=True)
descriptors.close()
"""


@settings(max_examples=25, deadline=None)
@given(secret=SECRETS, cut=st.integers(1, 3))
def test_what_children_write_to_the_run_programs_descriptors_is_redacted(
    secret: str, cut: int
) -> None:
    """Every process the run program starts inherits its stdout and stderr, which lead through
    the redactor: the secret, written whole or in pieces by another program, never reaches the
    real descriptors whole (each piece written alone is at most a few characters of it)."""
    assume(secret.isprintable())

    size = max(1, len(secret) // cut)
    pieces = [secret[i : i + size] for i in range(0, len(secret), size)]
    done = subprocess.run(
        [sys.executable, "-c", CHILD, secret, *pieces],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for stream in (done.stdout, done.stderr):
        seen = stream.replace(MARKER, "\0")  # a secret may look like part of the marker
        assert secret not in seen
        assert secret not in seen.replace("\n", "")
    assert "the run program's own line: [redacted]" in done.stdout
    assert done.stdout.count(MARKER) >= 2 and "done" in done.stderr


def test_a_marker_that_gives_a_token_its_boundary_is_redacted_at_once() -> None:
    """Found by hypothesis: the secret before `Bearer` hid the token's word boundary until the
    secret became a marker; one call redacts both, and a second changes nothing."""
    text = "00000000Bearer eC1hY2Nlc3MtdG9rZW46MDAwMDAwMDA="
    redact = Redactor(["00000000"])
    once = redact(text)
    assert "eC1hY2Nlc3M" not in once
    assert redact(once) == once
