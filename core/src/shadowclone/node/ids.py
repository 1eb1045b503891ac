"""Clone ids: their shape, their time, and the clones folder's list of them.

Kept light (no schema): a shell completion of an id reads only this."""

from __future__ import annotations

import os
import re
import secrets
from datetime import UTC, datetime
from pathlib import Path

from shadowclone.errors import MalformedFile

ID_PATTERN = re.compile(r"^(\d{6}-\d{6})-[a-z0-9]{4}$")
ID_TIME_FORMAT = "%y%m%d-%H%M%S"
"""The time part of a clone id, in UTC: ids sort by it."""
_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"


def new_clone_id(at: datetime) -> str:
    """Sortable by request time, readable, and unique enough to be created with mkdir."""
    suffix = "".join(secrets.choice(_ALPHABET) for _ in range(4))
    return f"{at.astimezone(UTC).strftime(ID_TIME_FORMAT)}-{suffix}"


def id_time(clone_id: str) -> datetime | None:
    """The time in a clone id; None if it is not an id (or names a time that never was)."""
    match = ID_PATTERN.match(clone_id)
    if not match:
        return None
    try:
        return datetime.strptime(match.group(1), ID_TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None


def is_clone_id(name: str) -> bool:
    """A folder or marker name that is a clone id: the shape and a real time."""
    return id_time(name) is not None


def clone_ids(clones_dir: Path) -> list[str]:
    """The ids of the clones folder's run folders, newest first, by name alone."""
    try:
        names = [entry.name for entry in os.scandir(clones_dir) if is_clone_id(entry.name)]
    except FileNotFoundError:
        return []
    except OSError as error:
        raise MalformedFile(
            clones_dir, f"cannot list the clones folder: {error.strerror}"
        ) from None
    return sorted(names, reverse=True)
