"""Building a repository's environment image: the declared base (an image, or a Dockerfile of
the repository), the clone image's layers on it, then the declared variables and setup commands.

Built with the docker CLI, by `shadowclone env build` ahead of time or by the launcher's
`prepare` before a clone's first launch; tagged with a hash of everything it is made from, so it
is built once per change of its inputs and found again by its tag.
"""

from __future__ import annotations

import collections
import json
import os
import posixpath
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs
from shadowclone.plugin import (
    DEVCONTAINER_READING,
    BadInput,
    Compose,
    Environment,
    EnvironmentRecipe,
    FileLock,
    Refused,
    contract,
    declared_environment,
    devcontainer_cli,
    devcontainer_env,
    environment_image_tag,
    files_in,
)

from shadowclone_docker_launch import services
from shadowclone_docker_launch.builds import (
    CA_HINT,
    TAIL_LINES,
    TLS_REFUSED,
    BuildError,
    Say,
    docker_cli,
    image_id,
    run_build,
)

_TAG_UNSAFE = re.compile(r"[^a-z0-9_.-]+")


@attrs.frozen
class ImagePlan:
    """What an environment image is made of: the files a repository declares it in (by their
    paths in the repository) and the clone image it goes on."""

    repo: str
    folder: Path
    """Where setup kept the files: Dockerfile contexts are read from here."""
    files: dict[str, str]
    environment: Environment
    clone_image: str

    def tag(self) -> str | None:
        """The image's tag, or None while the clone image is not on this machine."""
        clone_id = image_id(self.clone_image)
        return environment_image_tag(self.repo, clone_id, self.files) if clone_id else None


def final_dockerfile(base: str, environment: Environment) -> str:
    """The last layer: the environment's variables, then its setup commands, as root with
    the network on (nothing of the owner's secrets is there to read), and the configuration's
    workspace folder leading to the clone's workspace."""
    lines = [f"FROM {base}", "USER root"]
    lines += [f"ENV {name}={_quoted(value)}" for name, value in environment.env.items()]
    lines += [f"RUN {json.dumps(['/bin/sh', '-c', command])}" for command in environment.setup]
    folder = environment.lifecycle.workspace_folder
    if folder and folder != contract.CONTAINER_WORKSPACE:
        # As a dev container mounts the workspace there, over what the image has.
        link = shlex.join(["ln", "-s", contract.CONTAINER_WORKSPACE, folder])
        parent = shlex.quote(posixpath.dirname(folder))
        lines.append(f"RUN mkdir -p {parent} && rm -rf {shlex.quote(folder)} && {link}")
    lines.append(f"LABEL io.shadowclone.environment={json.dumps(environment.source)}")
    return "\n".join(lines) + "\n"


