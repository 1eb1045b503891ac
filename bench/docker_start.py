"""How long a clone in Docker takes from `start` to its engine's first model request, against a
floor measured in the same run: a bare `docker run --rm` of the same image plus the bare engine
CLI started on the host to its first model request (goal: at most 1.3x the floor).

Run (root, after scripts/start-docker and scripts/build-image):
`python bench/docker_start.py [--runs 5] [--engine claude|codex|both]` (both by default);
`--github-latency-ms N` answers each fake GitHub request N ms late, as a GitHub across the
internet would (the floor has no GitHub: compare two images at the same latency with it).
`--files N` gives the repository N files in 50 folders (one README by default); `--repository
PATH` serves that bare repository instead, and `--cold` empties the repository's cache before
each run (bench/repo_start.py runs these).
`--against IMAGE` also starts each run's clone on IMAGE, the two side by side in alternating
order (an even number of runs: each image goes first in half of them), and prints the median
of the runs' differences: a change smaller than the machine's drift between runs still shows.

After one untimed clone on each image, each run starts a clone on a fresh issue of a fake
GitHub, with `serve` (Docker launcher) in this process and the real engine in the clone image
against the scripted fake model server, and times `start` -> the first request the model
server receives; the model then answers "Done." and the clone finishes before the next run.
Between runs, `docker run --rm IMAGE true` is timed the same number of times. The machines are
noisy: the ratio of the medians is the figure to compare.

serve keeps a spare of the clone's kind (the config's `spares`): each run starts once one
waits, its container running, as it does when clones are not seconds apart (serve starts it
a little after each launch; a start meeting Docker at that work is slower). `--spares 0`
measures clones that each get a container at their launch.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import attrs
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
from shadowclone.node import spares
from shadowclone.node.runfolder import RunFolder, run_folders
from shadowclone.node.schemas import Request, SetupRecord
from shadowclone.node.setups import write_setup
from shadowclone.node.spares import spare_kind
from shadowclone.plugin.node import LocalNode
from shadowclone.run.repocache import MIRROR
from shadowclone.serve.loop import ServeSettings, serve_clones
from shadowclone_docker_launch.launcher import LABEL_SPARE
from shadowclone_testing.fakes.github import FakeGitHub
from shadowclone_testing.fakes.models import FakeModelServer
from shadowclone_testing.timing import record

WAIT_S = 60.0
LOGINS = {"claude": "claude-api-key", "codex": "openai-api-key"}
ENGINES_BIN = Path(__file__).resolve().parents[1] / "tools" / "engines" / "node_modules" / ".bin"
GOAL = 1.3


def bare_engine(engine: str, model: FakeModelServer, address: str, root: Path) -> float:
    """The engine CLI alone, on the host: from its start to its first model request."""
    home = Path(tempfile.mkdtemp(dir=root))
    env = {**os.environ, "HOME": str(home)}
    if engine == "claude":
        argv = [str(ENGINES_BIN / "claude"), "-p", "hi", "--output-format", "stream-json"]
        argv.append("--verbose")
        env.update(
            ANTHROPIC_BASE_URL=model.url_for(address),
            ANTHROPIC_API_KEY="sk-ant-bench",
            CLAUDE_CONFIG_DIR=str(home / "claude"),
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
            IS_SANDBOX="1",
        )
    else:
        codex_home = home / "codex"
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(
            'model = "shadowclone-fake-model"\nmodel_provider = "bench"\n'
            "[model_providers.bench]\n"
            f'name = "bench"\nbase_url = "{model.url_for(address)}/v1"\nwire_api = "responses"\n'
            'env_key = "OPENAI_API_KEY"\n'
        )
        env.update(CODEX_HOME=str(codex_home), OPENAI_API_KEY="sk-bench")
        argv = [str(ENGINES_BIN / "codex"), "exec", "--skip-git-repo-check", "hi"]
    seen = len(model.model_requests())
    began = time.monotonic()
    process = subprocess.Popen(
        argv,
        env=env,
        cwd=home,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # `codex` is node starting the native program: both end
    )
    try:
        model.wait_for_requests(seen + 1, timeout=WAIT_S)
        return time.monotonic() - began
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def host_address(client: docker.DockerClient, image: str) -> str:
    """Where host.docker.internal leads from a container: the fakes listen there."""
    output: bytes = client.containers.run(
        image,
        entrypoint=["getent", "ahostsv4", "host.docker.internal"],
        command=[],
        extra_hosts={"host.docker.internal": "host-gateway"},
        remove=True,
    )
    return output.decode().split()[0]


def bare_run(image: str) -> float:
    began = time.monotonic()
    subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "true", image],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.monotonic() - began


def wait(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.02)


@attrs.frozen
class Measured:
    engine: str
    clone_times: dict[str, list[float]]
    """By image: each run's start -> first model request."""
    bare_times: list[float]
    engine_times: list[float]
    steps: list[str]


