"""Spare run folders: folders serve makes ahead, each with a clone's container started and
waiting in it, which `start` takes as a new clone's run folder.

Docker takes about a fifth of a second to create and start a container, as long as the rest
of a clone's way to its engine's first request. A spare folder lives in the clones folder's
`.spares` (so renaming it is one atomic step on one filesystem), named `<kind>.<random>`: its
kind says which clones may take it (the image, repository and login of their requests, which
is what a container is made for). `start` takes one by renaming it over the empty folder it
made for the new clone's id, under start.lock; a launcher's container mounts the folder
itself, which a rename does not change. serve gives one up by renaming it to a hidden name
first, so a spare is taken by exactly one start or given up, never both. What the container
was made with is checked by the launcher again at launch (a spare made for another spec is
removed, and the clone starts as it would have without it).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

from shadowclone.node.schemas import Request

log = logging.getLogger(__name__)

SPARES_FOLDER = ".spares"
_SHAPE = re.compile(r"^[0-9a-f]{8,64}$")
"""A kind, or the random part of a spare's name."""
_GIVEN_UP = "."
"""A spare's name after serve gave it up: hidden, so no start takes it."""


def spares_dir(clones_dir: Path) -> Path:
    return clones_dir / SPARES_FOLDER


def spare_kind(request: Request) -> str:
    """Which spares may serve as this clone's run folder. A clone whose image is made for its
    repository takes a spare made after a launch of its repository's environment; its launch,
    once prepared, uses the spare's container only if it was made with the same image."""
    words = [request.image, request.target.repo_full_name.lower(), request.login, request.launcher]
    if request.environment is not None:
        words.append(request.environment)
    return hashlib.sha256("\0".join(words).encode()).hexdigest()[:16]


def make_spare(clones_dir: Path, kind: str) -> Path:
    """A new, empty spare folder of `kind` (serve's)."""
    folder = spares_dir(clones_dir)
    folder.mkdir(parents=True, exist_ok=True)
    while True:
        spare = folder / f"{kind}.{secrets.token_hex(4)}"
        try:
            spare.mkdir()
        except FileExistsError:
            continue
        return spare


def take_spare(clones_dir: Path, kind: str | None, destination: Path) -> bool:
    """Make a spare of `kind` the new run folder `destination`, the empty folder this start
    made for its id (a rename replaces an empty folder, and nothing else); False if there is
    none, or if something came into `destination` meanwhile. Under start.lock: no other start
    takes the same one meanwhile, and serve's `give_up` either wins the spare or finds it
    gone."""
    if kind is None:
        return False
    for spare in waiting(clones_dir, kind):
        try:
            os.rename(spare, destination)
        except FileNotFoundError:
            continue  # given up by serve just now
        except OSError as error:  # not empty, or not a folder: it stays as it is
            log.warning("%s: cannot take a spare: %s", destination, error.strerror)
            return False
        return True
    return False


def waiting(clones_dir: Path, kind: str | None = None) -> Iterator[Path]:
    """The spares no start has taken and serve has not given up, of `kind` or all."""
    for path, found_kind, hidden in _entries(clones_dir):
        if not hidden and (kind is None or found_kind == kind):
            yield path


def give_up(spare: Path) -> Path | None:
    """Take `spare` back from the starts: its hidden name, for its container to be removed
    and then the folder (`forget`); None if a start took it first."""
    hidden = spare.with_name(_GIVEN_UP + spare.name)
    try:
        os.rename(spare, hidden)
    except FileNotFoundError:
        return None
    return hidden


def given_up(clones_dir: Path) -> Iterator[Path]:
    """Spares given up whose folders are still there (serve stopped before removing them)."""
    for path, _, hidden in _entries(clones_dir):
        if hidden:
            yield path


def _entries(clones_dir: Path) -> Iterator[tuple[Path, str, bool]]:
    """The spare folders, each with its kind and whether it was given up; a link, a file or
    a name serve does not give is never one (the clones folder is the owner's to write in)."""
    try:
        entries = list(os.scandir(spares_dir(clones_dir)))
    except FileNotFoundError:
        return
    for entry in entries:
        name = entry.name.removeprefix(_GIVEN_UP)
        found_kind, dot, rest = name.partition(".")
        if not (_SHAPE.match(found_kind) and dot and _SHAPE.match(rest)):
            continue
        if entry.is_dir(follow_symlinks=False):
            yield Path(entry.path), found_kind, name != entry.name


def forget(hidden: Path) -> None:
    """Remove a given-up spare's folder (its container gone first); what cannot be removed
    stays hidden, and the next serve tries again."""
    try:
        shutil.rmtree(hidden)
    except OSError as error:
        log.warning("cannot remove the spare folder %s: %s", hidden, error)