def _quoted(value: str) -> str:
    """`value` as a Dockerfile ENV value: quoted, with nothing expanded (`$`) or escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'


def ensure_image(
    plan: ImagePlan,
    *,
    network: str | None = "host",
    ca_certs: Sequence[Path] = (),
    say: Say | None = None,
    cancel: threading.Event | None = None,
    building: Callable[[], None] | None = None,
) -> tuple[str, bool]:
    """The tag of the plan's image, built first if it is not here (`building` is told before
    the build starts); and whether it was built now."""
    from shadowclone_docker_launch.images import build_image

    tag = plan.tag()
    if tag is None:
        raise Refused(
            f"the clone image {plan.clone_image} is not on this machine: build it with "
            "`shadowclone image build`, then the environment"
        )
    if image_id(tag) is not None:
        return tag, False
    if building is not None:
        building()
    docker = docker_cli()
    environment, repo = plan.environment, plan.repo
    name, _, digest = tag.partition(":")
    net = ["--network", network] if network else []
    base = environment.image
    if base is not None:
        pull(docker, base, cancel)
    labels: list[str] = []
    if environment.compose is not None:
        composed = compose_images(plan, f"{name}:{digest}", network, say, cancel)
        labels = ["--label", f"{services.LABEL_SERVICES}={services.label_value(composed)}"]
    if environment.dockerfile is not None:
        base = f"{name}:{digest}-base"
        dockerfile = plan.folder / environment.dockerfile
        build_from(
            docker,
            base,
            dockerfile,
            plan.folder / environment.context,
            environment.build_args,
            network,
            say,
            cancel,
            f"the base of {repo}'s environment from {environment.dockerfile}",
        )
    if environment.features:
        assert base is not None
        featured = f"{name}:{digest}-features"
        build_with_features(plan, featured, docker, say, cancel, network, base, ca_certs)
        base = featured
    assert base is not None
    clone = f"{name}:{digest}-clone"
    build_image(clone, base, network=network, ca_certs=ca_certs, say=say, cancel=cancel)
    with tempfile.TemporaryDirectory(prefix="shadowclone-env-") as context_dir:
        (Path(context_dir) / "Dockerfile").write_text(final_dockerfile(clone, environment))
        run_build(
            [docker, "build", *net, *labels, "--tag", tag, context_dir],
            f"{repo}'s environment",
            say,
            cancel,
        )
    return tag, True


def build_from(
    docker: str,
    tag: str,
    dockerfile: Path,
    context: Path,
    build_args: Mapping[str, str],
    network: str | None,
    say: Say | None,
    cancel: threading.Event | None,
    what: str,
) -> None:
    """`docker build` of a Dockerfile of the repository."""
    net = ["--network", network] if network else []
    args = [f"--build-arg={key}={value}" for key, value in build_args.items()]
    argv = [docker, "build", *net, "--tag", tag, "--file", str(dockerfile), *args, str(context)]
    run_build(argv, what, say, cancel)


def compose_images(
    plan: ImagePlan,
    prefix: str,
    network: str | None,
    say: Say | None,
    cancel: threading.Event | None,
) -> Compose:
    """Each Compose service that starts beside the clone with its image here: pulled, or
    built from its Dockerfile (tagged `prefix` and its name); the reading with those images."""
    composed = plan.environment.compose
    assert composed is not None
    docker = docker_cli()
    others = []
    for service in composed.others:
        image = service.image
        if service.dockerfile is not None and service.context is not None:
            image = f"{prefix}-service-{_TAG_UNSAFE.sub('-', service.name.lower())}"
            if image_id(image) is None:
                build_from(
                    docker,
                    image,
                    plan.folder / service.dockerfile,
                    plan.folder / service.context,
                    service.build_args,
                    network,
                    say,
                    cancel,
                    f"the Compose service {service.name} of {plan.repo}",
                )
        else:
            assert image is not None
            pull(docker, image, cancel, f"services.{service.name}.image")
        others.append(attrs.evolve(service, image=image))
    return attrs.evolve(composed, others=tuple(others))


def pull(docker: str, image: str, cancel: threading.Event | None, key: str = "image") -> None:
    """Have `image` here, pulled if it is not: an image that cannot be pulled is refused in one
    line naming it and the key, before any build."""
    if image_id(image) is not None:
        return
    lines: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    try:
        run_build([docker, "pull", image], f"the image {image}", lines.append, cancel)
    except BuildError:
        if cancel is not None and cancel.is_set():
            raise
        said = lines[-1].strip() if lines else "no message"
        raise BuildError(f"{key}: {image} cannot be pulled: {said[:300]}") from None


FEATURES_LOCK = Path(tempfile.gettempdir()) / f"shadowclone-devcontainer-build-{os.getuid()}.lock"
"""Held across a build by the Dev Containers CLI: it tags one fixed temporary image, so two
builds at once on one Docker daemon would take each other's."""


FEATURES_LOCK_TIMEOUT_S = 60 * 60.0
"""How long a build waits for another one's end."""


