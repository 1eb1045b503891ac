"""How long `shadowclone demo` takes, against the same GitHub work done by hand in the same run.

Run: `python bench/demo.py [--runs 3] [--quick]`

The demo runs a whole clone: a fake GitHub on loopback, serve with the fake launcher, the
scripted engine, a question answered, a branch pushed and a pull request opened. The floor does
that GitHub work directly, in this process, against a fake GitHub of its own: read the issue,
clone, write the file, commit, push the branch, open the pull request. Goal: at most 4x.
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
from shadowclone_fake_launch.fakes.github import FakeGitHub

GOAL = 4.0
GIT = ["git", "-c", "user.name=You", "-c", "user.email=you@example.com"]


def by_hand(root: Path) -> float:
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
    args = parser.parse_args()
    runs = 1 if args.quick else args.runs
    demos, floors = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            floors.append(by_hand(Path(tmp)))
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp).chmod(0o711)  # the fake launcher run as root gives the engine a user
            demos.append(demo(Path(tmp)))
    took, floor = statistics.median(demos), statistics.median(floors)
    print(
        f"shadowclone demo          median {took:.2f} s  ({', '.join(f'{t:.2f}' for t in demos)})"
    )
    print(
        f"the same GitHub work      median {floor:.2f} s  ({', '.join(f'{t:.2f}' for t in floors)})"
    )
    print(f"ratio: {took / floor:.1f}x (goal: at most {GOAL:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
