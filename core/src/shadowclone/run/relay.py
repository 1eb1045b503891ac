"""The clone's side of a run folder sent over the network (`node/sending.py`): the clone works
in a run folder of its machine's own, and this relay keeps serve's copy of what the clone
writes and the clone's copy of what the owner's side writes, each file one way.

Each step is safe to repeat: a lines file goes from the offset serve last confirmed (or, after
a restart of either side, the one serve names), a document when it changed. A failed step is
tried again at the next, so a serve that restarts, or a network that drops, loses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import Any

import attrs
import httpx2

from shadowclone import contract, files
from shadowclone.errors import ShadowcloneError
from shadowclone.node import sending
from shadowclone.node.sending import Form, Sent, Way

log = logging.getLogger(__name__)

TIMEOUT_S = 30.0
CLOSE_TIMEOUT_S = 10.0
"""A close serve does not answer in this long is tried again later (the session stays open)."""
FINAL_WAIT_S = 120.0
"""How long the clone's end waits for serve to take its last lines (a serve restarting)."""
FORCED_CLOSE_S = 60.0
"""A close that must happen (the work is over) is tried this long, then done here alone."""


@attrs.frozen
class RelayLink:
    """Where serve's relay is and the clone's credential, from the launcher's variables."""

    url: str
    clone_id: str
    credential: str
    proxy: str | None = None
    """A network-off clone's egress proxy, which lets the relay's address through."""

    def client_settings(self) -> dict[str, Any]:
        return {
            "base_url": self.url,
            "headers": {"authorization": f"Bearer {self.credential}"},
            "proxy": self.proxy,
            "trust_env": False,  # only the clone's own egress proxy, never the environment's
        }

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> RelayLink | None:
        url = environ.get(contract.RELAY_VARIABLE)
        if not url:
            return None
        clone_id = environ.get(contract.CLONE_ID_VARIABLE, "")
        credential = environ.get(contract.RELAY_CREDENTIAL_VARIABLE, "")
        if not clone_id or not credential:
            missing = contract.CLONE_ID_VARIABLE if not clone_id else "its credential"
            raise RelayError(f"{contract.RELAY_VARIABLE} is set but {missing} is not")
        return cls(url, clone_id, credential, environ.get(contract.EGRESS_VARIABLE) or None)

    async def close_inbox(self, taken: frozenset[str], force: bool) -> bool:
        """serve's decision on closing the inbox (`node/sending.py`'s `CLOSE`): False while a
        message it accepted is not among `taken`, or while serve does not answer (asked again
        later); `force` closes, after trying serve for `FORCED_CLOSE_S`."""
        url = sending.path_of(self.clone_id, sending.CLOSE)
        body = {"taken": sorted(taken), "force": force}
        deadline = time.monotonic() + FORCED_CLOSE_S
        settings = self.client_settings()
        async with httpx2.AsyncClient(timeout=CLOSE_TIMEOUT_S, **settings) as client:
            while True:
                try:
                    answer = await client.post(url, json=body)
                    if answer.status_code in (200, 409):
                        return answer.status_code == 200
                    _check(answer)
                except (httpx2.HTTPError, RelayError) as error:
                    log.warning("closing the inbox with serve: %s", error)
                if not force:
                    return False
                if time.monotonic() > deadline:
                    log.error("serve did not answer the inbox's close; closed here alone")
                    return True
                await asyncio.sleep(1.0)


class RelayError(ShadowcloneError):
    """serve answered what the relay cannot go on from (its copy differs from the clone's)."""


FAILURES = (httpx2.HTTPError, ShadowcloneError, OSError)
"""What a round may meet and try again: the network, serve's answers, a file of the folder
that is not a plain file (`MalformedFile`) or cannot be read."""


@attrs.define
class _State:
    confirmed: dict[str, int] = attrs.Factory(dict)
    """Up lines files: the size serve confirmed."""
    sent_documents: dict[str, str | None] = attrs.Factory(dict)
    """Up documents: the digest of what serve has (None: removed there)."""
    tags: dict[str, str] = attrs.Factory(dict)
    """Down documents: serve's tag of the copy here."""