def build_with_features(
    plan: ImagePlan,
    tag: str,
    docker: str,
    say: Say | None,
    cancel: threading.Event | None,
    network: str | None = None,
    base: str | None = None,
    ca_certs: Sequence[Path] = (),
) -> None:
    """`base` (the declared base, made already) with the configuration's features installed,
    built by the pinned Dev Containers CLI (`devcontainer build`) as the specification says,
    on the builds' network (`[environment] network`). The CLI reads a copy of the files setup
    kept where the configuration names `base` as its image (and nothing else but its
    features): it never builds the base again, nor asks for Docker Compose. A feature that
    cannot be fetched or installed is refused in one line naming it. The extra certificate
    authorities (`ca_certs`) are trusted by the CLI, which fetches features from registries,
    and by the base the features' install scripts download in."""
    try:
        cli = devcontainer_cli()
    except BadInput as error:
        raise Refused(f"features: {error}") from None
    with tempfile.TemporaryDirectory(prefix="shadowclone-features-") as scratch:
        workspace = Path(scratch) / "workspace"
        shutil.copytree(plan.folder, workspace, symlinks=True)
        bundle = None
        if ca_certs and base is not None:
            from shadowclone_docker_launch.images import write_authorities

            authorities = write_authorities(Path(scratch) / "trust" / "ca-certificates", ca_certs)
            bundle = Path(scratch) / "extra-authorities.pem"
            bundle.write_text("".join(cert.read_text() for cert in authorities))
            base = trusting(docker, base, f"{tag}-trusting", Path(scratch) / "trust", say, cancel)
        if base is not None:
            features_only(workspace, plan.environment.source, base)
        if network:
            docker = docker_on_network(docker, network, Path(scratch))
        _build_with_features(plan, workspace, tag, [*cli], docker, say, cancel, bundle)


TRUSTING_DOCKERFILE = """FROM {base}
USER root
COPY ca-certificates/ /usr/local/share/ca-certificates/
RUN if command -v update-ca-certificates >/dev/null 2>&1; then update-ca-certificates >/dev/null; \
    else mkdir -p /etc/ssl/certs \
    && cat /usr/local/share/ca-certificates/*.crt >> /etc/ssl/certs/ca-certificates.crt; fi
{user}"""
"""The base with the extra authorities in its system store (Debian's and Alpine's tool, or
the bundle itself where it has none), its user as it was."""


