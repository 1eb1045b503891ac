"""The egress proxy of a network-off clone: forwards only to the model provider's API.

A network-off clone has no network but loopback. This proxy runs in a container of its own on
Docker's default bridge and listens on a Unix socket in a volume it shares with the clone; a
relay in the clone (image/clone-entry) carries the clone's proxy connections to it, so this is
the clone's only way out. (An internal Docker network would not do: from one, a container
still reaches every address of the host itself.)

It takes the standard proxy requests a client sends when given a proxy URL: CONNECT host:port
(a TLS tunnel, or any tunnel) and absolute-form plain HTTP (`GET http://host:port/path`). Each
must carry the clone's egress token as Basic proxy credentials (anything else gets 407): the
clone's run program holds the token, its engine does not. A request is forwarded only if
host:port is an allowed one; everything else gets 403 and is logged.

The launcher runs this file's source with the clone image's Python (`python3 -c SOURCE --allow
HOST[:PORT] --socket PATH`, or `--listen HOST:PORT` where the swarm launcher runs it as a service
on the clone's internal network), so it uses the standard library only and the image need not
contain this plugin.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import contextlib
import hmac
import logging
import os
import sys
from collections.abc import Sequence
from urllib.parse import urlsplit

log = logging.getLogger("shadowclone.egress")

HEAD_LIMIT = 64 * 1024
CONNECT_TIMEOUT_S = 20.0
READY_LINE = "egress proxy listening"
"""Logged once the proxy accepts connections; the launcher waits for it."""
TOKEN_VARIABLE = "SHADOWCLONE_EGRESS_TOKEN"
"""The variable the launcher hands the clone's egress token in."""
HOP_BY_HOP = {b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive"}


def parse_allowed(spec: str) -> tuple[str, tuple[int, ...]]:
    """`host:port`, or `host` alone for the standard HTTPS and HTTP ports."""
    host, _, port = spec.rpartition(":") if spec.count(":") == 1 else (spec, "", "")
    if not host:
        raise ValueError(f"{spec!r} is not host[:port]")
    return host.lower(), (int(port),) if port else (443, 80)


def split_target(target: str, default_port: int) -> tuple[str, int] | None:
    host, sep, port = target.rpartition(":")
    if not sep:
        return target.lower(), default_port
    if not port.isdigit() or not host:
        return None
    return host.strip("[]").lower(), int(port)


def proxy_token(head: bytes) -> str | None:
    """The password of the Basic Proxy-Authorization header of a request head, if any."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() != b"proxy-authorization":
            continue
        scheme, _, encoded = value.strip().partition(b" ")
        if scheme.lower() != b"basic":
            return None
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2]
    return None


class EgressProxy:
    def __init__(self, allowed: Sequence[str], token: str) -> None:
        if not token:
            raise ValueError("an egress proxy needs a token")
        self.allowed = [parse_allowed(item) for item in allowed]
        self.token = token.encode()

    def authorized(self, head: bytes) -> bool:
        given = proxy_token(head)
        return given is not None and hmac.compare_digest(given.encode(), self.token)

    def permits(self, host: str, port: int) -> bool:
        return any(host == h and port in ports for h, ports in self.allowed)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        request_line, _, rest = head.partition(b"\r\n")
        parts = request_line.decode("latin-1").split(" ")
        if len(parts) != 3:
            await self._refuse(writer, 400, "Bad Request", request_line.decode("latin-1"))
            return
        method, target, version = parts
        if not self.authorized(head):
            await self._refuse(writer, 407, "Proxy Authentication Required", f"{method} {target}")
            return
        if method == "CONNECT":
            where = split_target(target, 443)
            if where is None or not self.permits(*where):
                await self._refuse(writer, 403, "Forbidden", f"CONNECT {target}")
                return
            upstream = await self._open(writer, *where)
            if upstream is None:
                return
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            log.info("tunnel to %s:%s", *where)
            await self._pipe(reader, writer, *upstream)
            return
        url = urlsplit(target)
        port = url.port or 80
        if url.scheme != "http" or not url.hostname or not self.permits(url.hostname, port):
            await self._refuse(writer, 403, "Forbidden", f"{method} {target}")
            return
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        headers = [
            line
            for line in rest.split(b"\r\n")
            if line and line.split(b":", 1)[0].strip().lower() not in HOP_BY_HOP
        ]
        forwarded = b"\r\n".join(
            [f"{method} {path} {version}".encode("latin-1"), *headers, b"Connection: close"]
        )
        upstream = await self._open(writer, url.hostname.lower(), port)
        if upstream is None:
            return
        log.info("%s http://%s:%s%s", method, url.hostname, port, path)
        upstream[1].write(forwarded + b"\r\n\r\n")
        await self._pipe(reader, writer, *upstream)

    async def _open(
        self, writer: asyncio.StreamWriter, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        try:
            return await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as error:
            await self._refuse(writer, 502, "Bad Gateway", f"{host}:{port}: {error}")
            return None

    async def _refuse(
        self, writer: asyncio.StreamWriter, code: int, reason: str, what: str
    ) -> None:
        log.warning("refused %s (%s)", what, code)
        body = f"shadowclone egress proxy: {reason.lower()}: {what}\n".encode()
        challenge = 'Proxy-Authenticate: Basic realm="shadowclone"\r\n' if code == 407 else ""
        with contextlib.suppress(ConnectionError):
            writer.write(
                f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\n{challenge}"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        writer.close()

    async def _pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        async def copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):  # either side may hang up at any time
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            with contextlib.suppress(OSError):
                if sink.can_write_eof():
                    sink.write_eof()

        await asyncio.gather(copy(reader, up_writer), copy(up_reader, writer))
        for each in (writer, up_writer):
            each.close()


async def serve(
    allowed: Sequence[str], socket_path: str | None, token: str, listen: str | None = None
) -> None:
    """On the Unix socket `socket_path`, or on `listen` (HOST:PORT: a swarm's clone reaches its
    proxy on the clone's own internal network, which nothing else is on)."""
    proxy = EgressProxy(allowed, token)
    if listen is not None:
        host, _, port = listen.rpartition(":")
        server = await asyncio.start_server(proxy.handle, host, int(port), limit=HEAD_LIMIT)
        where = listen
    else:
        assert socket_path is not None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)  # left by an earlier proxy of this clone
        server = await asyncio.start_unix_server(proxy.handle, socket_path, limit=HEAD_LIMIT)
        os.chmod(socket_path, 0o666)  # the clone may run as any uid
        where = socket_path
    log.info("%s on %s; allowed: %s", READY_LINE, where, ", ".join(allowed))
    async with server:
        await server.serve_forever()


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="shadowclone-egress")
    parser.add_argument("--allow", action="append", required=True, help="host[:port]")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--socket", help="the Unix socket to listen on")
    where.add_argument("--listen", help="HOST:PORT to listen on instead")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    token = os.environ.pop(TOKEN_VARIABLE, "")
    if not token:
        parser.error(f"{TOKEN_VARIABLE} is not set: the proxy lets nobody through without it")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.allow, args.socket, token, args.listen))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
