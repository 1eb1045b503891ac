"""A run folder sent over the network: which of its files travel which way, and how.

When a clone runs on another machine with no folder shared with the owner's (a swarm worker),
its run folder lives there and serve keeps its own copy; `relay/server.py` answers, and
`run/relay.py` in the clone asks. Each file has one writer, so each travels one way only:

- up, what the clone writes: the progress lines by byte offset (a resend of bytes serve has is
  harmless, a gap is refused with serve's size; the lines serve writes of a clone's preparation
  come before its first launch, which takes them over), the documents serve reads whole, and
  folders as tars;
- down, what the owner's side writes: the inbox and the deliveries by offset, the request and
  the markers as documents, an earlier clone's session as a tar.

Every request carries the clone's credential, an HMAC of its id under a key only serve's
machine holds, so one clone's relay cannot read or write another's folder.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import hmac
import io
import secrets
import shutil
import tarfile
from pathlib import Path

import attrs

from shadowclone import contract, files
from shadowclone.node.checks import ENVIRONMENT_FOLDER


class Way(enum.Enum):
    UP = "up"
    """Written by the clone; serve's copy follows it."""
    DOWN = "down"
    """Written on the owner's side; the clone's copy follows it."""


class Form(enum.Enum):
    LINES = "lines"
    """Appended to only, whole lines: sent by byte offset."""
    DOCUMENT = "document"
    """Written whole (atomically) or removed: sent whole, or its removal."""
    TREE = "tree"
    """A folder written whole before the progress says so: sent whole (a tar), or its
    removal; its files only (no links), each as it is."""


@attrs.frozen
class Sent:
    name: str
    way: Way
    form: Form


SENT = (
    # before the progress, whose lines may say they are there
    Sent(ENVIRONMENT_FOLDER, Way.UP, Form.TREE),
    Sent("session", Way.UP, Form.TREE),
    Sent(contract.HANDOFF_FILE, Way.UP, Form.DOCUMENT),
    Sent("carry.json", Way.UP, Form.DOCUMENT),
    Sent("progress.jsonl", Way.UP, Form.LINES),
    Sent("inbox.jsonl", Way.DOWN, Form.LINES),
    Sent("deliveries.jsonl", Way.DOWN, Form.LINES),
    Sent(contract.REQUEST_FILE, Way.DOWN, Form.DOCUMENT),
    Sent("stop.json", Way.DOWN, Form.DOCUMENT),
    Sent("resume.json", Way.DOWN, Form.DOCUMENT),
    Sent("session-given", Way.DOWN, Form.TREE),
)
BY_NAME = {sent.name: sent for sent in SENT}
PROGRESS = "progress.jsonl"

PREFIX = "/v1/clones"
"""Each file at `PREFIX/<clone id>/<name>`; a lines file takes `?offset=N`. `PREFIX/<clone id>`
itself answers what the owner's side holds of each file that goes down (`held`), so that a
relay asks for a file only when it changed: one request a round while nothing does."""
CLOSE = "close"
"""`POST PREFIX/<clone id>/close` with `{"taken": [ids], "force": bool}`: close the inbox, which
serve decides under its inbox lock (200), or the ids of messages still to be taken (409)."""
SIZE_HEADER = "x-shadowclone-size"
"""On every answer about a lines file: the size of the answering side's copy."""
DIGEST_HEADER = "x-shadowclone-digest"
"""On the answer to an empty send of lines: the SHA-256 of the copy's bytes, so a relay that
begins again checks that serve's copy is the start of its own."""
DIFFERS_HEADER = "x-shadowclone-differs"
"""On a refused send: the bytes sent differ from those held (no resend can mend that)."""
MAX_BODY_BYTES = files.MAX_DOCUMENT_BYTES
"""The most one request carries; a longer run of lines goes in several."""
MAX_TREE_BYTES = 256 * 1024 * 1024
"""The largest folder sent (a tar of it): an engine's kept session can be large."""
CHECKS_FOLDER = "setup-checks"
"""Where `shadowclone setup` keeps its check clones' run folders, in the clones folder."""
KEY_FILE = "relay.key"
"""serve's key, in the clones folder, private to the owner (mode 0600)."""


def path_of(clone_id: str, name: str) -> str:
    return f"{PREFIX}/{clone_id}/{name}"