def trusting(
    docker: str,
    base: str,
    tag: str,
    context: Path,
    say: Say | None,
    cancel: threading.Event | None,
) -> str:
    """`base` trusting the authorities in `context`/ca-certificates, tagged `tag`."""
    done = subprocess.run(
        [docker, "image", "inspect", "--format", "{{.Config.User}}", base],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    user = done.stdout.strip() if done.returncode == 0 else ""
    dockerfile = TRUSTING_DOCKERFILE.format(base=base, user=f"USER {user}\n" if user else "")
    (context / "Dockerfile").write_text(dockerfile)
    what = "the base of the environment trusting the extra certificate authorities"
    run_build([docker, "build", "--network", "none", "--tag", tag, str(context)], what, say, cancel)
    return tag


def features_only(workspace: Path, source: str, base: str) -> None:
    """Make the configuration at `source` in `workspace` name `base` as its image, with its
    features (as the reference CLI read them) and nothing else."""
    reading = json.loads((workspace / DEVCONTAINER_READING).read_text())
    configuration = reading["configuration"]
    kept = {"image": base}
    for key in ("features", "overrideFeatureInstallOrder", "remoteUser", "containerUser"):
        if key in configuration:
            kept[key] = configuration[key]
    (workspace / source).write_text(json.dumps(kept, indent=2) + "\n")


DOCKER_ON_NETWORK = """#!/bin/sh
# The docker CLI for the Dev Containers CLI's build: its builds on the given network (the CLI
# has no option for it); every other command as it is.
if [ "$1" = build ]; then
    shift
    exec {docker} build --network {network} "$@"
fi
if [ "$1" = buildx ] && [ "$2" = build ]; then
    shift 2
    exec {docker} buildx build --network {network} "$@"
fi
exec {docker} "$@"
"""


def docker_on_network(docker: str, network: str, folder: Path) -> str:
    """A docker for the Dev Containers CLI whose builds run on `network`."""
    script = folder / "docker"
    script.write_text(
        DOCKER_ON_NETWORK.format(docker=shlex.quote(docker), network=shlex.quote(network))
    )
    script.chmod(0o755)
    return str(script)


def _build_with_features(
    plan: ImagePlan,
    workspace: Path,
    tag: str,
    cli: list[str],
    docker: str,
    say: Say | None,
    cancel: threading.Event | None,
    authorities: Path | None = None,
) -> None:
    environment = plan.environment
    argv = [*cli, "build", "--workspace-folder", str(workspace)]
    argv += ["--config", str(workspace / environment.source), "--image-name", tag]
    argv += ["--no-lockfile", "--docker-path", docker, "--log-format", "text"]
    env = devcontainer_env(cli[0])
    for name in ("DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY"):
        if name in os.environ:  # where the daemon is, never anything of the owner's else
            env[name] = os.environ[name]
    if authorities is not None:  # node's own store, besides which these are trusted
        env["NODE_EXTRA_CA_CERTS"] = str(authorities)
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    feature = None  # the one the CLI was at: the last it named
    untrusted = False  # a download met an authority the build does not trust

    def heard(line: str) -> None:
        nonlocal feature, untrusted
        tail.append(line)
        feature = next((f for f in environment.features if f in line), feature)
        untrusted = untrusted or TLS_REFUSED.search(line) is not None
        if say is not None:
            say(line)

    what = f"the base of {plan.repo}'s environment with its features"
    try:
        with FileLock(FEATURES_LOCK, timeout=FEATURES_LOCK_TIMEOUT_S, plain_folder=False):
            run_build(argv, what, heard, cancel, env=env)
    except BuildError as error:
        said = _cli_error(list(tail))
        if said is None:
            raise
        key = f"features: {feature}" if feature else "features"
        hint = CA_HINT if untrusted else ""
        raise BuildError(
            f"{key}: the Dev Containers CLI could not build it: {said}{hint}"
        ) from error


def _cli_error(lines: list[str]) -> str | None:
    """The message of the CLI's outcome line (`{"outcome": "error", ...}`), if it printed one."""
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                outcome = json.loads(line)
            except ValueError:
                continue
            message = outcome.get("message") if isinstance(outcome, dict) else None
            if isinstance(message, str) and message.strip():
                return message.strip().splitlines()[0][:300]
    return None


def plan_for(recipe: EnvironmentRecipe, clone_image: str) -> ImagePlan:
    """The plan of the environment setup kept for `recipe.repo`."""
    return plan_from(recipe.repo, recipe.folder, files_in(recipe.folder), clone_image)


def plan_from(repo: str, folder: Path, files: dict[str, str], clone_image: str) -> ImagePlan:
    """The recipe of the environment `files` declare; Refused when they declare none."""
    environment = declared_environment(files)
    if environment is None:
        raise Refused(
            f"setup kept no environment files for {repo}: run `shadowclone setup {repo}` again"
        )
    return ImagePlan(repo, folder, files, environment, clone_image)


STEP = re.compile(r"^(#\d+ \[[^\]]+\] |Step \d+/\d+ : )")
"""The lines of docker's output that start a build step (BuildKit's plain output, or the
classic builder's): what a clone's progress shows of a build."""


def prepare_image(
    recipe: EnvironmentRecipe, clone_image: str, say: Say, cancel: threading.Event | None = None
) -> tuple[str, Environment]:
    """The environment image a clone of `recipe.repo` runs in (or starts a prebuilt image
    from), built on `clone_image` when it is missing, and the environment; `say` hears what
    happens (each build step, not every line of its output)."""
    plan = plan_for(recipe, clone_image)
    source = plan.environment.source
    if plan.environment.not_applied:
        keys = ", ".join(plan.environment.not_applied)
        say(f"not applied from {source} (`shadowclone env show {recipe.repo}` says why): {keys}")

    def steps(line: str) -> None:
        if STEP.match(line):
            say(line[:300])

    def building() -> None:
        say(f"building the environment {recipe.repo} declares in {source}: once per change of it")

    tag, built = ensure_image(
        plan,
        network=recipe.network,
        ca_certs=recipe.ca_certs,
        say=steps,
        cancel=cancel,
        building=building,
    )
    if built:
        say(f"built {tag}")
    return tag, plan.environment
