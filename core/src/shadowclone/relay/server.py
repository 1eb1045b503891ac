"""serve's relay, the owner's side of run folders sent over the network (`node/sending.py`): it
keeps the owner's copy of each clone's run folder as the clone's relay sends it, and answers
what the relay asks of the owner's side, over HTTP on an address the other machines reach.

serve's rules hold as on one machine: serve writes the record and the deliveries, and the clone
its own files, each arriving here as its relay sends them. A lines file grows only by whole
lines at its end: a resend of bytes already here is checked and harmless, a gap is refused with
this copy's size, so a relay that lost its place (a restart of either side) finds it again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shadowclone import files
from shadowclone.errors import MalformedFile, PluginUnavailable
from shadowclone.node import sending
from shadowclone.node.ids import is_clone_id
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import InboxKind
from shadowclone.node.sending import Form, Sent, Way
from shadowclone.plugin.launcher_parts import RelayingLauncher
from shadowclone.plugin.types import Launcher, RelayAccess

log = logging.getLogger(__name__)

RelayFor = Callable[[str], RelayAccess]
"""A clone's access to the relay, by its id."""


class Gap(Exception):
    """The bytes sent start past the end of this copy, or (`differs`) do not match it."""

    def __init__(self, size: int, why: str, differs: bool = False) -> None:
        super().__init__(why)
        self.size = size
        self.differs = differs