class Relay:
    """One clone's relay to serve (`link`), for its run folder here, `folder`."""

    def __init__(self, link: RelayLink, folder: Path) -> None:
        self.clone_id = link.clone_id
        self.folder = folder
        self._client = httpx2.AsyncClient(timeout=TIMEOUT_S, **link.client_settings())
        self._state = _State()

    async def begin(self) -> None:
        """Before the run program reads anything: what the owner's side wrote, and a check
        that this machine holds the run folder serve knows (a later launch placed elsewhere
        must not start the work again from nothing)."""
        await self._pull_changed()
        progress = self.folder / sending.PROGRESS
        await self._serves_lines(progress)
        await self._push_lines(progress, sending.PROGRESS)

    async def _serves_lines(self, progress: Path) -> None:
        """The notes serve wrote while it prepared this launch (before the first, or between
        phases), which the clone's progress goes on from; checked with the rest of the copy
        by `_push_lines`. A first launch's folder takes none from a clone that has handed on
        to a later phase: that clone's run folder is on another machine."""
        url = sending.path_of(self.clone_id, sending.PROGRESS)
        while True:
            mine = _size_of(progress)
            answer = await self._client.get(url, params={"offset": mine})
            if answer.status_code == 409:  # serve holds less: the clone's sends fill it
                return
            _check(answer)
            tail = sending.whole_lines(answer.content)
            if not tail:
                return
            if mine == 0:
                handoff = sending.path_of(self.clone_id, contract.HANDOFF_FILE)
                held = await self._client.get(handoff)
                if held.status_code != 404:
                    _check(held)
                    raise RelayError(
                        "serve holds a handoff of this clone to a later phase, and this machine "
                        "none of its progress: the clone's run folder is not this machine's"
                    )
            _append(progress, tail)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def sync(self) -> None:
        """Every file once, up and down; a file that fails does not hold up the others (a
        session too large to send must not keep the progress from serve), and the first
        failure is raised once all were tried."""
        failed: Exception | None = None
        for sent in sending.SENT:
            if sent.way is Way.UP:
                try:
                    await self._push(sent)
                except FAILURES as error:
                    failed = failed or error
        try:
            await self._pull_changed()
        except FAILURES as error:
            failed = failed or error
        if failed is not None:
            raise failed

    async def run(self, stop: asyncio.Event, interval_s: float = 0.2) -> None:
        """Sync until `stop`, waiting `interval_s` between rounds, then `finish`; a round that
        fails is tried again (after longer waits while it keeps failing)."""
        failures = 0
        while not stop.is_set():
            try:
                await self.sync()
                failures = 0
            except FAILURES as error:
                failures += 1
                log.warning("the relay to serve: %s (round %d failed)", error, failures)
            wait_s = min(interval_s * 2 ** min(failures, 5), 5.0)
            with contextlib.suppress(TimeoutError):  # the wait is the point
                await asyncio.wait_for(stop.wait(), wait_s)
        await self.finish()

    async def finish(self, wait_s: float = FINAL_WAIT_S) -> None:
        """The last round, tried for up to `wait_s`: the final progress line must reach serve
        before the clone's process ends (a restarting serve answers again meanwhile)."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                await self.sync()
                return
            except FAILURES as error:
                if time.monotonic() > deadline:
                    raise RelayError(
                        f"the last of the run folder did not reach serve: {error}"
                    ) from None
                log.warning("the relay's last round: %s; trying again", error)
                await asyncio.sleep(1.0)

    async def _push(self, sent: Sent) -> None:
        path = self.folder / sent.name
        url = sending.path_of(self.clone_id, sent.name)
        if sent.form is Form.TREE:
            await self._push_tree(path, url, sent.name)
        elif sent.form is Form.LINES:
            await self._push_lines(path, sent.name)
        else:
            await self._push_document(path, url, sent.name)

    async def _pull_changed(self) -> None:
        """What changed on the owner's side since the last round, asked for in one request
        (`sending.Held`); a file that fails does not hold up the others."""
        answer = await self._client.get(sending.held_path(self.clone_id))
        _check(answer)
        try:
            held = answer.json()
        except ValueError:
            held = None
        if not isinstance(held, dict):
            raise RelayError("serve's answer of what it holds is not a JSON object")
        failed: Exception | None = None
        for sent in sending.SENT:
            if sent.way is Way.DOWN:
                try:
                    await self._pull(sent, held.get(sent.name, _UNKNOWN))
                except FAILURES as error:
                    failed = failed or error
        if failed is not None:
            raise failed

    async def _pull(self, sent: Sent, held: object) -> None:
        """The file from serve unless what serve `held` of it is what this copy has; one
        serve did not name (`_UNKNOWN`: it could not read it) is asked for alone."""
        path = self.folder / sent.name
        url = sending.path_of(self.clone_id, sent.name)
        if sent.form is Form.LINES:
            if held != _size_of(path):
                await self._pull_lines(path, url, held if isinstance(held, int) else None)
        elif held is _UNKNOWN or held != self._state.tags.get(sent.name):
            pull = self._pull_tree if sent.form is Form.TREE else self._pull_document
            await pull(path, url, sent.name)

    async def _push_lines(self, path: Path, name: str) -> None:
        """From serve's size on; at first an empty send asks serve for it."""
        url = sending.path_of(self.clone_id, name)
        while True:
            known = name in self._state.confirmed
            offset = self._state.confirmed.get(name, 0)
            data = _read_from(path, offset) if known else b""
            if known and not data:
                return
            answer = await self._client.put(url, params={"offset": offset}, content=data)
            size = _size(answer)
            if answer.status_code != 409:
                _check(answer)
            elif answer.headers.get(sending.DIFFERS_HEADER):
                raise RelayError(f"serve's copy of {name} differs from this machine's")
            if size > _size_of(path):
                raise RelayError(
                    f"serve holds {size} bytes of {name}, more than this machine's "
                    f"{_size_of(path)}: the clone's run folder is not this machine's"
                )
            digest = answer.headers.get(sending.DIGEST_HEADER)
            if digest is not None and digest != sending.digest_of(path, size):
                raise RelayError(f"serve's copy of {name} differs from this machine's")
            self._state.confirmed[name] = size

    async def _push_document(self, path: Path, url: str, name: str) -> None:
        try:
            data: bytes | None = files.read_bounded(path)
        except FileNotFoundError:
            data = None
        digest = None if data is None else hashlib.sha256(data).hexdigest()
        if name in self._state.sent_documents and self._state.sent_documents[name] == digest:
            return
        if data is None:
            _check(await self._client.delete(url))
        else:
            _check(await self._client.put(url, content=data))
        self._state.sent_documents[name] = digest

    async def _push_tree(self, path: Path, url: str, name: str) -> None:
        mark = sending.signature(path)
        if name in self._state.sent_documents and self._state.sent_documents[name] == mark:
            return
        if mark is None:
            _check(await self._client.delete(url))
        else:
            try:
                data = sending.pack(path)
            except (ValueError, OSError) as error:
                raise RelayError(str(error)) from None
            _check(await self._client.put(url, content=data))
        self._state.sent_documents[name] = mark

    async def _pull_tree(self, path: Path, url: str, name: str) -> None:
        tag = self._state.tags.get(name)
        answer = await self._client.get(url, headers={"if-none-match": tag} if tag else {})
        if answer.status_code in (304, 404):
            return
        _check(answer)
        try:
            sending.unpack(answer.content, path)
        except ValueError as error:
            raise RelayError(str(error)) from None
        self._state.tags[name] = answer.headers.get("etag", "")

    async def _pull_lines(self, path: Path, url: str, held: int | None) -> None:
        """Up to serve's size `held` (or to its end, when not told)."""
        while True:
            offset = _size_of(path)
            if offset == held:
                return
            answer = await self._client.get(url, params={"offset": offset})
            _check(answer)
            data = sending.whole_lines(answer.content)
            if not data:
                return
            _append(path, data)

    async def _pull_document(self, path: Path, url: str, name: str) -> None:
        tag = self._state.tags.get(name)
        answer = await self._client.get(url, headers={"if-none-match": tag} if tag else {})
        if answer.status_code == 304:
            return
        if answer.status_code == 404:
            if tag is not None:  # serve's was here, and is gone there
                files.remove(path)
                del self._state.tags[name]
            return
        _check(answer)
        files.write_atomic(path, answer.content, plain_folder=True)
        self._state.tags[name] = answer.headers.get("etag", "")


