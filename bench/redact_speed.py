"""How fast `redact_secrets` is on a long text with many secrets, against a plain `str.replace`
of the same secrets as the baseline (the machines are noisy: read the ratio).

    .venv/bin/python bench/redact_speed.py [--secrets 50] [--megabytes 1]
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
import time
from collections.abc import Callable

from shadowclone.redact import Redactor
from shadowclone_testing.timing import record


def timed(work: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--secrets", type=int, default=50)
    parser.add_argument("--megabytes", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true", help="a little text: it works, roughly")
    arguments = parser.parse_args()
    if arguments.quick:
        arguments.secrets, arguments.megabytes = 10, 0.05

    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits

    def token(size: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(size))

    secrets = [token(40) for _ in range(arguments.secrets)]
    words = [token(rng.randint(1, 10)).lower() for _ in range(2000)]
    words += ["50%", "\\n", "path/to", '{"a": 1}', "https://example.com/x?y=1"]
    size = int(arguments.megabytes * 1_000_000)
    clean = ""
    while len(clean) < size:
        clean += " ".join(rng.choice(words) for _ in range(10_000)) + "\n"
    dirty = clean[: size // 2] + secrets[0] + clean[size // 2 :] + secrets[-1][:20] + "\n  "
    dirty += secrets[-1][20:]
    line = "progress: " + " ".join(rng.choice(words) for _ in range(30))

    started = time.perf_counter()
    redactor = Redactor(secrets)
    built = time.perf_counter() - started

    def replace_all() -> str:
        text = clean
        for secret in secrets:
            text = text.replace(secret, "[redacted]")
        return text

    baseline = timed(replace_all)
    results = {
        "clean text": timed(lambda: redactor(clean)),
        "text with two secrets": timed(lambda: redactor(dirty)),
    }
    per_line = timed(lambda: [redactor(line) for _ in range(1000)]) / 1000
    print(f"{arguments.secrets} secrets, {len(clean) / 1e6:.2f} MB of text")
    print(f"building the redactor: {built * 1000:.1f} ms")
    print(f"baseline str.replace of every secret: {baseline * 1000:.1f} ms")
    for name, seconds in results.items():
        print(f"{name}: {seconds * 1000:.1f} ms ({seconds / baseline:.0f}x the baseline)")
    print(f"one progress line of {len(line)} characters: {per_line * 1e6:.0f} us")
    for name, seconds in results.items():
        record(f"redacting {name}", seconds, floor=baseline, floor_is="str.replace of each")


if __name__ == "__main__":
    main()
