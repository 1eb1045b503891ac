"""`shadowclone mcp`: `initialize` answered before the mcp SDK is imported.

An assistant starts the server and waits for its answer to `initialize`; the SDK's import is
most of a second on a small machine. That answer depends only on constants (the server's name,
version, instructions and capabilities, and the protocol versions the SDK speaks), so it is
written as soon as the request is read, while a thread imports the SDK and builds the server.
The SDK then serves the channel as usual (`run("stdio")`), its descriptors 0 and 1 being pipes:
it reads the same `initialize` first, and its own answer to it is dropped on the way out, the
client having had one. Everything after passes through untouched.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import io
import json
import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import IO, Any

from shadowclone import __version__
from shadowclone.config.paths import Paths
from shadowclone.mcp import INSTRUCTIONS, SERVER_NAME

log = logging.getLogger(__name__)

CAPABILITIES: dict[str, Any] = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}
"""What the SDK's server declares (`tests/mcp` compares the two)."""


def sdk_versions() -> tuple[tuple[str, ...], str]:
    """The protocol versions the SDK answers `initialize` with, and its latest: read from the
    SDK's own `mcp_types/version.py` without importing the package (whose models are most of
    the import's time)."""
    spec = importlib.util.find_spec("mcp_types")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the mcp SDK is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    loaded = importlib.util.spec_from_file_location("_shadowclone_mcp_versions", path)
    if loaded is None or loaded.loader is None:
        raise ImportError(f"{path}: not a module")
    module = ModuleType(loaded.name)
    loaded.loader.exec_module(module)
    return tuple(module.HANDSHAKE_PROTOCOL_VERSIONS), str(module.LATEST_HANDSHAKE_VERSION)


def early_answer(message: object) -> dict[str, Any] | None:
    """The answer to `message` if it is a well-formed `initialize` request; else None (the
    SDK answers it, an error included)."""
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    request_id, params = message.get("id"), message.get("params")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    if not isinstance(params, dict) or not isinstance(params.get("capabilities"), dict):
        return None
    client, requested = params.get("clientInfo"), params.get("protocolVersion")
    if not isinstance(requested, str) or not isinstance(client, dict):
        return None
    if not all(isinstance(client.get(key), str) for key in ("name", "version")):
        return None
    versions, latest = sdk_versions()
    result = {
        "capabilities": CAPABILITIES,
        "instructions": INSTRUCTIONS,
        "protocolVersion": requested if requested in versions else latest,
        "serverInfo": {"name": SERVER_NAME, "version": __version__},
    }
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def main(paths: Paths | None = None) -> int:
    """Serve over stdio until the client closes the channel; stdout is the channel, so
    logging goes to stderr."""
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format=f"{SERVER_NAME} mcp: %(levelname)s %(name)s: %(message)s",
    )

    def build() -> Callable[[], None]:
        from shadowclone.mcp.server import build_server

        server = build_server(paths)
        return lambda: server.run("stdio")

    serve_stdio(build)
    return 0


def serve_stdio(build: Callable[[], Callable[[], None]]) -> None:
    """Serve over this process's stdin and stdout, answering `initialize` early: `build` (run
    in a thread) imports and makes the server, and returns what serves it on stdio."""
    making = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mcp-import")
    made = making.submit(build)
    making.shutdown(wait=False)
    client_in = io.BufferedReader(io.FileIO(os.dup(0), "rb"))
    client_out = os.fdopen(os.dup(1), "wb", buffering=0)
    first = client_in.readline()
    answered_id: object = None
    try:
        answer = early_answer(json.loads(first)) if first else None
    except (ValueError, RecursionError):
        answer = None
    if answer is not None:
        client_out.write(json.dumps(answer, separators=(",", ":")).encode() + b"\n")
        answered_id = answer["id"]
    serve = made.result()
    relays = _plumb(first, client_in, client_out, answered_id)
    try:
        serve()
    finally:
        # The SDK keeps a copy of its way out open for good: a last line tells the relay
        # that nothing follows.
        os.write(1, _END)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 1)
        os.close(null)
        relays[1].join(timeout=5)


def _plumb(
    first: bytes,
    client_in: io.BufferedReader[io.FileIO],
    client_out: IO[bytes],
    answered_id: object,
) -> tuple[threading.Thread, threading.Thread]:
    """Make descriptors 0 and 1 pipes to threads that relay the client's channel."""
    into_sdk, sdk_stdin = os.pipe()
    sdk_stdout, out_of_sdk = os.pipe()
    os.dup2(into_sdk, 0)
    os.dup2(out_of_sdk, 1)
    os.close(into_sdk)
    os.close(out_of_sdk)
    inward = threading.Thread(
        target=_relay_in, args=(first, client_in, sdk_stdin), name="mcp-in", daemon=True
    )
    outward = threading.Thread(
        target=_relay_out,
        args=(os.fdopen(sdk_stdout, "rb"), client_out, answered_id),
        name="mcp-out",
        daemon=True,
    )
    inward.start()
    outward.start()
    return inward, outward


def _relay_in(first: bytes, client_in: io.BufferedReader[io.FileIO], sdk_stdin: int) -> None:
    with os.fdopen(sdk_stdin, "wb", buffering=0) as sdk:
        try:
            sdk.write(first)
            while chunk := client_in.read1(65536):
                sdk.write(chunk)
        except BrokenPipeError:
            log.info("the server stopped reading")


def _relay_out(sdk_out: IO[bytes], client_out: IO[bytes], answered_id: object) -> None:
    """Everything the SDK writes, but its answer to the `initialize` answered early."""
    with sdk_out:
        try:
            for line in sdk_out:
                if line == _END:
                    break
                if answered_id is not None and _answers(line, answered_id):
                    answered_id = None
                    continue
                client_out.write(line)
        except BrokenPipeError:
            log.info("the client closed the channel")


_END = b"\0the server ended\n"
"""Written after the SDK's last line; no JSON-RPC message starts with a NUL."""


def _answers(line: bytes, request_id: object) -> bool:
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return False
    if not isinstance(message, dict) or message.get("id") != request_id:
        return False
    if "error" in message:
        log.warning("the SDK refused the initialize answered early: %s", message["error"])
    return "result" in message or "error" in message
