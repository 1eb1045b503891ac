"""How long a clone of a repository with its own environment takes to its engine's first model
request, against a repository with none, in the same run (goal: warm within 1.2x).

Run (root, after scripts/start-docker and scripts/build-image):
`python bench/env_ready.py [--runs 3] [--quick]`

Two repositories on a fake GitHub: one declares no environment, the other an environment on
the same Debian base the clone image uses, with a setup command and a variable. Serve runs
in this process with the Docker launcher and the real Claude Code against the scripted fake
model server. Figures: `start` -> the first model request for the plain repository; for the
other, cold (serve builds the environment's image before the launch, the clone `preparing`),
warm (the image there) and warm with caches (its package caches already used).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import docker
from shadowclone.config import HOME_VARIABLE, default_paths, init_config, load_config, set_value
from shadowclone.config.schema import DEFAULT_IMAGE
from shadowclone.environment.declared import TOML_PATH, cache_volumes
from shadowclone.node.schemas import SetupRecord
from shadowclone.node.setups import keep_environment, write_setup
from shadowclone.plugin.node import LocalNode
from shadowclone.serve.loop import ServeSettings, serve_clones
from shadowclone_docker_launch.commands import describe
from shadowclone_testing.fakes.github import FakeGitHub
from shadowclone_testing.fakes.models import FakeModelServer
from shadowclone_testing.timing import record

WAIT_S = 120.0
GOAL = 1.2
BASE = "shadowclone-base:bookworm"
ENVIRONMENT = f'image = "{BASE}"\nsetup = ["echo ready > /etc/env-ready"]\n[env]\nREADY = "1"\n'
AUTHORITIES = sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))


def host_address(client: docker.DockerClient, image: str) -> str:
    output: bytes = client.containers.run(
        image,
        entrypoint=["getent", "ahostsv4", "host.docker.internal"],
        command=[],
        extra_hosts={"host.docker.internal": "host-gateway"},
        remove=True,
    )
    return output.decode().split()[0]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one run each: it works, roughly")
    args = parser.parse_args(argv)
    runs = 1 if args.quick else args.runs
    client = docker.from_env()
    address = host_address(client, DEFAULT_IMAGE)
    with tempfile.TemporaryDirectory(prefix="bench-env-") as temp:
        root = Path(temp)
        paths = default_paths({HOME_VARIABLE: str(root / "home")})
        init_config(paths)
        with (
            FakeGitHub(root / "github", host=address) as github,
            FakeModelServer([], final_text="Done.", host=address) as model,
        ):
            for key, value in (
                ("launcher", '"docker"'),
                ("image", f'"{DEFAULT_IMAGE}"'),
                ("engine", '"claude"'),
                ("providers.claude.base_url", f'"{model.url_for(address)}"'),
                ("github.url", f'"{github.url}"'),
                ("github.api_url", f'"{github.api_url}"'),
                ("daily_clones", "1000"),
                ("parallel_clones", "1"),
                ("limits.fix_rounds", "0"),
                ("environment.ca_certs", json.dumps([str(a) for a in AUTHORITIES])),
            ):
                set_value(paths, key, value)
            token = github.add_user("owner", name="The Owner", email="owner@example.com")
            # A repository of its own per build: a cold build is cold (its tag is new).
            repos = {"plain": "owner/plain", "environment": f"owner/env-{os.getpid()}"}
            github.create_repo(repos["plain"], files={"README.md": "# plain\n"})
            github.create_repo(
                repos["environment"], files={"README.md": "# env\n", TOML_PATH: ENVIRONMENT}
            )
            paths.secrets_file.write_text(
                f'github_token = "{token}"\nanthropic_api_key = "sk-ant-bench"\n'
            )
            paths.secrets_file.chmod(0o600)
            for repo in repos.values():
                write_setup(
                    paths,
                    SetupRecord(
                        repo=repo, config_version=1, engine="claude", login="claude-api-key"
                    ),
                )
            kept = root / "kept"
            (kept / ".shadowclone").mkdir(parents=True)
            (kept / TOML_PATH).write_text(ENVIRONMENT)
            keep_environment(paths, repos["environment"], kept)
            setup = SetupRecord(
                repo=repos["environment"],
                config_version=1,
                engine="claude",
                login="claude-api-key",
                environment=TOML_PATH,
            )
            write_setup(paths, setup)
            os.environ[HOME_VARIABLE] = str(root / "home")  # the Docker launcher's config
            config, resolved = load_config(paths)
            node = LocalNode(config, resolved)
            stop, ready = threading.Event(), threading.Event()
            serve = threading.Thread(
                target=serve_clones,
                args=(config, resolved),
                kwargs={
                    "stop_event": stop,
                    "ready": ready,
                    "settings": ServeSettings(status_poll_s=0.2, rescan_s=1.0),
                },
                daemon=True,
            )
            serve.start()
            ready.wait(WAIT_S)

            def first_request(repo: str) -> float:
                number = github.create_issue(repo, author="owner", title="Bench")
                seen = len(model.model_requests())
                began = time.monotonic()
                clone_id = node.start(f"{repo}#{number}").id
                model.wait_for_requests(seen + 1, timeout=WAIT_S)
                took = time.monotonic() - began
                deadline = time.monotonic() + WAIT_S
                while node.get(clone_id).state.active and time.monotonic() < deadline:
                    time.sleep(0.05)
                return took

            figures: dict[str, list[float]] = {"plain": [], "cold": [], "warm": [], "caches": []}
            tag = ""
            try:
                first_request(repos["plain"])  # the page cache warm for both
                os.environ[HOME_VARIABLE] = str(root / "home")  # what `describe` reads
                tag = describe(repos["environment"])["tag"]
                figures["cold"].append(first_request(repos["environment"]))  # serve builds it
                for _ in range(runs):
                    figures["plain"].append(first_request(repos["plain"]))
                    figures["warm"].append(first_request(repos["environment"]))
                    figures["caches"].append(first_request(repos["environment"]))
            finally:
                stop.set()
                serve.join(WAIT_S)
                for image in (tag, f"{tag}-clone") if tag else ():
                    try:
                        client.images.remove(image, noprune=False)
                    except docker.errors.DockerException:
                        continue
                for repo in repos.values():
                    for volume in cache_volumes(repo, ()):
                        try:
                            client.volumes.get(volume).remove(force=True)
                        except docker.errors.DockerException:
                            continue

    def shown(name: str, times: list[float]) -> float:
        median = statistics.median(times)
        print(f"{name:<44} median {median:.2f} s  ({', '.join(f'{t:.2f}' for t in times)})")
        return median

    print(f"engine claude, image {DEFAULT_IMAGE}, {runs} runs")
    plain = shown("no environment: start -> first request", figures["plain"])
    shown("environment, cold: built by serve, start -> request", figures["cold"])
    warm = shown("environment, warm: start -> first request", figures["warm"])
    caches = shown("environment, warm with caches", figures["caches"])
    print(f"ratio: warm {warm / plain:.2f}x, with caches {caches / plain:.2f}x (goal: {GOAL}x)")
    for name, took in (("environment, warm", warm), ("environment, warm with caches", caches)):
        record(
            f"{name}: start -> first request",
            took,
            floor=plain,
            floor_is="no environment",
            at_most_ratio=GOAL,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
