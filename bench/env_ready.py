"""How long a clone of a repository with its own environment takes to its engine's first model
request, against a repository with none, in the same run (goal: warm within 1.2x).

Run (root, after scripts/start-docker and scripts/build-image):
`python bench/env_ready.py [--runs 3] [--quick]`

Two repositories on a fake GitHub: one declares no environment, the other an environment on
the same Debian base the clone image uses, with a setup command and a variable; a third a dev
container whose `onCreateCommand` installs its dependencies (a few seconds and a folder of
files) and whose `postCreateCommand` uses them. Serve runs in this process with the Docker
launcher and the real Claude Code against the scripted fake model server. Figures: `start` ->
the first model request for the plain repository; for the second, cold (serve builds the
environment's image before the launch, the clone `preparing`), warm (the image there) and
warm with caches (its package caches already used); for the dev container, from its prebuilt
image (made by serve in the background after its first clone), where each clone copies in
what `onCreateCommand` made and runs `postCreateCommand` only.
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
from shadowclone.config import (
    HOME_VARIABLE,
    Paths,
    default_paths,
    init_config,
    load_config,
    set_value,
)
from shadowclone.config.schema import DEFAULT_IMAGE
from shadowclone.environment.declared import TOML_PATH, cache_volumes, declared
from shadowclone.environment.devcontainer import READING_PATH, read_configuration
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import SetupRecord
from shadowclone.node.setups import files_in, keep_environment, write_setup
from shadowclone.plugin.node import LocalNode
from shadowclone.serve.loop import ServeSettings, serve_clones
from shadowclone_docker_launch.commands import describe
from shadowclone_docker_launch.prebuilds import LABEL_PREBUILT_OF
from shadowclone_testing.fakes.github import FakeGitHub
from shadowclone_testing.fakes.models import FakeModelServer
from shadowclone_testing.timing import record

WAIT_S = 120.0
SETTLE_S = 4.0
GOAL = 1.2
BASE = "shadowclone-base:bookworm"
ENVIRONMENT = f'image = "{BASE}"\nsetup = ["echo ready > /etc/env-ready"]\n[env]\nREADY = "1"\n'
DEVCONTAINER = json.dumps(
    {
        "image": BASE,
        "onCreateCommand": "sleep 3 && mkdir -p deps"
        " && for i in $(seq 1 500); do echo $i > deps/p$i.js; done",
        "postCreateCommand": "test -f deps/p500.js",
    }
)
DEVCONTAINER_PATH = ".devcontainer/devcontainer.json"
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


def keep_devcontainer(paths: Paths, repo: str, kept: Path) -> None:
    """What setup keeps of a dev container: the file, the reference CLI's reading beside it,
    and the record with its lifecycle commands."""
    (kept / ".devcontainer").mkdir(parents=True)
    (kept / DEVCONTAINER_PATH).write_text(DEVCONTAINER)
    reading = read_configuration(DEVCONTAINER, DEVCONTAINER_PATH, repo.partition("/")[2])
    kept_reading = {"source": DEVCONTAINER_PATH, "found": [DEVCONTAINER_PATH], **reading}
    (kept / READING_PATH).parent.mkdir(parents=True)
    (kept / READING_PATH).write_text(json.dumps(kept_reading))
    keep_environment(paths, repo, kept)
    environment = declared(files_in(kept))
    assert environment is not None
    record = SetupRecord(
        repo=repo,
        config_version=1,
        engine="claude",
        login="claude-api-key",
        environment=DEVCONTAINER_PATH,
        lifecycle=environment.lifecycle,
    )
    write_setup(paths, record)


def wait_for_prebuilt(client: docker.DockerClient, tag: str) -> None:
    deadline = time.monotonic() + 10 * WAIT_S
    labels = {"label": f"{LABEL_PREBUILT_OF}={tag}"}
    while not client.images.list(filters=labels):
        if time.monotonic() > deadline:
            raise SystemExit(f"no prebuilt image of {tag} was made")
        time.sleep(0.5)


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
            repos = {
                "plain": "owner/plain",
                "environment": f"owner/env-{os.getpid()}",
                "prebuilt": f"owner/pre-{os.getpid()}",
            }
            github.create_repo(repos["plain"], files={"README.md": "# plain\n"})
            github.create_repo(
                repos["environment"], files={"README.md": "# env\n", TOML_PATH: ENVIRONMENT}
            )
            github.create_repo(
                repos["prebuilt"], files={"README.md": "# pre\n", DEVCONTAINER_PATH: DEVCONTAINER}
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
            keep_devcontainer(paths, repos["prebuilt"], root / "kept-pre")
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
                # As an owner's clones come, seconds apart: serve has made the spare container
                # of every kind the last clones were of (one after another, about 1 s each).
                time.sleep(SETTLE_S)
                seen = len(model.model_requests())
                began = time.monotonic()
                clone_id = node.start(f"{repo}#{number}").id
                model.wait_for_requests(seen + 1, timeout=WAIT_S)
                took = time.monotonic() - began
                deadline = time.monotonic() + WAIT_S
                while node.get(clone_id).state.active and time.monotonic() < deadline:
                    time.sleep(0.05)
                if os.environ.get("BENCH_SHOW"):
                    folder = paths.clones_dir / clone_id
                    for line in RunFolder(folder).progress()[0]:
                        print(f"  {line.at:%S.%f} {line.step} {line.text[:90]}")
                return took

            figures: dict[str, list[float]] = {
                name: [] for name in ("plain", "cold", "warm", "caches", "precold", "prebuilt")
            }
            tag = pre_tag = ""
            try:
                first_request(repos["plain"])  # the page cache warm for both
                os.environ[HOME_VARIABLE] = str(root / "home")  # what `describe` reads
                tag = describe(repos["environment"])["tag"]
                figures["cold"].append(first_request(repos["environment"]))  # serve builds it
                pre_tag = describe(repos["prebuilt"])["tag"]
                figures["precold"].append(first_request(repos["prebuilt"]))  # runs onCreate
                wait_for_prebuilt(client, pre_tag)
                for _ in range(runs):
                    figures["plain"].append(first_request(repos["plain"]))
                    figures["warm"].append(first_request(repos["environment"]))
                    figures["caches"].append(first_request(repos["environment"]))
                    figures["prebuilt"].append(first_request(repos["prebuilt"]))
            finally:
                stop.set()
                serve.join(WAIT_S)
                made = [f"{t}{end}" for t in (tag, pre_tag) if t for end in ("", "-clone")]
                if pre_tag:
                    labels = {"label": f"{LABEL_PREBUILT_OF}={pre_tag}"}
                    made = [str(i.id) for i in client.images.list(filters=labels)] + made
                for image in made:
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
    shown("dev container, first clone: runs onCreateCommand", figures["precold"])
    prebuilt = shown("dev container, from its prebuilt image", figures["prebuilt"])
    print(
        f"ratio: warm {warm / plain:.2f}x, with caches {caches / plain:.2f}x, "
        f"prebuilt {prebuilt / plain:.2f}x (goal: {GOAL}x)"
    )
    for name, took in (
        ("environment, warm", warm),
        ("environment, warm with caches", caches),
        ("dev container, from its prebuilt image", prebuilt),
    ):
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