def measure(
    engine: str,
    runs: int,
    images: list[str],
    address: str,
    github_latency_s: float = 0.0,
    files: int = 1,
    spares: int | None = None,
    repository: Path | None = None,
    cold: bool = False,
) -> Measured:
    """`runs` rounds of a clone of `engine` in Docker under serve on each of `images` (their
    order alternating), each round beside a bare `docker run` of the first image and a bare
    start of the engine CLI; the fake GitHub answers each request `github_latency_s` late."""
    image = images[0]
    with tempfile.TemporaryDirectory(prefix="bench-docker-") as temp:
        root = Path(temp)
        paths = default_paths({HOME_VARIABLE: str(root / "home")})
        init_config(paths)
        with (
            FakeGitHub(root / "github", host=address) as github,
            FakeModelServer([], final_text="Done.", host=address) as model,
        ):
            github.latency_s = github_latency_s
            base_url = model.url_for(address) + ("/v1" if engine == "codex" else "")
            for key, value in (
                ("launcher", '"docker"'),
                ("image", f'"{image}"'),
                ("engine", f'"{engine}"'),
                (f"providers.{engine}.base_url", f'"{base_url}"'),
                ("providers.codex.model", '"shadowclone-fake-model"'),
                ("github.url", f'"{github.url}"'),
                ("github.api_url", f'"{github.api_url}"'),
                ("daily_clones", "1000"),
                ("parallel_clones", "1"),
                *([("spares", str(spares))] if spares is not None else []),
            ):
                set_value(paths, key, value)
            token = github.add_user("owner", name="The Owner", email="owner@example.com")
            if repository is not None:
                github.create_repo("owner/app", from_bare=repository)
            else:
                tree = {"README.md": "# app\n"}
                tree.update({f"src/m{n % 50}/f{n}.py": f"N = {n}\n" for n in range(files - 1)})
                github.create_repo("owner/app", files=tree)
            paths.secrets_file.write_text(
                f'github_token = "{token}"\nanthropic_api_key = "sk-ant-bench"\n'
                'openai_api_key = "sk-bench"\n'
            )
            paths.secrets_file.chmod(0o600)
            write_setup(
                paths,
                SetupRecord(
                    repo="owner/app",
                    config_version=1,
                    engine=engine,
                    login=LOGINS[engine],
                ),
            )
            os.environ[HOME_VARIABLE] = str(root / "home")  # the Docker launcher's config
            config, resolved = load_config(paths)
            nodes = {name: LocalNode(attrs.evolve(config, image=name), resolved) for name in images}
            stop, ready = threading.Event(), threading.Event()
            settings = ServeSettings(status_poll_s=0.2, rescan_s=1.0)
            serve = threading.Thread(
                target=serve_clones,
                args=(config, resolved),
                kwargs={"stop_event": stop, "ready": ready, "settings": settings},
                daemon=True,
            )
            serve.start()
            ready.wait(WAIT_S)

            clone_times: dict[str, list[float]] = {name: [] for name in images}
            kinds: dict[str, str | None] = {}
            bare_times: list[float] = []
            engine_times: list[float] = []
            steps: list[str] = []
            try:
                bare_engine(engine, model, address, root)  # warm the engine's files
                for name in images:
                    # The images' layers and serve's first launch: the first clone of a run
                    # pays for them, whichever image it is on.
                    bare_run(name)
                    number = github.create_issue("owner/app", author="owner", title="Warm-up")
                    clone_once(nodes[name], paths, model, f"owner/app#{number}")
                    kinds[name] = spare_kind(newest_request(paths))
                for run in range(runs):
                    bare_times.append(bare_run(image))
                    engine_times.append(bare_engine(engine, model, address, root))
                    order = images if run % 2 == 0 else images[::-1]
                    for name in order:
                        number = github.create_issue(
                            "owner/app", author="owner", title=f"Run {run} on {name}"
                        )
                        if spares != 0:  # as when clones are not seconds apart
                            wait_for_spare(paths, kinds[name])
                        if cold:
                            empty_repo_cache(paths)
                        took, lines = clone_once(nodes[name], paths, model, f"owner/app#{number}")
                        clone_times[name].append(took)
                        if name == image:
                            steps = lines
            finally:
                stop.set()
                serve.join(WAIT_S)

    return Measured(engine, clone_times, bare_times, engine_times, steps)


def empty_repo_cache(paths: Paths) -> None:
    """Remove the repository's mirror, leaving its folders (a waiting spare has them mounted)."""
    for mirror in sorted(paths.repo_cache("owner/app").rglob(MIRROR)):
        shutil.rmtree(mirror)


def newest_request(paths: Paths) -> Request:
    folder = next(run_folders(paths.clones_dir))
    return folder.request()


