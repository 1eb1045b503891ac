"""What the model proxy adds to the time to the first streamed token.

Run: `python bench/proxy_latency.py [--runs 60] [--first-token-delay-ms 300] [--delayed-runs 20]`

Against one scripted fake model server (a streamed Messages API reply), in the same run and
alternating request by request, it measures the time from sending a streamed request to the
first `content_block_delta` event:
- direct: the client straight to the fake server;
- proxied: the same client through `python -m shadowclone.proxy` (its own process, as a
  sidecar or the run program's would be), which strips the key and injects the real one.
Twice: with the server answering at once (the proxy's whole overhead against a loopback
server's), and with a model think time before the first token (`--first-token-delay-ms`,
what an engine sees in practice). The machines are noisy: compare within one run (the ratio).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx2
from shadowclone.proxy import PLACEHOLDERS
from shadowclone_testing.fakes.models import FakeModelServer, ModelRequest, Reply, Text
from shadowclone_testing.timing import record

REQUEST = {
    "model": "bench",
    "max_tokens": 64,
    "stream": True,
    "messages": [{"role": "user", "content": "Say something short."}],
}
WARMUP = 5
REAL_KEY = "sk-ant-bench-real-key"


def thinking(delay_s: float) -> Callable[[ModelRequest], Reply]:
    """A rule: the model thinks for `delay_s` before its reply starts."""

    def rule(request: ModelRequest) -> Reply:
        if delay_s:
            time.sleep(delay_s)
        return Text("Hello from the bench, in a few words.")

    return rule


def first_token_s(client: httpx2.Client, base_url: str) -> float:
    """Seconds from sending the request to the first text delta, reading the stream to its end."""
    seen = b""
    first: float | None = None
    started = time.perf_counter()
    with client.stream("POST", base_url + "/v1/messages", json=REQUEST) as response:
        response.raise_for_status()
        for chunk in response.iter_raw():
            if first is None:
                seen += chunk
                if b"content_block_delta" in seen:
                    first = time.perf_counter() - started
    if first is None:
        raise SystemExit("the stream ended without a text delta")
    return first


def start_proxy(upstream: str, secrets: Path) -> tuple[subprocess.Popen[str], str]:
    command = [
        sys.executable, "-m", "shadowclone.proxy", "--upstream", upstream,
        "--login", "claude-api-key", "--secrets", str(secrets), "--port", "0",
    ]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    ready = process.stderr.readline()
    match = re.search(r"listening on (\S+),", ready)
    if not match:
        process.kill()
        raise SystemExit(f"the proxy did not start: {ready.strip()}")
    # Drain its per-request log lines, so the pipe never fills.
    threading.Thread(target=process.stderr.read, daemon=True).start()
    return process, match.group(1)


def measure(
    server: FakeModelServer, proxy_url: str, runs: int, delay_s: float
) -> tuple[list[float], list[float]]:
    server.rule = thinking(delay_s)
    headers = {"x-api-key": PLACEHOLDERS["anthropic_api_key"], "anthropic-version": "2023-06-01"}
    direct: list[float] = []
    proxied: list[float] = []
    with httpx2.Client(headers=headers, timeout=60) as client:
        for number in range(WARMUP + runs):
            # Alternate which goes first, so drift in the machine's load hits both alike.
            pair = [(direct, server.url), (proxied, proxy_url)]
            for found, url in pair if number % 2 else reversed(pair):
                seconds = first_token_s(client, url)
                if number >= WARMUP:
                    found.append(seconds)
    return direct, proxied


def describe(name: str, seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return (
        f"{name:<34} median {statistics.median(ordered) * 1000:8.2f} ms   "
        f"p90 {p90 * 1000:8.2f} ms   (n={len(ordered)})"
    )


def report(title: str, direct: list[float], proxied: list[float]) -> None:
    print(title)
    print(describe("  direct to the fake server", direct))
    print(describe("  through the model proxy", proxied))
    ratio = statistics.median(proxied) / statistics.median(direct)
    added = (statistics.median(proxied) - statistics.median(direct)) * 1000
    print(f"  time to first token: {ratio:.3f} x direct ({added:+.2f} ms median)")
    record(
        f"time to first token through the proxy, {title}",
        statistics.median(proxied),
        floor=statistics.median(direct),
        floor_is="direct to the fake server",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60, help="requests per path, no think time")
    parser.add_argument(
        "--first-token-delay-ms",
        type=float,
        default=300.0,
        help="the model's think time before its first token, for the second measurement",
    )
    parser.add_argument("--delayed-runs", type=int, default=20, help="requests per path, delayed")
    parser.add_argument("--quick", action="store_true", help="a few requests: it works, roughly")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.delayed_runs = 5, 3
    with (
        tempfile.TemporaryDirectory(prefix="shadowclone-bench-") as temp,
        FakeModelServer() as server,
    ):
        secrets = Path(temp) / "secrets.toml"
        secrets.write_text(f'anthropic_api_key = "{REAL_KEY}"\n')
        proxy, proxy_url = start_proxy(server.url, secrets)
        try:
            print(f"fake model server {server.url}, model proxy {proxy_url} (pid {proxy.pid})")
            report("no think time:", *measure(server, proxy_url, args.runs, 0.0))
            delay = args.first_token_delay_ms / 1000
            report(
                f"{args.first_token_delay_ms:g} ms think time before the first token:",
                *measure(server, proxy_url, args.delayed_runs, delay),
            )
        finally:
            proxy.terminate()
            proxy.wait(10)
        # Half the requests came through the proxy: exactly those carry the real key.
        real = [r for r in server.requests if r.headers.get("x-api-key") == REAL_KEY]
        if len(real) * 2 != len(server.requests):
            raise SystemExit(f"{len(real)} of {len(server.requests)} requests had the real key")


if __name__ == "__main__":
    main()
