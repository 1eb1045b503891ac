"""Benchmark: what reading a conversation costs a clone before its engine starts.

An issue with 100 comments (by the owner, a collaborator and a stranger) and a pull request
with 100 comments, 10 reviews, 20 review threads and a failing check, each read by
`run.context.gather` from the fake GitHub with a round trip of GitHub's latency added to every
request (`--latency-ms`, 50 by default), against the floor: the one read of the issue a clone
made before (its title and body), with the same latency, in the same run. Prints the requests
each makes and the median time, and the ratio to the floor. Goal: the issue within 4x of
the floor (its comments and the one permission read of each other author).

Run: `python bench/context.py [--quick] [--latency-ms N]`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from shadowclone.node.target import Target
from shadowclone.run.context import gather
from shadowclone.run.github import GithubClient
from shadowclone.run.plan import resolve
from shadowclone_testing.fakes.github import FakeGitHub
from shadowclone_testing.timing import record

REPO = "octo/app"


def timed(runs: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        work()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few runs")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()
    runs = 3 if args.quick else 15
    earlier = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    with tempfile.TemporaryDirectory() as tmp, FakeGitHub(Path(tmp)) as gh:
        token = gh.add_user("octo")
        for login in ("mate", "stranger"):
            gh.add_user(login)
        gh.create_repo(REPO, files={"a.py": "".join(f"x{n} = {n}\n" for n in range(60))})
        gh.grant(REPO, "mate", "write")
        issue = gh.create_issue(REPO, author="octo", title="Do it", body="Please.")
        pull = gh.create_pull_request(
            REPO, author="octo", branch="f", title="F",
            files={"a.py": "".join(f"y{n} = {n}\n" for n in range(60))},
        )  # fmt: skip
        for number in (issue, pull):
            for index in range(100):
                author = ("octo", "mate", "stranger")[index % 3]
                gh.add_comment(REPO, number, author=author, body=f"c{index}", created_at=earlier)
        for index in range(10):
            gh.add_review(REPO, pull, author="mate", body=f"review {index}", submitted_at=earlier)
        for index in range(20):
            gh.add_review_comment(
                REPO, pull, author="mate", path="a.py", line=index + 1, body=f"t{index}",
                created_at=earlier,
            )  # fmt: skip
        sha = gh.head_sha(REPO, pull)
        gh.add_check_run(REPO, sha, name="tests", conclusion="failure", log="FAILED\n" * 50)
        client = GithubClient(token, api_url=gh.api_url, seconds_between_writes=0)
        plans = {n: resolve(client, Target("octo", "app", n)) for n in (issue, pull)}
        gh.latency_s = args.latency_ms / 1000
        now = datetime.now(UTC)

        def requests_of(work: Callable[[], object]) -> int:
            before = len(gh.requests())
            work()
            return len(gh.requests()) - before

        def floor() -> object:
            return client.issue(REPO, issue)

        def read_issue() -> object:
            return gather(client, plans[issue], now)

        def read_pull() -> object:
            return gather(client, plans[pull], now)

        rows = []
        base = timed(runs, floor)
        for name, work in (("issue, 100 comments", read_issue), ("pull request", read_pull)):
            count = requests_of(work)
            took = timed(runs, work)
            rows.append((name, count, took))
        print(f"latency {args.latency_ms:.0f} ms a request; floor: the issue alone, 1 request, "
              f"{base * 1000:.0f} ms")  # fmt: skip
        for name, count, took in rows:
            print(f"{name:22} {count:3} requests  {took * 1000:6.0f} ms  {took / base:5.2f}x")
        print("goal: the issue within 4x of the floor")
        for name, _, took in rows:
            record(
                f"{name}, {args.latency_ms:.0f} ms a request",
                took,
                floor=base,
                floor_is="the issue alone, 1 request",
                at_most_ratio=4.0 if name.startswith("issue") else None,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
