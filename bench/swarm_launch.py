"""How long a clone on a Docker Swarm takes from `start` to its engine's first model request, on
a worker, against a floor measured in the same run: a bare `docker service create` of the same
image (restart condition none, on a worker) to its first output (goal: at most 1.5x the floor).

Run (root, after scripts/start-docker, scripts/build-image and scripts/install-registry):
`python bench/swarm_launch.py [--runs 3] [--quick]`.

It starts the testing kit's swarm (three docker-in-docker nodes and a registry), or uses one
already running (`--on`), pushes the clone image and pulls it on the workers (untimed), drains
the manager so that clones land on workers, then alternates: a bare service that prints one
line, timed from its create to that line in its logs; a clone of a fresh issue on the fake
GitHub, with serve (the swarm launcher) in this process and Claude Code in the clone against
the fake model server, timed from `start` to the first request the model server receives (the
clone then finishes before the next run).
The machines are noisy: the ratio of the medians is the figure to compare.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import docker
from docker.types import RestartPolicy
from shadowclone.config import HOME_VARIABLE, set_value
from shadowclone.config.schema import DEFAULT_IMAGE
from shadowclone_swarm_launch.images import Images
from shadowclone_swarm_launch.settings import SwarmSettings
from shadowclone_testing.containers import SETTINGS, a_world, clone_image, script
from shadowclone_testing.fakes.models import Text
from shadowclone_testing.serving import serving
from shadowclone_testing.swarm import Swarm, running_swarm
from shadowclone_testing.timing import record

GOAL = 1.5
WAIT_S = 300.0


def bare_service(manager: docker.DockerClient, reference: str, number: int) -> float:
    """A service of the image on a worker, from its create to its first output line."""
    services: Any = manager.services
    began = time.monotonic()
    service = services.create(
        reference,
        command=["echo", "ready"],
        name=f"bench-bare-{os.getpid()}-{number}",
        restart_policy=RestartPolicy(condition="none"),
        constraints=["node.role==worker"],
    )
    try:
        deadline = began + WAIT_S
        while b"ready" not in b"".join(service.logs(stdout=True)):
            if time.monotonic() > deadline:
                raise SystemExit("the bare service printed nothing")
            time.sleep(0.05)
        return time.monotonic() - began
    finally:
        service.remove()


def prepared(swarm: Swarm, image: str) -> str:
    """The image by digest in the swarm's registry, pulled on the workers; the manager drained."""
    host = docker.from_env(timeout=600)
    reference = Images(host, swarm.registry).reference(image)
    swarm.ready_for_clones(reference)
    return reference


def measure(
    swarm: SwarmSettings, image: str, reference: str, runs: int, root: Path
) -> tuple[list[float], list[float]]:
    """Each run's clone (start -> first model request) and bare service (create -> output)."""
    assert swarm.manager is not None and swarm.registry is not None
    os.environ[HOME_VARIABLE] = str(root / "home")
    address = swarm.host()
    manager = docker.DockerClient(base_url=swarm.manager, timeout=600)
    clones, bare = [], []
    with a_world(docker.from_env(timeout=600), image, address, root) as world:
        for key, value in (
            ("launcher", '"swarm"'),
            ("launchers.swarm.manager", f'"{swarm.manager}"'),
            ("launchers.swarm.registry", f'"{swarm.registry}"'),
            ("launchers.swarm.run_folders", '"shared"'),
            ("spares", "0"),
        ):
            set_value(world.paths, key, value)
        world.use("claude")
        with serving(world.node, SETTINGS):
            for number in range(runs + 1):  # the first, untimed: the cache and first pull
                bare_s = bare_service(manager, reference, number)
                issue = world.issue(f"Run {number}")
                script(world.model, Text("Done."))
                seen = len(world.model.model_requests())
                began = time.monotonic()
                clone_id = world.node.start(f"owner/app#{issue}").id
                world.model.wait_for_requests(seen + 1, timeout=WAIT_S)
                clone_s = time.monotonic() - began
                world.ended(clone_id)
                if number:
                    clones.append(clone_s)
                    bare.append(bare_s)
    return clones, bare


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--quick", action="store_true", help="one run (the tests' mode)")
    parser.add_argument(
        "--on",
        nargs=3,
        metavar=("MANAGER", "REGISTRY", "SHARED"),
        help="a swarm already running (the swarm tests'), its image pulled on the workers and "
        "its manager drained, whose nodes all see the folder SHARED at its path",
    )
    args = parser.parse_args(argv)
    runs = 1 if args.quick else args.runs
    host = docker.from_env(timeout=600)
    clone_image(host)
    with (
        tempfile.TemporaryDirectory(
            prefix="bench-swarm-", dir=args.on[2] if args.on else None
        ) as temp,
        contextlib.ExitStack() as stack,
    ):
        root = Path(temp)
        root.chmod(0o755)
        if args.on:
            swarm = SwarmSettings(manager=args.on[0], registry=args.on[1])
            reference = Images(host, args.on[1]).reference(args.image)
        else:
            kit = stack.enter_context(running_swarm(host, root / "registry", shared=root))
            reference = prepared(kit, args.image)
            swarm = SwarmSettings(manager=kit.manager_url, registry=kit.registry)
        clones, bare = measure(swarm, args.image, reference, runs, root / "world")
    clone, floor = statistics.median(clones), statistics.median(bare)
    print(f"image {args.image}, {runs} runs, on a swarm of three docker-in-docker nodes")
    shown = ", ".join(f"{c:.2f}" for c in clones)
    print(f"start -> first model request (a worker)  median {clone:.2f} s  ({shown})")
    shown = ", ".join(f"{b:.2f}" for b in bare)
    print(f"bare service create -> first output      median {floor:.2f} s  ({shown})")
    print(f"ratio: {clone / floor:.2f}x the floor (goal: at most {GOAL}x)")
    record(
        "claude on a worker: start -> first model request",
        clone,
        floor=floor,
        floor_is="docker service create to its first output",
        at_most_ratio=GOAL,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
