"""HTTP/1.1 over asyncio streams with h11, as the model proxy and the ask server both serve it:
sending at once, the next event of a connection, and a polite close; and a `Retry-After`
read as RFC 9110 says (seconds, or an HTTP date), for every client of ours."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import math
import socket
import time
from collections.abc import Callable
from datetime import UTC

import h11

READ_SIZE = 64 * 1024
LINGER_S = 2.0


def send_at_once(writer: asyncio.StreamWriter) -> None:
    """Turn Nagle's algorithm off on a TCP connection: a response goes out in several writes,
    and each after the first would wait for the client's delayed ACK (about 40 ms)."""
    sock = writer.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def next_event(
    http: h11.Connection, reader: asyncio.StreamReader
) -> h11.Event | type[h11.PAUSED]:
    """The connection's next event, reading from `reader` as h11 needs more."""
    while True:
        event = http.next_event()
        if event is not h11.NEED_DATA:
            return event  # type: ignore[return-value]  # h11's types miss the narrowing
        http.receive_data(await reader.read(READ_SIZE))


async def linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Half-close, then read and drop what the peer still sends for a moment: closing with
    unread input would reset the connection, and the peer might lose our answer."""
    with contextlib.suppress(OSError, TimeoutError):
        if writer.can_write_eof():
            writer.write_eof()
        async with asyncio.timeout(LINGER_S):
            while await reader.read(READ_SIZE):
                pass


def retry_after_s(value: str, clock: Callable[[], float] = time.time) -> float | None:
    """The seconds a `Retry-After` value asks to wait (delay-seconds, or an HTTP date against
    `clock`, a past date being 0); None when it is neither, or asks more than anyone would."""
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - clock()
    if math.isnan(seconds) or seconds > 1e7:  # no time a clone would wait
        return None
    return max(0.0, seconds)
