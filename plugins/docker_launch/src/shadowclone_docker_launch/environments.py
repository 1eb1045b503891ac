"""Building a repository's environment image: the declared base (an image, or a Dockerfile of
the repository), its features on it (`features.py`), the clone image's layers, then the
declared variables and setup commands.

Built with the docker CLI, by `shadowclone env build` ahead of time or by the launcher's
`prepare` before a clone's first launch; tagged with a hash of everything it is made from, so it
is built once per change of its inputs and found again by its tag.
"""

from __future__ import annotations

import collections
import json
import posixpath
import re
import shlex
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs
from shadowclone.plugin import (
    Compose,
    Environment,
    EnvironmentRecipe,
    Refused,
    contract,
    declared_environment,
    environment_image_tag,
    files_in,
)

from shadowclone_docker_launch import services
from shadowclone_docker_launch.builds import (
    TAIL_LINES,
    BuildError,
    Say,
    docker_cli,
    image_id,
    run_build,
)
from shadowclone_docker_launch.features import (
    FEATURES_FILE,
    build_with_features,
    features_metadata,
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


def final_dockerfile(base: str, environment: Environment, with_features: bool = False) -> str:
    """The last layer: the environment's variables, then its setup commands, as root with
    the network on (nothing of the owner's secrets is there to read), and the configuration's
    workspace folder leading to the clone's workspace; `with_features`: the features' lifecycle
    commands (`FEATURES_FILE` of the context) where the run program finds them."""
    lines = [f"FROM {base}", "USER root"]
    if with_features:
        lines.append(f"COPY {FEATURES_FILE} {contract.FEATURES_LIFECYCLE}")
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
        features = features_metadata(clone, say) if environment.features else []
        if features:
            (Path(context_dir) / FEATURES_FILE).write_text(json.dumps(features))
        last = final_dockerfile(clone, environment, with_features=bool(features))
        (Path(context_dir) / "Dockerfile").write_text(last)
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