def held_path(clone_id: str) -> str:
    return f"{PREFIX}/{clone_id}"


def credential(key: bytes, clone_id: str) -> str:
    """The clone's credential: what its relay presents, and all serve needs to check it."""
    return hmac.new(key, clone_id.encode(), hashlib.sha256).hexdigest()


def accepts(key: bytes, clone_id: str, presented: str) -> bool:
    return hmac.compare_digest(credential(key, clone_id), presented)


def load_key(clones_dir: Path) -> bytes:
    """serve's key, made on first use; only the owner's account can read it."""
    path = clones_dir / KEY_FILE
    try:
        return files.read_bounded(path, 1024, plain_folder=False)
    except FileNotFoundError:
        pass
    with files.FileLock(path.with_name(KEY_FILE + ".lock"), mode=0o600):
        try:
            return files.read_bounded(path, 1024, plain_folder=False)
        except FileNotFoundError:
            key = secrets.token_bytes(32)
            files.write_atomic(path, key, mode=0o600)
            return key


def whole_lines(data: bytes) -> bytes:
    """`data` up to its last newline, so that only whole lines travel; but all of it when it
    fills a request and holds no newline (a line longer than a request goes in pieces, and a
    reader skips such a line anyway)."""
    if len(data) >= MAX_BODY_BYTES and b"\n" not in data:
        return data
    return data[: data.rfind(b"\n") + 1]


def digest_of(path: Path, size: int) -> str:
    """The SHA-256 of a file's first `size` bytes (of none, for a file not there)."""
    digest = hashlib.sha256()
    with contextlib.suppress(FileNotFoundError), path.open("rb") as held:
        while size > 0 and (chunk := held.read(min(size, 1 << 20))):
            digest.update(chunk)
            size -= len(chunk)
    return digest.hexdigest()


Held = dict[str, int | str | None]
"""Of each file that goes down: a lines file's size; a document's or a folder's tag, or None
when it is not there."""


def tag_of(data: bytes) -> str:
    """A document's tag (an HTTP entity tag): what its answers carry and `held` names."""
    return '"' + hashlib.sha256(data).hexdigest() + '"'


def tree_tag(folder: Path) -> str | None:
    """A folder's tag, from its files' names, sizes and times (packing it to hash it would
    cost a tar a round); None when there is no folder (or a link in its place)."""
    mark = None if folder.is_symlink() else signature(folder)
    return None if mark is None else f'"{mark}"'


def signature(folder: Path) -> str | None:
    """What changes when a file of `folder` does (its names, sizes and times); None if there
    is no folder."""
    if not folder.is_dir():
        return None
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            known = path.stat()
            line = f"{path.relative_to(folder)}\0{known.st_size}\0{known.st_mtime_ns}\n"
            digest.update(line.encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def pack(folder: Path) -> bytes:
    """A tar of `folder`'s folders and plain files (links are left out)."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(folder.rglob("*")):
            if path.is_symlink() or not (path.is_file() or path.is_dir()):
                continue
            tar.add(path, arcname=str(path.relative_to(folder)), recursive=False)
            if data.tell() > MAX_TREE_BYTES:
                raise ValueError(f"{folder}: more than {MAX_TREE_BYTES} bytes to send")
    return data.getvalue()


def unpack(data: bytes, into: Path) -> None:
    """Put the folder `pack` made at `into`, in place of what was there: unpacked beside it,
    then renamed over it. Only folders and plain files inside it are taken (the tar module's
    `data` filter: no links, devices, absolute paths or `..`)."""
    temp = into.with_name(f".{into.name}.{secrets.token_hex(6)}.tmp")
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
            tar.extractall(temp, members=members, filter="data")
        temp.mkdir(exist_ok=True)
        old = into.with_name(f".{into.name}.{secrets.token_hex(6)}.old")
        if into.is_dir() and not into.is_symlink():
            into.rename(old)
        elif into.exists() or into.is_symlink():
            into.unlink()
        temp.rename(into)
        shutil.rmtree(old, ignore_errors=True)
    except (tarfile.TarError, OSError) as error:
        shutil.rmtree(temp, ignore_errors=True)
        raise ValueError(f"{into}: the folder sent cannot be put in place: {error}") from None