def wait_for_spare(paths: Paths, kind: str | None) -> None:
    """Until a spare of `kind` waits, its container running (serve starts it a little after
    each launch): a start seconds after the last one would meet Docker starting it."""
    client = docker.from_env()

    def waiting() -> bool:
        for folder in spares.waiting(paths.clones_dir, kind):
            found = os.stat(folder)
            label = f"{LABEL_SPARE}={found.st_dev}:{found.st_ino}"
            running = client.containers.list(filters={"label": label, "status": "running"})
            if running:
                return True
        return False

    wait(waiting, "a spare")


def clone_once(
    node: LocalNode, paths: Paths, model: FakeModelServer, target: str
) -> tuple[float, list[str]]:
    """Start a clone on `target`, time it to its first model request, wait for its end; its
    time and its first progress lines, from start."""
    seen = len(model.model_requests())
    began, began_wall = time.monotonic(), time.time()
    clone_id = node.start(target).id
    folder = RunFolder(paths.clones_dir / clone_id)
    try:
        model.wait_for_requests(seen + 1, timeout=WAIT_S)
    except TimeoutError:
        lines, _, _ = folder.progress()
        last = "\n".join(f"  {line.text}" for line in lines[-15:])
        raise SystemExit(
            f"clone {clone_id} never reached the model: {folder.record()}\n{last}"
        ) from None
    took = time.monotonic() - began

    def ended() -> bool:
        record = folder.record()
        return record is not None and not record.state.active

    wait(ended, f"clone {clone_id} to end")
    lines, _, _ = folder.progress()
    steps = [
        f"  +{line.at.timestamp() - began_wall:5.2f} s  {line.text[:70]}" for line in lines[:12]
    ]
    return took, [f"  +{took:5.2f} s  (the first model request)", *steps]


def shown(name: str, times: list[float]) -> float:
    median = statistics.median(times)
    print(f"{name:<36} median {median:.2f} s  ({', '.join(f'{t:.2f}' for t in times)})")
    return median


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--engine", choices=[*sorted(LOGINS), "both"], default="both")
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--quick", action="store_true", help="one run each: it works, roughly")
    parser.add_argument(
        "--github-latency-ms",
        type=float,
        default=0.0,
        help="each fake GitHub request answered this late (a GitHub across the internet; the "
        "floor has no GitHub, so compare images at the same latency, not against the goal)",
    )
    parser.add_argument(
        "--spares",
        type=int,
        help="the config's `spares` (default: its default); 0 starts every clone's container "
        "at its launch",
    )
    parser.add_argument(
        "--files", type=int, default=1, help="the repository's files (a README by default)"
    )
    parser.add_argument("--repository", type=Path, help="a bare repository to serve instead")
    parser.add_argument("--cold", action="store_true", help="no repository cache at each run")
    parser.add_argument(
        "--against",
        metavar="IMAGE",
        help="also start each run's clone on IMAGE, side by side, and print the difference",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.runs = 1
    if args.spares is not None and args.spares < 0:
        parser.error(f"--spares: 0 or more, got {args.spares}")
    if args.runs < 1 or args.files < 1:
        parser.error(f"--runs and --files: at least 1 each, got {args.runs} and {args.files}")
    if args.against == args.image:
        parser.error(f"--against {args.against}: the image measured already; name another")
    address = host_address(docker.from_env(), args.image)
    engines = sorted(LOGINS) if args.engine == "both" else [args.engine]
    ratios = []
    images = [args.image] if args.against is None else [args.image, args.against]
    if args.against is not None and args.runs % 2:
        args.runs += 1  # each image goes first in half the pairs: the first of a pair is slower
    latency_s = args.github_latency_ms / 1000
    for engine in engines:
        measured = measure(
            engine,
            args.runs,
            images,
            address,
            latency_s,
            args.files,
            args.spares,
            repository=args.repository,
            cold=args.cold,
        )
        print(f"engine {engine}, image {args.image}, {args.runs} runs, {args.files} files")
        clone = shown("start -> first model request", measured.clone_times[args.image])
        bare = shown("docker run --rm IMAGE true", measured.bare_times)
        alone = shown(f"{engine} alone -> first model request", measured.engine_times)
        ratios.append(f"{engine} {clone / (bare + alone):.2f}x")
        print(f"ratio: {clone / (bare + alone):.2f}x the floor (goal: at most {GOAL}x)")
        record(
            f"{engine}: start -> first model request",
            clone,
            floor=bare + alone,
            floor_is=f"docker run + {engine} alone",
            at_most_ratio=GOAL,
        )
        if args.against is not None:
            other = shown(f"the same on {args.against}", measured.clone_times[args.against])
            print(f"its ratio: {other / (bare + alone):.2f}x the floor")
            pairs = zip(
                measured.clone_times[args.image], measured.clone_times[args.against], strict=True
            )
            difference = statistics.median(mine - theirs for mine, theirs in pairs)
            print(
                f"{args.image} - {args.against}: median of the runs' differences "
                f"{difference * 1000:+.0f} ms"
            )
        print("the last clone's first progress lines, from start:", *measured.steps, sep="\n")
    print(f"ratios: {', '.join(ratios)} (goal: at most {GOAL}x each)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
