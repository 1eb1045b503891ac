"""Credentials that appear after the secrets file is read: the tokens a login rotates (the
model proxy's state of a ChatGPT plan) and those an engine keeps in its own state folder
(Claude Code's `.credentials.json`, Codex's `auth.json`). The redactor learns each as it
appears, so that no writer lets out a token the secrets file never held."""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from shadowclone import files
from shadowclone.errors import MalformedFile
from shadowclone.redact import Redactor
from shadowclone.run.identity import EngineIdentity

log = logging.getLogger(__name__)

MAX_BYTES = 1 << 20
MAX_VALUES = 64
"""The most credentials taken from one file: a login file holds a few; a file the engine
filled with thousands would make every later line slower to redact."""
_CREDENTIAL_KEY = re.compile(r"token|key|secret|passw|credential", re.IGNORECASE)

_Stamp = tuple[int, int, int]


class CredentialWatch:
    """Files that may hold credentials, looked at again whenever they change (a stat each
    time `check` is called: before every progress line)."""

    def __init__(self, redactor: Redactor, identity: EngineIdentity) -> None:
        self.redactor = redactor
        self._identity = identity
        self._files: dict[tuple[Path, str], tuple[bool, _Stamp | None]] = {}
        self._lock = threading.Lock()

    def own(self, path: Path) -> None:
        """A file of the run program's own (the login's state)."""
        with self._lock:
            self._files.setdefault((path.parent, path.name), (False, None))

    def engines(self, root: Path, names: Iterable[str]) -> None:
        """Files in a folder the engine writes (its state folder), read as the engine."""
        with self._lock:
            for name in names:
                self._files.setdefault((root, name), (True, None))

    def check(self) -> None:
        """Learn what changed files hold."""
        with self._lock:
            for (root, name), (engines, seen) in list(self._files.items()):
                try:
                    info = os.lstat(root / name)
                except OSError:
                    continue
                stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
                if stamp == seen:
                    continue
                self._files[root, name] = (engines, stamp)
                if stat.S_ISREG(info.st_mode) and info.st_size <= MAX_BYTES:
                    self._learn(root, name, engines)

    def redact(self, text: str) -> str:
        self.check()
        return self.redactor(text)

    def _learn(self, root: Path, name: str, engines: bool) -> None:
        try:
            if engines:
                data = self._identity.read(root, name, MAX_BYTES)
            else:
                data = files.read_beneath(root, name, MAX_BYTES)
        except (OSError, MalformedFile) as error:
            log.warning("a credentials file was not read: %s", error)
            return
        if self.redactor.learn(credential_values(data.decode("utf-8", "replace"))):
            log.info("the redactor learned the credentials in %s", root / name)


def credential_values(text: str) -> list[str]:
    """The credentials in a file: every string under a key that names one (`access_token`,
    `refreshToken`, `OPENAI_API_KEY`, `tokens`...) in a JSON document; else the whole text."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return [text.strip()]
    found = _under_credential_keys(document, False)
    return [value for _, value in zip(range(MAX_VALUES), found, strict=False)]


def _under_credential_keys(item: object, named: bool) -> Iterator[str]:
    stack = [(item, named)]
    while stack:
        item, named = stack.pop()
        if isinstance(item, str) and named:
            yield item
        elif isinstance(item, dict):
            stack.extend(
                (value, named or bool(_CREDENTIAL_KEY.search(str(key))))
                for key, value in item.items()
            )
        elif isinstance(item, list):
            stack.extend((value, named) for value in item)
