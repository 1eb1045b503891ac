"""Hostile files for fuzz tests: the files of a clone's run folder (and the home's own
files) that others write, each made odd in one of the ways a hostile or broken writer can.

A *kind* names a file relative to a home; an *oddity* turns that file into something a reader
must refuse (a link, a loop, a folder, a FIFO, bytes that are not what the schema says). Each
oddity that points outside the home points into `outside`, whose contents the tests check are
never read into a view nor written to.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import strategies as st
from shadowclone import files
from shadowclone.cli import main
from shadowclone.config import HOME_VARIABLE, Paths, default_paths
from shadowclone.node import schemas
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.setups import setup_file
from shadowclone.plugin.types import NetworkMode

SENTINEL = "outside-the-home-4b1d"
"""Written in every file outside the home a link points to: a view showing it read through."""

RUN_FOLDER_KINDS = (
    "request.json",
    "record.json",
    "progress.jsonl",
    "inbox.jsonl",
    "deliveries.jsonl",
    "stop.json",
    "handoff.json",
    "progress.jsonl.lock",
    "inbox.jsonl.lock",
    "deliveries.jsonl.lock",
)
HOME_KINDS = ("<run folder>", "<active marker>", "<setup record>", "index", "start.lock")
KINDS = RUN_FOLDER_KINDS + HOME_KINDS

EDGE_TIMES = ("9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "2026-13-45T99:99:99")


def kind_path(paths: Paths, clone_id: str, kind: str) -> Path:
    folder = paths.clones_dir / clone_id
    if kind == "<run folder>":
        return folder
    if kind == "<active marker>":
        return paths.active_dir / clone_id
    if kind == "<setup record>":
        return setup_file(paths, "acme/app")
    if kind in ("index", "start.lock"):
        return paths.clones_dir / kind
    return folder / kind


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _outside_copy(path: Path, outside: Path) -> Path:
    """A copy of `path` outside the home with the sentinel in it, to link to."""
    target = outside / f"{path.name}.{len(list(outside.iterdir()))}"
    if path.is_dir():
        shutil.copytree(path, target, symlinks=True)
        (target / "sentinel.txt").write_text(SENTINEL)
    else:
        data = path.read_bytes() if path.is_file() else b""
        target.write_bytes(data.replace(b"acme/app", SENTINEL.encode()) or SENTINEL.encode())
    return target


def _time_edge(data: bytes, *, when: str) -> bytes:
    """Every time in a JSON document (or in each line) set to `when`."""

    def change(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: when if k == "at" or k.endswith("_at") else change(v) for k, v in value.items()
            }
        if isinstance(value, list):
            return [change(v) for v in value]
        return value

    lines = [line for line in data.split(b"\n") if line.strip()]
    try:
        changed = [json.dumps(change(json.loads(line))).encode() for line in lines]
    except (ValueError, RecursionError):
        return f'{{"at": "{when}", "requested_at": "{when}"}}\n'.encode()
    return b"\n".join(changed) + b"\n"


def _replace_bytes(data: bytes) -> Callable[[Path, Path], None]:
    def make(path: Path, _outside: Path) -> None:
        _remove(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    return make


def _link_out(path: Path, outside: Path) -> None:
    target = _outside_copy(path, outside)
    _remove(path)
    path.symlink_to(target)


def _link_loop(path: Path, _outside: Path) -> None:
    _remove(path)
    path.symlink_to(path.name)


def _dangling(path: Path, outside: Path) -> None:
    _remove(path)
    path.symlink_to(outside / "nothing-here")


def _folder(path: Path, _outside: Path) -> None:
    _remove(path)
    path.mkdir(parents=True)
    (path / "x").write_text("a folder where a file should be")


def _fifo(path: Path, _outside: Path) -> None:
    _remove(path)
    os.mkfifo(path)


def _file_for_folder(path: Path, _outside: Path) -> None:
    _remove(path)
    path.write_text("a file where a folder should be")


def _huge(path: Path, _outside: Path) -> None:
    _remove(path)
    with open(path, "wb") as handle:  # sparse: costs no disk
        handle.truncate(80 * 1024 * 1024)
        handle.seek(80 * 1024 * 1024 - 1)
        handle.write(b"\n")


def _rewrite(edit: Callable[[bytes], bytes]) -> Callable[[Path, Path], None]:
    def make(path: Path, _outside: Path) -> None:
        data = path.read_bytes() if path.is_file() else b""
        _remove(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(edit(data))

    return make


DEEP = b"[" * 200_000 + b"]" * 200_000
ODDITIES: dict[str, Callable[[Path, Path], None]] = {
    "link-out": _link_out,
    "link-loop": _link_loop,
    "dangling-link": _dangling,
    "folder": _folder,
    "fifo": _fifo,
    "file": _file_for_folder,
    "huge": _huge,
    "empty": _replace_bytes(b""),
    "deep-json": _replace_bytes(DEEP + b"\n"),
    "deep-object": _replace_bytes(b'{"v":1,"x":' + b'{"a":' * 5000 + b"1" + b"}" * 5001 + b"\n"),
    "invalid-utf8": _rewrite(lambda d: d.replace(b"a", b"\xff\xfe", 3) + b"\xc3\n"),
    "nul": _rewrite(lambda d: d.replace(b":", b":\x00", 1) + b"\x00\n"),
    "nan": _replace_bytes(b'{"v":1,"id":"x","cost_usd":NaN,"timeout_s":Infinity}\n'),
    "surrogate": _rewrite(lambda d: d.replace(b'"acme', b'"\\ud800acme')),
    "duplicate-key": _rewrite(lambda d: d.replace(b'{"', b'{"v":1,"v":1,"', 1)),
    "not-an-object": _replace_bytes(b"[1,2,3]\n"),
    "big-number": _replace_bytes(b'{"v":1' + b"0" * 5000 + b"}\n"),
    "torn": _rewrite(lambda d: d[: max(1, len(d) // 2)]),
    **{f"time {when}": _rewrite(functools.partial(_time_edge, when=when)) for when in EDGE_TIMES},
}


def make_odd(paths: Paths, clone_id: str, kind: str, oddity: str, outside: Path) -> None:
    ODDITIES[oddity](kind_path(paths, clone_id, kind), outside)


def replace_value(path: Path, key: str, value: Any) -> None:
    """One key of a JSON document (or of each line) set to a generated value."""
    data = path.read_bytes() if path.is_file() else b"{}"
    out = []
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            document = json.loads(line)
        except (ValueError, RecursionError):
            document = {}
        if isinstance(document, dict):
            document[key] = value
        out.append(json.dumps(document, allow_nan=True).encode())
    _remove(path)
    path.write_bytes(b"\n".join(out) + b"\n")


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(EDGE_TIMES),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
KEYS = (
    *("v", "id", "target", "engine", "state", "at", "requested_at", "updated_at", "started_at"),
    *("ended_at", "question", "options", "recommended", "timeout_s", "answer", "choice", "kind"),
    *("text", "step", "outcome", "usage", "cost_usd", "last_progress", "output_tail", "report"),
    *("handoffs", "network", "resume", "question_id", "login", "ask_timeout_s", "mode", "repo"),
    *("stall_timeout_s", "check_commands", "config_version"),
)


@st.composite
def hostile_edits(draw: st.DrawFn) -> tuple[str, str, Any]:
    """(kind, how, detail): a named oddity, generated bytes, or one key set to any value."""
    kind = draw(st.sampled_from(KINDS))
    how = draw(st.sampled_from(("oddity", "oddity", "bytes", "value")))
    if how == "oddity":
        return kind, how, draw(st.sampled_from(sorted(ODDITIES)))
    if how == "bytes":
        return kind, how, draw(st.binary(max_size=300))
    return kind, how, (draw(st.sampled_from(KEYS)), draw(json_values))


def apply_edit(paths: Paths, clone_id: str, edit: tuple[str, str, Any], outside: Path) -> bool:
    """Make one edit; False if an earlier edit left no place for it (its folder is gone)."""
    kind, how, detail = edit
    path = kind_path(paths, clone_id, kind)
    if path.parent.is_symlink() or not path.parent.is_dir():
        return False
    if how == "oddity":
        make_odd(paths, clone_id, kind, detail, outside)
    elif how == "bytes":
        _replace_bytes(detail)(path, outside)
    elif not path.is_dir():
        replace_value(path, *detail)
    return True


def fill_run_folder(folder: RunFolder, clone_id: str) -> None:
    """The files of a running clone's folder: a record, progress with a question, an inbox,
    deliveries, a handoff and the lock files."""
    schemas.write(folder.record_file, schemas.Record(id=clone_id, state=schemas.State.WAITING))
    folder.append_progress(
        schemas.ProgressLine(step=schemas.Step.ENGINE, kind=schemas.ProgressKind.NOTE, text="hi")
    )
    question = schemas.Question(id="q1", text="which?", options=("a", "b"), recommended="a")
    folder.append_progress(
        schemas.ProgressLine(
            step=schemas.Step.ENGINE,
            kind=schemas.ProgressKind.QUESTION,
            text="?",
            question=question,
        )
    )
    folder.append_progress(
        schemas.ProgressLine(
            step=schemas.Step.ENGINE,
            kind=schemas.ProgressKind.ANSWER,
            text="a",
            answer=schemas.Answer(question_id="q0", choice="a"),
        )
    )
    line = schemas.InboxLine(id="m1", kind=schemas.InboxKind.MESSAGE, text="hello")
    folder.append_inbox(line)
    files.append_line(folder.deliveries_file, schemas.dumps(line))
    folder.write_handoff(schemas.Handoff(network=NetworkMode.OPEN, resume=schemas.Resume.SAVE))
    for kind in ("progress.jsonl.lock", "inbox.jsonl.lock", "deliveries.jsonl.lock"):
        (folder.path / kind).touch()


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Everything under `folder`: each file's bytes, each link's target."""
    found: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            found[name] = os.readlink(path)
        elif path.is_file():
            found[name] = path.read_bytes()
    return found


@attrs.frozen
class Outcome:
    code: int
    out: str
    err: str


@contextlib.contextmanager
def home_env(root: Path) -> Iterator[Paths]:
    before = os.environ.get(HOME_VARIABLE)
    os.environ[HOME_VARIABLE] = str(root)
    try:
        yield default_paths()
    finally:
        if before is None:
            os.environ.pop(HOME_VARIABLE, None)
        else:
            os.environ[HOME_VARIABLE] = before


def run_cli(capture: pytest.CaptureFixture[str], *args: str) -> Outcome:
    capture.readouterr()
    code = main(list(args))
    out, err = capture.readouterr()
    return Outcome(code, out, err)
