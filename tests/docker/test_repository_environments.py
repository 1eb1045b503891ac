"""Whole clones in Docker in what the repository declares: its devcontainer's image, built
once by serve, with the toolchain its check needs; and package caches that outlive its
clones."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import docker
import docker.errors
import pytest
from shadowclone.config import load_config, set_value
from shadowclone.environment.declared import cache_volumes
from shadowclone.node.schemas import Record, State
from shadowclone.plugin import Outcome, load_registry
from shadowclone.setup import setup_repository
from shadowclone_docker_launch.commands import build_environment, describe
from shadowclone_docker_launch.prebuilds import LABEL_PREBUILT_OF
from shadowclone_testing.containers import (
    SETTINGS,
    World,
    issue,
    own_repository,
    script,
    wait_for,
)
from shadowclone_testing.fakes.models import Shell, Text
from shadowclone_testing.registry import LocalRegistry, publish_features
from shadowclone_testing.serving import serving

ENVIRONMENT_FILES = {
    ".devcontainer/devcontainer.json": json.dumps(
        {
            "build": {"dockerfile": "Dockerfile", "args": {"GREETING": "from-the-dockerfile"}},
            # Dependencies installed from the repository's lock file, then used.
            "onCreateCommand": "jq -r '.packages[]' deps.lock.json > .installed",
            "postCreateCommand": ["sh", "-c", "test -s .installed && jq --version > .jq-version"],
            # As written: nothing expanded or unescaped on the way into the image.
            "containerEnv": {"ENV_MARK": 'declared-variable $HOME "quoted" back\\slash'},
        }
    ),
    ".devcontainer/Dockerfile": (
        "FROM shadowclone-base:bookworm\nARG GREETING\n"
        "RUN apt-get update && apt-get install -y --no-install-recommends jq"
        " && rm -rf /var/lib/apt/lists/*\n"
        "RUN echo $GREETING > /etc/greeting\n"
    ),
    "deps.lock.json": '{"packages": ["left-pad@1.3.0"]}\n',
}


JQ_CHECK = "jq -e .ok status.json || { echo status.json is not ok; exit 1; }"
"""The repository's check, which needs the toolchain its environment installs."""
JQ_FIX = """echo '{"ok": true}' > status.json && echo status-fixed"""


@pytest.mark.timeout(1800)  # the build alone may take its 1200 s on a busy machine
def test_a_repository_environment_is_built_once_and_its_clones_run_in_it(world: World) -> None:
    """A devcontainer whose Dockerfile installs a Debian package: setup (its check clone in
    Docker) keeps the declaration; serve builds the image before the first clone's launch
    (the clone shows `preparing` with the build's steps), and the clone runs the real engine
    in it: the package, the build argument and the declared variable are there, and the
    lifecycle commands ran in its workspace first (dependencies from the repository's lock
    file, then a command that uses them). The repository's check, which runs that package,
    fails on the first turn's work, goes back to the engine once and passes after its fix.
    The next clone and `env build` find the image: no build."""
    world.use("claude")
    repo = own_repository(world)
    files = {**ENVIRONMENT_FILES, "status.json": '{"ok": false}\n'}
    world.github.commit(repo, "main", files, author="owner")
    # This machine's extra certificate authorities, as scripts/build-image trusts them.
    authorities = sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))
    set_value(world.paths, "environment.ca_certs", json.dumps([str(a) for a in authorities]))
    config, _ = load_config(world.paths)
    summary = setup_repository(
        config,
        world.paths,
        load_registry(),
        repo,
        engine="claude",
        check_commands=(JQ_CHECK,),
        build=False,  # serve builds it
    )
    assert summary.ok, summary
    tag = describe(repo)["tag"]
    assert describe(repo)["built"] is False
    assert describe(repo)["prebuilt"] is None
    try:
        environment_built_once(world, repo, tag)
    finally:
        made = world.client.images.list(filters={"label": f"{LABEL_PREBUILT_OF}={tag}"})
        for image in [*(i.id for i in made), tag]:
            with contextlib.suppress(docker.errors.ImageNotFound):
                world.client.images.remove(image, force=True)


def prebuilt_image(world: World, tag: str) -> str | None:
    made = world.client.images.list(filters={"label": f"{LABEL_PREBUILT_OF}={tag}"})
    return next((t for image in made for t in image.tags), None)