class RelayFiles:
    """The owner's copies of the clones' sent run folders, under `clones_dir`."""

    def __init__(self, clones_dir: Path) -> None:
        self.clones_dir = clones_dir
        self.key = sending.load_key(clones_dir)

    def folder(self, clone_id: str, presented: str) -> RunFolder | None:
        """The clone's run folder if `presented` is its credential and the folder is there
        (a clone's, or a check clone's of `shadowclone setup`)."""
        if not is_clone_id(clone_id) or not sending.accepts(self.key, clone_id, presented):
            return None
        for parent in (self.clones_dir, self.clones_dir / sending.CHECKS_FOLDER):
            folder = RunFolder(parent / clone_id)
            if folder.exists():
                return folder
        return None

    def append(self, path: Path, offset: int, data: bytes) -> int:
        """Add what of `data` (sent from `offset`) this copy lacks; its new size."""
        with files.lock_for(path):
            descriptor = files.open_plain(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
            try:
                size = os.fstat(descriptor).st_size
                if offset > size:
                    raise Gap(size, f"{path}: bytes from {offset} sent, {size} held")
                have = os.pread(descriptor, min(size - offset, len(data)), offset)
                if have != data[: len(have)]:
                    raise Gap(size, f"{path}: bytes from {offset} differ from those held", True)
                fresh = data[len(have) :]
                if fresh:
                    os.write(descriptor, fresh)
                    os.fsync(descriptor)
                return size + len(fresh)
            finally:
                os.close(descriptor)

    @staticmethod
    def close_inbox(folder: RunFolder, taken: frozenset[str], force: bool) -> list[str]:
        """Close the clone's inbox unless a message accepted is not among those its engine
        `taken` (then their ids, and it stays open), or `force`. Under the inbox lock, as `send`
        checks the note it leaves: a message is accepted before the close, or refused."""
        with files.lock_for(folder.inbox_file):
            inbox, _, _ = folder.inbox()
            waiting = [
                line.id for line in inbox if line.kind is InboxKind.MESSAGE and line.id not in taken
            ]
            if waiting and not force:
                return waiting
            files.write_atomic(folder.inbox_closed_file, b"{}\n", plain_folder=True)
            return []

    @staticmethod
    def held(folder: RunFolder) -> sending.Held:
        """What this side holds of each file that goes down (`sending.Held`); a file it cannot
        read (not a plain file, too large) is left out, and the relay asks for it alone."""
        held: sending.Held = {}
        for sent in sending.SENT:
            if sent.way is not Way.DOWN:
                continue
            path = folder.path / sent.name
            try:
                if sent.form is Form.LINES:
                    held[sent.name] = os.lstat(path).st_size
                elif sent.form is Form.DOCUMENT:
                    held[sent.name] = sending.tag_of(files.read_bounded(path))
                else:
                    held[sent.name] = sending.tree_tag(path)
            except FileNotFoundError:
                held[sent.name] = 0 if sent.form is Form.LINES else None
            except (MalformedFile, OSError) as error:
                log.warning("the relay of %s: %s", folder.path.name, error)
        return held

    @staticmethod
    def lines_from(path: Path, offset: int) -> tuple[bytes, int]:
        """Whole lines from `offset` (at most a request's worth), and this copy's size."""
        try:
            descriptor = files.open_plain(path, os.O_RDONLY)
        except FileNotFoundError:
            if offset:
                raise Gap(0, f"{path}: asked from {offset}, none held") from None
            return b"", 0
        try:
            size = os.fstat(descriptor).st_size
            if offset > size:
                raise Gap(size, f"{path}: asked from {offset}, {size} held")
            data = os.pread(descriptor, min(size - offset, sending.MAX_BODY_BYTES), offset)
        finally:
            os.close(descriptor)
        return sending.whole_lines(data), size


def _refused() -> Response:
    """The one answer to an unknown clone and to a wrong credential alike."""
    return Response("no such clone, or not its credential\n", status_code=401)


def build_app(relay: RelayFiles) -> Starlette:
    def folder_of(request: Request) -> RunFolder | None:
        scheme, _, presented = request.headers.get("authorization", "").partition(" ")
        bearer = presented if scheme.lower() == "bearer" else ""
        return relay.folder(request.path_params["clone_id"], bearer)

    async def one_file(request: Request) -> Response:
        clone_id = request.path_params["clone_id"]
        sent = sending.BY_NAME.get(request.path_params["name"])
        folder = folder_of(request)
        if folder is None:
            return _refused()
        if sent is None:
            return Response("no such file is sent\n", status_code=404)
        try:
            return await _answer(relay, request, folder.path / sent.name, sent)
        except Gap as gap:
            headers = {sending.SIZE_HEADER: str(gap.size)}
            if gap.differs:
                headers[sending.DIFFERS_HEADER] = "1"
            return Response(f"{gap}\n", status_code=409, headers=headers)
        except (MalformedFile, ValueError) as error:
            log.warning("the relay of clone %s: %s", clone_id, error)
            return Response(f"{error}\n", status_code=400)

    async def held(request: Request) -> Response:
        folder = folder_of(request)
        if folder is None:
            return _refused()
        return JSONResponse(await run_in_threadpool(relay.held, folder))

    async def close(request: Request) -> Response:
        folder = folder_of(request)
        if folder is None:
            return _refused()
        try:
            asked = json.loads(await _body(request))
            taken, force = asked["taken"], asked["force"]
            if not (isinstance(taken, list) and all(isinstance(t, str) for t in taken)):
                raise ValueError("taken: expected a list of message ids")
            if not isinstance(force, bool):
                raise ValueError("force: expected true or false")
        except (ValueError, KeyError, TypeError) as error:
            return Response(f"a close: {error}\n", status_code=400)
        waiting = await run_in_threadpool(relay.close_inbox, folder, frozenset(taken), force)
        return JSONResponse({"waiting": waiting}, status_code=409 if waiting else 200)

    return Starlette(
        routes=[
            Route(sending.held_path("{clone_id}"), held, methods=["GET"]),
            Route(sending.PREFIX + "/{clone_id}/" + sending.CLOSE, close, methods=["POST"]),
            Route(
                sending.PREFIX + "/{clone_id}/{name}",
                one_file,
                methods=["GET", "PUT", "DELETE"],
            ),
        ]
    )


async def _answer(relay: RelayFiles, request: Request, path: Path, sent: Sent) -> Response:
    """The file's answer; the file work on a worker thread (a lock may take a moment)."""
    method = request.method
    if sent.form is Form.LINES and sent.way is Way.UP and method == "PUT":
        offset, data = _offset(request), await _body(request)
        size = await run_in_threadpool(relay.append, path, offset, data)
        headers = {sending.SIZE_HEADER: str(size)}
        if not data:  # a relay's first contact: what this copy holds, to compare with its own
            headers[sending.DIGEST_HEADER] = await run_in_threadpool(sending.digest_of, path, size)
        return Response(status_code=200, headers=headers)
    if sent.form is Form.LINES and method == "GET":  # up too: a first launch's start
        data, size = await run_in_threadpool(relay.lines_from, path, _offset(request))
        return Response(data, headers={sending.SIZE_HEADER: str(size)})
    if sent.form is Form.DOCUMENT and sent.way is Way.UP and method == "PUT":
        data = await _body(request)
        await run_in_threadpool(files.write_atomic, path, data, 0o644, True)
        return Response(status_code=204)
    if sent.form is Form.DOCUMENT and sent.way is Way.UP and method == "DELETE":
        await run_in_threadpool(files.remove, path)
        return Response(status_code=204)
    if sent.form is Form.DOCUMENT and method == "GET":  # up too: what a launch finds
        try:
            data = await run_in_threadpool(files.read_bounded, path)
        except FileNotFoundError:
            return Response(status_code=404)
        tag = sending.tag_of(data)
        if request.headers.get("if-none-match") == tag:
            return Response(status_code=304, headers={"etag": tag})
        return Response(data, headers={"etag": tag})
    if sent.form is Form.TREE:
        return await _tree(request, path, sent)
    return Response(f"{sent.name} is not {method} here\n", status_code=405)


async def _tree(request: Request, path: Path, sent: Sent) -> Response:
    method = request.method
    if sent.way is Way.UP and method == "PUT":
        data = await _body(request, sending.MAX_TREE_BYTES)
        await run_in_threadpool(sending.unpack, data, path)
        return Response(status_code=204)
    if sent.way is Way.UP and method == "DELETE":
        await run_in_threadpool(shutil.rmtree, path, True)
        return Response(status_code=204)
    if sent.way is Way.DOWN and method == "GET":
        tag = await run_in_threadpool(sending.tree_tag, path)
        if tag is None:
            return Response(status_code=404)
        if request.headers.get("if-none-match") == tag:
            return Response(status_code=304, headers={"etag": tag})
        data = await run_in_threadpool(sending.pack, path)  # a change meanwhile: a new tag
        return Response(data, headers={"etag": tag})
    return Response(f"{sent.name} is not {method} here\n", status_code=405)


def _offset(request: Request) -> int:
    text = request.query_params.get("offset", "")
    if not text.isdigit():
        raise ValueError(f"offset: expected a whole number of bytes, got {text!r}")
    return int(text)


async def _body(request: Request, limit: int = sending.MAX_BODY_BYTES) -> bytes:
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > limit:
            raise ValueError(f"a body over {limit} bytes")
    return bytes(data)


class RelayThread:
    """The relay on a thread of serve's, listening where the clones' machines reach it."""

    def __init__(self, clones_dir: Path, host: str, port: int = 0) -> None:
        self.files = RelayFiles(clones_dir)
        settings = uvicorn.Config(
            build_app(self.files),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
        self.server = uvicorn.Server(settings)
        self.port = port
        self.thread = threading.Thread(target=self._run, name="relay", daemon=True)

    def _run(self) -> None:
        try:
            self.server.run()
        except (OSError, SystemExit) as error:
            log.error("the relay could not run: %s", error)

    def start(self, timeout_s: float = 10.0) -> int:
        """Start listening; the port (the one the system chose for port 0)."""
        self.thread.start()
        for _ in range(int(timeout_s / 0.01)):
            if self.server.started or not self.thread.is_alive():
                break
            time.sleep(0.01)
        if not self.server.started:
            raise OSError(f"the relay did not start on {self.server.config.host}")
        [server] = self.server.servers
        self.port = int(server.sockets[0].getsockname()[1])
        log.info("the relay listens on %s:%d", self.server.config.host, self.port)
        return self.port

    def access(self, clone_id: str) -> RelayAccess:
        """What the clone's launch needs to reach this relay: its URL and the credential."""
        host, port = self.server.config.host, self.port
        return RelayAccess(f"http://{host}:{port}", sending.credential(self.files.key, clone_id))

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(5)


def start_relay(launcher: Launcher, clones_dir: Path) -> RelayThread | None:
    """serve's relay, for a launcher whose clones' run folders travel (`RelayingLauncher`);
    None for any other. A relay that cannot listen stops serve's start, in one line."""
    if not isinstance(launcher, RelayingLauncher):
        return None
    port = launcher.relay_port()
    if port is None:
        return None
    relay = RelayThread(clones_dir, launcher.host_address(), port)
    try:
        relay.start()
    except OSError as error:
        raise PluginUnavailable(
            f"serve's relay cannot listen on {launcher.host_address()}:{port}: {error}"
        ) from None
    return relay


@contextlib.contextmanager
def relay_for_checks(launcher: Launcher, clones_dir: Path) -> Iterator[RelayFor | None]:
    """The relay a check clone of `shadowclone setup` reaches, for a `RelayingLauncher`:
    serve's when it listens (it takes check clones too), else one of setup's own for as long
    as the `with` lasts; None for any other launcher."""
    port = launcher.relay_port() if isinstance(launcher, RelayingLauncher) else None
    if port is None:
        yield None
        return
    host = launcher.host_address()
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=2):
        key = sending.load_key(clones_dir)
        url = f"http://{host}:{port}"
        yield lambda clone_id: RelayAccess(url, sending.credential(key, clone_id))
        return
    relay = RelayThread(clones_dir, host, port)
    try:
        relay.start()
    except OSError as error:
        raise PluginUnavailable(f"a relay for the check clone cannot listen: {error}") from None
    try:
        yield relay.access
    finally:
        relay.stop()
