"""A dev container's features, installed on an environment's base by the pinned Dev Containers
CLI as the specification installs them (`devcontainer build`), with the owner's extra
certificate authorities trusted; and what the features declare beyond their install: their
lifecycle commands, which the run program runs before the configuration's, and the rest,
named as not applied."""

from __future__ import annotations

import collections
import json
import os
import shlex
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from shadowclone.plugin import (
    DEVCONTAINER_READING,
    LIFECYCLE_KEYS,
    BadInput,
    FileLock,
    Refused,
    devcontainer_cli,
    devcontainer_env,
    feature_commands,
)

from shadowclone_docker_launch.builds import (
    CA_HINT,
    TAIL_LINES,
    TLS_REFUSED,
    BuildError,
    Say,
    inspect_image,
    run_build,
    to_our_output,
)

if TYPE_CHECKING:
    from shadowclone_docker_launch.environments import ImagePlan

FEATURES_FILE = "features-lifecycle.json"
METADATA_FORMAT = '{{index .Config.Labels "devcontainer.metadata"}}'
FEATURE_KEYS_APPLIED = {"id", "containerEnv", *LIFECYCLE_KEYS}
"""What of a feature's metadata a clone applies (its variables are in the image already)."""
FEATURE_KEYS_IGNORED = {"customizations", "postAttachCommand", "waitFor"}
"""What of it is for an editor attached to the container: no clone has one."""


def features_metadata(image: str, say: Say | None) -> list[dict[str, object]]:
    """The features' entries of the image's `devcontainer.metadata` label that hold lifecycle
    commands (the run program runs them before the configuration's); what a clone does not
    apply of them is said, never dropped silently."""
    tell = say if say is not None else to_our_output
    try:
        entries = json.loads(inspect_image(image, METADATA_FORMAT) or "[]")
    except ValueError:
        entries = []
    kept = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        for key in sorted(set(entry) - FEATURE_KEYS_APPLIED - FEATURE_KEYS_IGNORED):
            feature = " ".join(entry["id"].split())
            shown = " ".join(str(key).split())
            tell(f"feature {feature}: {shown} is not applied: a clone's container keeps its own")
        commands = {key: entry[key] for key in LIFECYCLE_KEYS if key in entry}
        if commands:
            kept.append({"id": entry["id"], **commands})
    for line in feature_commands(kept)[1]:
        tell(line)
    return kept


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
    user = inspect_image(base, "{{.Config.User}}")
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