def environment_built_once(world: World, repo: str, tag: str) -> None:
    first, second = issue(world, repo, "Use the toolchain"), issue(world, repo, "Use it again")
    probe = (
        'jq --version; cat .jq-version .installed /etc/greeting; printf "mark=%s\\n" "$ENV_MARK";'
        " ls /workspaces/*/deps.lock.json"
    )
    script(world.model, Shell(probe), Text("Done."))
    world.model.rule = lambda request: (
        (Text("Fixed: status.json is ok.") if request.contains("status-fixed") else Shell(JQ_FIX))
        if request.contains("status.json is not ok")
        else None
    )
    seen: set[State] = set()
    with serving(world.node, SETTINGS):
        clone_id = world.node.start(f"{repo}#{first}").id

        def ended() -> Record | None:
            record = world.record(clone_id)
            if record is not None:
                seen.add(record.state)
            return record if record is not None and not record.state.active else None

        record = wait_for(ended, "the first clone, its environment built", timeout_s=1200)
        # Meanwhile serve made the prebuilt image of the default branch, in the background.
        prebuilt = wait_for(lambda: prebuilt_image(world, tag), "the prebuilt image", 300)
        assert describe(repo)["prebuilt"]["tag"] == prebuilt  # `env show` names it
        script(world.model, Shell("cat .installed .jq-version"), Text("Done again."))
        again = world.ended(world.node.start(f"{repo}#{second}").id)
    assert (record.state, record.outcome) == (State.DONE, Outcome.DONE), world.steps(clone_id)
    assert State.PREPARING in seen
    assert (record.image, again.image) == (tag, prebuilt)
    # The second clone ran only the command after the prebuild's: what onCreateCommand
    # installed came from the prebuilt image, and postCreateCommand used it.
    later = world.steps(again.id)
    assert [line.partition(":")[0] for line in later if ": $ " in line] == ["postCreateCommand"]
    assert any(line.startswith("onCreateCommand: ran once for the default") for line in later)
    assert any(line.startswith("starting from the prebuilt image of") for line in later)
    assert not [line for line in later if line.startswith("copying the prebuilt")], later
    probed = [r for r in world.model.model_requests() if r.contains("jq-1.")]
    assert probed and probed[-1].contains("left-pad@1.3.0"), later
    building = [line for line in world.steps(clone_id) if line.startswith("building the env")]
    assert building and f"built {tag}" in world.steps(clone_id)
    steps = [line for line in world.steps(clone_id) if line.startswith(("#", "Step "))]
    assert any("apt-get" in line for line in steps), world.steps(clone_id)
    assert not [line for line in world.steps(again.id) if line.startswith("building")]
    assert describe(repo)["built"] is True
    assert build_environment(repo, "host") == tag  # found: the same image
    texts = world.steps(clone_id)
    toolchain = [t.split(":")[1].strip() for t in texts if t.startswith("toolchain:")]
    assert toolchain == ["failed", "passed"], texts
    told = [r for r in world.model.model_requests() if r.contains("status.json is not ok")]
    assert told and told[0].contains("Done."), "the failing check did not go back to the engine"
    assert "review toolchain: passed" in (record.report or "")
    assert (
        world.github.read_file(repo, f"shadowclone/{first}-use-the-toolchain", "status.json")
        == '{"ok": true}\n'
    )

    declared = 'mark=declared-variable $HOME "quoted" back\\slash'
    results = [r for r in world.model.model_requests() if r.contains(declared)]
    assert results, "the declared variable did not reach the engine's shell"
    assert results[0].contains("from-the-dockerfile") and results[0].contains("jq-1.")
    # The lifecycle commands ran in the workspace, which the configuration's workspace folder
    # leads to, before the engine: what they installed from the lock file is there.
    assert results[0].contains("left-pad@1.3.0")
    assert results[0].contains(f"/workspaces/{repo.partition('/')[2]}/deps.lock.json")
    ran = [line for line in world.steps(clone_id) if ": $ " in line]
    assert [line.partition(":")[0] for line in ran] == ["onCreateCommand", "postCreateCommand"]


FEATURE_FILES = {
    ".devcontainer/devcontainer.json": json.dumps(
        {
            "image": "shadowclone-base:bookworm",
            "features": {"./greet": {"word": "hola"}},
            "postCreateCommand": "cat /etc/greet-word > greeted.txt",
        }
    ),
    ".devcontainer/greet/devcontainer-feature.json": json.dumps(
        {
            "id": "greet",
            "version": "1.0.0",
            "name": "Greet",
            "options": {"word": {"type": "string", "default": "hi"}},
        }
    ),
    ".devcontainer/greet/install.sh": '#!/bin/sh\nset -e\necho "$WORD" > /etc/greet-word\n',
}


