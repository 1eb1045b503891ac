"""Engine sessions kept in run folders, for the next clone on the same pull request.

A clone whose work became a pull request leaves its engine's session in its run folder
(`RunFolder.saved_session_dir`): a `session.json` (`SavedSession`) and the files, as
`file-0`, `file-1`... serve copies that folder into the run folder of the next clone on the
pull request (`RunFolder.given_session_dir`) before it launches it, and that clone's engine
resumes the session. A folder is written beside its place and renamed into it, so a reader
sees all of it or none; every file is read without following a link and bounded, since a run
folder's files are the clone's to write.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
from collections.abc import Sequence
from pathlib import Path

import attrs

from shadowclone import files
from shadowclone.errors import MalformedFile
from shadowclone.node import schemas
from shadowclone.node.schemas import SavedSession

MANIFEST = "session.json"
MAX_SESSION_BYTES = 64 * 1024 * 1024
"""The most a kept session may weigh, all its files together: a long session's transcript is
a few MB."""


def file_name(index: int) -> str:
    return f"file-{index}"


def write_session(folder: Path, session: SavedSession, contents: Sequence[bytes]) -> None:
    """Write `session` and its files' `contents` as the folder `folder`, replacing any."""
    if len(contents) != len(session.names):
        raise ValueError("a file's contents for each name")
    if sum(map(len, contents)) > MAX_SESSION_BYTES:
        raise MalformedFile(folder, f"the session is over {MAX_SESSION_BYTES} bytes")
    temp = folder.with_name(f".{folder.name}.{secrets.token_hex(6)}.tmp")
    temp.mkdir(mode=0o700)
    try:
        for index, data in enumerate(contents):
            files.write_atomic(temp / file_name(index), data, mode=0o600, plain_folder=True)
        schemas.write(temp / MANIFEST, session)
        _replace_folder(temp, folder)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise


def _replace_folder(new: Path, folder: Path) -> None:
    """Rename `new` over `folder`: the old one, if any, first out of the way."""
    if folder.is_symlink() or folder.is_file():
        folder.unlink()
    elif folder.exists():
        old = folder.with_name(f".{folder.name}.{secrets.token_hex(6)}.old")
        folder.rename(old)
        shutil.rmtree(old, ignore_errors=True)
    new.rename(folder)


def read_session(folder: Path) -> tuple[SavedSession, list[bytes]]:
    """The session kept in `folder` and its files' contents; FileNotFoundError if there is
    none, `MalformedFile` for anything but what `write_session` writes."""
    session = schemas.read(folder / MANIFEST, SavedSession)
    contents: list[bytes] = []
    left = MAX_SESSION_BYTES
    for index in range(len(session.names)):
        try:
            data = files.read_bounded(folder / file_name(index), limit=left)
        except FileNotFoundError:
            raise MalformedFile(folder, f"{file_name(index)} of the session is missing") from None
        contents.append(data)
        left -= len(data)
    return session, contents


def copy_session(source: Path, target: Path, clone_id: str) -> SavedSession:
    """Copy the session kept in `source` (clone `clone_id`'s) to `target`, saying whose it is."""
    session, contents = read_session(source)
    given = attrs.evolve(session, clone_id=clone_id)
    write_session(target, given, contents)
    return given


def drop_session(folder: Path) -> None:
    """Remove a kept session, if there is one."""
    with contextlib.suppress(FileNotFoundError):
        if folder.is_symlink():
            folder.unlink()
        else:
            shutil.rmtree(folder)