_UNKNOWN = object()
"""A file serve's answer of what it holds does not name."""


def _check(answer: httpx2.Response) -> None:
    if answer.status_code >= 300:
        said = answer.text.strip().splitlines()[:1]
        raise RelayError(f"serve answered {answer.status_code}: {' '.join(said)}")


def _size(answer: httpx2.Response) -> int:
    text = answer.headers.get(sending.SIZE_HEADER, "")
    if not text.isdigit():
        _check(answer)
        raise RelayError(f"serve's answer has no {sending.SIZE_HEADER}")
    return int(text)


def _size_of(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except FileNotFoundError:
        return 0


def _read_from(path: Path, offset: int) -> bytes:
    """Whole lines from `offset`, at most a request's worth."""
    try:
        descriptor = files.open_plain(path, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    try:
        return sending.whole_lines(os.pread(descriptor, sending.MAX_BODY_BYTES, offset))
    finally:
        os.close(descriptor)


def _append(path: Path, data: bytes) -> None:
    descriptor = files.open_plain(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.write(descriptor, data)
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


async def relayed(link: RelayLink | None, folder: Path, work: Awaitable[int]) -> int:
    """`work` (the run program) with `folder` kept in step with serve's copy throughout, and
    wholly sent at its end; without a `link`, `work` alone."""
    if link is None:
        return await work
    relay = Relay(link, folder)
    stop = asyncio.Event()
    running = asyncio.create_task(relay.run(stop), name="relay")
    try:
        return await work
    finally:
        stop.set()
        try:
            await running
        finally:
            await relay.aclose()


def begin(environ: Mapping[str, str], folder: Path, wait_s: float = FINAL_WAIT_S) -> None:
    """The run folder's first pull (`Relay.begin`), before anything reads it, tried for up to
    `wait_s` while serve does not answer; nothing to do without a relay."""
    link = RelayLink.from_environ(environ)
    if link is None:
        return

    async def go() -> None:
        relay = Relay(link, folder)
        deadline = time.monotonic() + wait_s
        try:
            while True:
                try:
                    await relay.begin()
                    return
                except (httpx2.TransportError, OSError) as error:
                    if time.monotonic() > deadline:
                        raise RelayError(
                            f"serve's relay at {link.url} does not answer: {error}"
                        ) from None
                    await asyncio.sleep(1.0)
        finally:
            await relay.aclose()

    asyncio.run(go())
