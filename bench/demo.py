"""How long `shadowclone demo` takes, against the same GitHub work done by hand in the same run.

Run: `python bench/demo.py [--runs 3] [--quick]`

The demo runs a whole clone: a fake GitHub on loopback, serve with the fake launcher, the
scripted engine, a question answered, a branch pushed and a pull request opened. The floor
(`by hand`) is a fresh Python process that does that GitHub work directly: it starts the same
fake GitHub with the same repository and issue, reads the issue, clones, writes the file,
commits, pushes the branch and opens the pull request. Both are timed from outside their
process, so both pay an interpreter's start and a fake GitHub's; the GitHub work alone, timed
inside that process, is printed beside them. Goal: the demo at most 4x the floor.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shadowclone.run.github import GithubClient
from shadowclone_testing.fakes.github import FakeGitHub
from shadowclone_testing.timing import record

GOAL = 4.0
GIT = ["git", "-c", "user.name=You", "-c", "user.email=you@example.com"]


def by_hand(root: Path) -> float:
    """The GitHub work alone, in this process; returns how long it took."""
    with FakeGitHub(root / "github") as github:
        token = github.add_user("you", name="You", email="you@example.com")
        github.create_repo("you/hello", files={"README.md": "# hello\n"})
        number = github.create_issue("you/hello", author="you", title="Add a greeting")
        began = time.perf_counter()
        client = GithubClient(token, api_url=github.api_url)
        repository = client.repository("you/hello")
        client.issue("you/hello", number)
        url = f"{github.url}/you/hello.git".replace("://", f"://x-access-token:{token}@")
        work = root / "work"
        subprocess.run([*GIT, "clone", "-q", url, str(work)], check=True)
        (work / "GREETING.md").write_text("Welcome!\n")
        subprocess.run([*GIT, "checkout", "-q", "-b", "greeting"], cwd=work, check=True)
        subprocess.run([*GIT, "add", "GREETING.md"], cwd=work, check=True)
        subprocess.run([*GIT, "commit", "-q", "-m", "Add a greeting"], cwd=work, check=True)
        subprocess.run([*GIT, "push", "-q", "origin", "greeting"], cwd=work, check=True)
        client.open_pull_request(
            "you/hello",
            title="Add a greeting",
            body="A greeting for new contributors.",
            head="greeting",
            base=repository.default_branch,
            closes=number,
        )
        took = time.perf_counter() - began
        client.close()
        return took


def by_hand_process(root: Path) -> tuple[float, float]:
    """`by_hand` in a fresh interpreter, as the demo runs: (the whole process, the work)."""
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, __file__, "--by-hand", str(root)],
        check=True,
        capture_output=True,
        text=True,
    )
    return time.perf_counter() - began, float(done.stdout)


def demo(root: Path) -> float:
    env = {**os.environ, "SHADOWCLONE_HOME": str(root / "home")}
    began = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "from shadowclone.cli import entry; entry()", "demo"],
        env=env,
        stdout=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one run: it works, roughly")
    parser.add_argument("--by-hand", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.by_hand is not None:  # the floor's own process
        print(by_hand(args.by_hand))
        return 0
    runs = 1 if args.quick else args.runs
    demos, floors, works = [], [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            whole, work = by_hand_process(Path(tmp))
            floors.append(whole)
            works.append(work)
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp).chmod(0o711)  # the fake launcher run as root gives the engine a user
            demos.append(demo(Path(tmp)))
    took, floor = statistics.median(demos), statistics.median(floors)
    print(
        f"shadowclone demo          median {took:.2f} s  ({', '.join(f'{t:.2f}' for t in demos)})"
    )
    print(
        f"the same work by hand     median {floor:.2f} s  ({', '.join(f'{t:.2f}' for t in floors)})"
    )
    print(
        f"  of which the GitHub work median {statistics.median(works):.2f} s  "
        f"({', '.join(f'{t:.2f}' for t in works)})"
    )
    print(f"ratio: {took / floor:.1f}x (goal: at most {GOAL:.0f}x)")
    record("shadowclone demo", took, floor=floor, floor_is="the same by hand", at_most_ratio=GOAL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