@pytest.mark.timeout(1800)
def test_features_local_and_from_a_registry_are_installed_in_the_environment(
    world: World, sc_registry: LocalRegistry, sc_devcontainer_cli: Path, tmp_path: Path
) -> None:
    """A feature kept beside the configuration and one published to a registry, each with an
    option: setup copies the local one, the Dev Containers CLI fetches the other and installs
    both on the base (their options given, on the builds' network), and the clone's lifecycle
    command and engine find what they installed; the published feature's own
    `postCreateCommand` runs before the configuration's. A feature from a registry that cannot
    be reached fails setup in one line naming it."""
    world.use("claude")
    repo = own_repository(world)
    hello = tmp_path / "features" / "src" / "hello"
    hello.mkdir(parents=True)
    (hello / "devcontainer-feature.json").write_text(
        json.dumps(
            {
                "id": "hello",
                "version": "1.0.0",
                "name": "Hello",
                "options": {"to": {"type": "string"}},
                "postCreateCommand": "cat /etc/hello > hello-ran.txt",
            }
        )
    )
    (hello / "install.sh").write_text('#!/bin/sh\nset -e\necho "hello $TO" > /etc/hello\n')
    [reference] = publish_features(
        sc_devcontainer_cli, sc_registry.address, "team/features", tmp_path / "features"
    )
    files = dict(FEATURE_FILES)
    # The local feature reaches a server on the host's loopback: only a build on the host's
    # network (`[environment] network`, "host" by default) can.
    port = sc_registry.address.rpartition(":")[2]
    files[".devcontainer/greet/install.sh"] = (
        "#!/bin/bash\nset -e\n"
        f"exec 3<>/dev/tcp/127.0.0.1/{port} || {{ echo not on the host network; exit 9; }}\n"
        'echo "$WORD" > /etc/greet-word\n'
    )
    configuration = json.loads(files[".devcontainer/devcontainer.json"])
    configuration["features"][reference] = {"to": "registry"}
    files[".devcontainer/devcontainer.json"] = json.dumps(configuration)
    world.github.commit(repo, "main", files, author="owner")
    authorities = sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))
    set_value(world.paths, "environment.ca_certs", json.dumps([str(a) for a in authorities]))
    config, _ = load_config(world.paths)
    summary = setup_repository(config, world.paths, load_registry(), repo, engine="claude")
    assert summary.ok, [check for check in summary.checks if not check.passed]
    tag = describe(repo)["tag"]
    try:
        number = issue(world, repo, "Greet")
        probe = "cat /etc/greet-word greeted.txt /etc/hello hello-ran.txt"
        script(world.model, Shell(probe), Text("Greeted."))
        with serving(world.node, SETTINGS):
            clone_id = world.node.start(f"{repo}#{number}").id
            record = world.ended(clone_id)
        assert (record.outcome, record.image) == (Outcome.DONE, tag), world.steps(clone_id)
        shown = [r for r in world.model.model_requests() if r.contains("hello registry")]
        assert shown and shown[0].contains("hola\nhola"), world.steps(clone_id)
        assert shown[0].contains("hello registry\nhello registry")  # the feature's command ran
        steps = world.steps(clone_id)
        ran = [text.partition(": $ ")[0] for text in steps if ": $ " in text]
        assert ran == [f"postCreateCommand of feature {reference}", "postCreateCommand"], steps
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            world.client.images.remove(tag, force=True)
    remote = {"image": "shadowclone-base:bookworm", "features": {"ghcr.io/x/features/go:1": {}}}
    path = ".devcontainer/devcontainer.json"
    world.github.commit(repo, "main", {path: json.dumps(remote)}, author="owner")
    refused = setup_repository(config, world.paths, load_registry(), repo, engine="claude")
    assert not refused.ok
    [failed] = [check for check in refused.checks if not check.passed]
    assert failed.detail.startswith(
        f"{path}: features: ghcr.io/x/features/go:1: the Dev Containers CLI could not build it: "
    ), failed.detail
    assert "\n" not in failed.detail


def test_a_base_image_that_cannot_be_pulled_fails_setup_in_one_line(world: World) -> None:
    world.use("claude")
    repo = own_repository(world)
    path = ".devcontainer/devcontainer.json"
    world.github.commit(repo, "main", {path: '{"image": "localhost:1/none:1"}'}, author="owner")
    config, _ = load_config(world.paths)
    refused = setup_repository(config, world.paths, load_registry(), repo, engine="claude")
    [failed] = [check for check in refused.checks if not check.passed]
    assert failed.detail.startswith(f"{path}: image: localhost:1/none:1 cannot be pulled: ")
    assert "connection refused" in failed.detail and "\n" not in failed.detail


def test_a_repositorys_package_caches_outlive_its_clones(world: World) -> None:
    """What one clone's engine leaves in its package cache (npm's, as the image points it), the
    next clone of the repository finds; the cache is the engine's to write."""
    world.use("claude")
    repo = own_repository(world)
    first, second = issue(world, repo, "Fill the cache"), issue(world, repo, "Read the cache")
    volumes = cache_volumes(repo, ())
    try:
        with serving(world.node, SETTINGS):
            fill = 'echo kept-across-clones > "$npm_config_cache/probe" && echo filled'
            script(world.model, Shell(fill), Text("Filled."))
            filled = world.ended(world.node.start(f"{repo}#{first}").id)
            read = 'cat "$npm_config_cache/probe"; echo "owner=$(stat -c %U "$PIP_CACHE_DIR")"'
            script(world.model, Shell(read), Text("Read."))
            clone_id = world.node.start(f"{repo}#{second}").id
            found = world.ended(clone_id)
        assert (filled.outcome, found.outcome) == (Outcome.DONE, Outcome.DONE), found
        seen = [r for r in world.model.model_requests() if r.contains("owner=")]
        assert seen and seen[0].contains("kept-across-clones"), world.steps(clone_id)
        assert seen[0].contains("owner=engine")
        for volume in volumes:  # one per default cache, kept after the clones
            world.client.volumes.get(volume)
    finally:
        for volume in volumes:
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                world.client.volumes.get(volume).remove(force=True)
