"""`python -m shadowclone.proxy`: the model proxy as a process of its own (a sidecar).

    python -m shadowclone.proxy --upstream https://api.anthropic.com --login claude-api-key \
        --secrets /run/secrets.toml --port 8480

It prints one line to stderr when it is ready (`model proxy listening on URL ...`), logs one
line per request, and serves until SIGTERM or SIGINT. Bad input is one line and exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from shadowclone.errors import ShadowcloneError
from shadowclone.proxy.logins import credential_for_login
from shadowclone.proxy.secrets import Secrets
from shadowclone.proxy.server import ModelProxy

PROGRAM = "python -m shadowclone.proxy"
USAGE_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line, like every other error of this program."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{PROGRAM}: {message} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROGRAM, description="Credential-injecting proxy to a model provider.")
    parser.add_argument("--upstream", required=True, help="the provider's base URL")
    parser.add_argument("--login", required=True, help="the login: claude-api-key, ...")
    parser.add_argument("--secrets", required=True, type=Path, help="the TOML secrets file")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--socket", type=Path, help="listen on this Unix socket")
    where.add_argument("--port", type=int, help="listen on this TCP port (0: any free one)")
    parser.add_argument("--host", default="127.0.0.1", help="TCP address (default 127.0.0.1)")
    parser.add_argument("--outbound-proxy", help="HTTP(S) proxy URL to reach the provider")
    parser.add_argument(
        "--login-state", type=Path, help="the login's state folder (a ChatGPT plan's tokens)"
    )
    parser.add_argument("--token-url", help="where the login renews its tokens")
    return parser


async def _serve(proxy: ModelProxy, socket: Path | None, host: str, port: int | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)
    async with proxy:
        if socket is not None:
            await proxy.start_unix(socket)
        else:
            await proxy.start_tcp(host, port or 0)
        proxy.prepare_client()  # nothing else to do meanwhile: ready for the first request
        print(
            f"model proxy listening on {proxy.listening_on}, forwarding to {proxy.upstream_base}",
            file=sys.stderr,
            flush=True,
        )
        await stop.wait()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.port is not None and not 0 <= args.port <= 65535:
        print(f"{PROGRAM}: --port {args.port} is not a TCP port", file=sys.stderr)
        return USAGE_ERROR
    try:
        secrets = Secrets.read(args.secrets)
        credential = credential_for_login(
            args.login,
            secrets.values,
            state_dir=args.login_state,
            token_url=args.token_url,
            outbound_proxy=args.outbound_proxy,
        )
        proxy = ModelProxy(args.upstream, credential, outbound_proxy=args.outbound_proxy)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        # The proxy logs each request itself; httpx2 would log the whole URL, query included.
        logging.getLogger("httpx2").setLevel(logging.WARNING)
        asyncio.run(_serve(proxy, args.socket, args.host, args.port))
    except ShadowcloneError as error:
        print(f"{PROGRAM}: {error}", file=sys.stderr)
        return USAGE_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
