"""The h11-over-asyncio helpers both loopback servers use."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from shadowclone import httpio


async def _accepted_option(server_socket: socket.socket, connect: object) -> list[int]:
    seen: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        httpio.send_at_once(writer)
        sock = writer.get_extra_info("socket")
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        else:
            seen.append(-1)
        writer.close()

    if server_socket.family == socket.AF_UNIX:
        server = await asyncio.start_unix_server(handle, sock=server_socket)
    else:
        server = await asyncio.start_server(handle, sock=server_socket)
    async with server:
        reader, writer = await connect()  # type: ignore[operator]
        await reader.read()
        writer.close()
    return seen


def test_a_tcp_connection_sends_without_waiting_for_acks() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    address = listener.getsockname()
    seen = asyncio.run(_accepted_option(listener, lambda: asyncio.open_connection(*address)))
    assert seen == [1]


def test_a_unix_socket_connection_is_left_as_it_is(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen()
    seen = asyncio.run(_accepted_option(listener, lambda: asyncio.open_unix_connection(path)))
    assert seen == [-1]
