"""The Docker plugin's commands: `shadowclone image` (build the clone image here) and
`shadowclone env` (the environment a repository declares, and its image). shadowclone finds
them through the entry-point group `shadowclone.commands`; this module imports only click
and the plugin surface until a command runs."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from shadowclone.plugin import (
    DEFAULT_IMAGE,
    DEMO_IMAGE,
    BadInput,
    ConfigError,
    Environment,
    MalformedFile,
    PluginUnavailable,
    Refused,
)

DEFAULT_BASE = "debian:bookworm-slim"
"""The Debian bookworm image the clone image is built on."""


def default_tag() -> str:
    """The image serve runs: the config's, or the default where there is no config yet."""
    from shadowclone.plugin import launcher_settings

    try:
        image = launcher_settings().image
    except ConfigError:
        return DEFAULT_IMAGE
    return image or DEFAULT_IMAGE


ca_cert_option = click.option(
    "--ca-cert",
    "ca_certs",
    multiple=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="A PEM certificate authority to trust inside the image (a TLS-inspecting proxy).",
)
"""Extra certificate authorities for a build's downloads (`image build`, `env build`)."""


@click.group()
def image() -> None:
    """The clone image: build it here if you do not pull the published one."""


@image.command("build")
@click.option("--tag", help="Name of the image to build (default: the config's `image`).")
@click.option(
    "--base",
    default=DEFAULT_BASE,
    show_default=True,
    help="The Debian bookworm image to build on.",
)
@click.option(
    "--source",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="A checkout of shadowclone to build the packages from (default: the one this "
    "installation runs from, or else the installed distributions).",
)
@click.option(
    "--network",
    default="host",
    show_default=True,
    help="The network of the build's steps ('default' for Docker's own).",
)
@click.option("--platform", help="Target platforms, e.g. linux/amd64,linux/arm64 (buildx).")
@click.option("--push", is_flag=True, help="Push the image after the build (buildx).")
@click.option("--quiet", is_flag=True, help="Print only the image id.")
@click.option(
    "--demo",
    is_flag=True,
    help=f"Also build the demo image {DEMO_IMAGE}: the clone image with the scripted engine, "
    "for `shadowclone demo --launcher docker`.",
)
@click.option(
    "--demo-tag",
    default=DEMO_IMAGE,
    show_default=True,
    help="Name of the demo image (with --demo).",
)
@ca_cert_option
def build_command(
    tag: str | None,
    base: str,
    source: Path | None,
    network: str,
    platform: str | None,
    push: bool,
    quiet: bool,
    demo: bool,
    demo_tag: str,
    ca_certs: tuple[Path, ...],
) -> None:
    """Build the clone image, with the shadowclone installed here (or a checkout's) inside."""
    from shadowclone_docker_launch.images import build_image

    tag = tag or default_tag()
    build_image(
        tag,
        base,
        source,
        network=None if network == "default" else network,
        platform=platform,
        push=push,
        quiet=quiet,
        ca_certs=ca_certs,
        demo_tag=demo_tag if demo else None,
    )
    if not quiet:
        click.echo(f"built {tag}" + (f" and {demo_tag}" if demo else ""))


@click.group(
    short_help="The environment a repository declares (.shadowclone/environment.toml or "
    "a devcontainer.json), as setup found it."
)
def env() -> None:
    """The environment a repository declares (.shadowclone/environment.toml or a
    devcontainer.json), as setup found it."""


def describe(repo_text: str) -> dict[str, Any]:
    """What a clone of the repository will get: its clone image, and the environment it
    declares with the tag of the image made from it (and whether that is built)."""
    from shadowclone.plugin import repository_setup

    from shadowclone_docker_launch.builds import image_id
    from shadowclone_docker_launch.environments import plan_for

    found = repository_setup(repo_text)
    shown: dict[str, Any] = {
        "repo": found.repo,
        "clone_image": found.clone_image,
        "environment": None,
    }
    if found.environment is None:
        return shown
    plan = plan_for(found.environment, found.clone_image)
    environment = plan.environment
    tag = plan.tag()
    shown.update(
        environment=environment.source,
        image=environment.image,
        dockerfile=environment.dockerfile,
        context=environment.context if environment.dockerfile else None,
        build_args=dict(environment.build_args),
        setup=list(environment.setup),
        features=list(environment.features),
        lifecycle=[[key, line] for key, line in environment.lifecycle.commands()],
        workspace_folder=environment.lifecycle.workspace_folder,
        remote_env=dict(environment.lifecycle.remote_env),
        env=dict(environment.env),
        user=environment.user,
        checks=list(environment.checks),
        caches=list(environment.caches),
        found=list(environment.found),
        not_applied=dict(environment.not_applied),
        ignored=list(environment.ignored),
        files=sorted(plan.files),
        tag=tag,
        built=None if tag is None else image_id(tag) is not None,
        prebuilt=None,
        compose=_compose_shown(environment),
    )
    if tag is not None and environment.lifecycle.prebuilt():
        from shadowclone_docker_launch.prebuilds import newest_prebuilt

        made = newest_prebuilt(tag, environment.lifecycle.prebuild_digest())
        if made is not None:
            shown["prebuilt"] = {"tag": made[0], "commit": made[1]}
    return shown


def _compose_shown(environment: Environment) -> dict[str, object] | None:
    composed = environment.compose
    if composed is None:
        return None
    return {
        "files": list(composed.files),
        "service": composed.service.name,
        "services": [
            {"name": s.name, "image": s.image, "dockerfile": s.dockerfile} for s in composed.others
        ],
    }


@env.command()
@click.argument("repo")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def show(repo: str, as_json: bool) -> None:
    """Show what a clone of REPO (owner/repo) will get: the declared base, setup commands,
    lifecycle commands, variables, checks, caches and the image made from them."""
    shown = describe(repo)
    if as_json:
        sys.stdout.write(json.dumps(shown, indent=2, ensure_ascii=False) + "\n")
        return
    if shown["environment"] is None:
        click.echo(
            f"{shown['repo']} declares no environment: its clones run in {shown['clone_image']}"
        )
        return
    rows = [f"repo        {shown['repo']}", f"declared in {shown['environment']}"]
    others = [path for path in shown["found"] if path != shown["environment"]]
    if others:
        rows.append(
            f"also found  {', '.join(others)} (not read: choose with `shadowclone setup "
            f"{shown['repo']} --devcontainer PATH`)"
        )
    composed = shown["compose"]
    if composed:
        rows.append(
            f"compose     {', '.join(composed['files'])}: the clone is the service "
            f"{composed['service']}"
        )
        for service in composed["services"]:
            made = service["image"] or f"built from {service['dockerfile']}"
            rows.append(
                f"service     {service['name']} ({made}): starts beside each clone on the open "
                "network, ends with it"
            )
    if shown["image"]:
        rows.append(f"base        the image {shown['image']}")
    else:
        rows.append(f"base        {shown['dockerfile']} (context {shown['context']})")
    for name, value in shown["build_args"].items():
        rows.append(f"build arg   {name}={value}")
    rows += [f"feature     {feature}" for feature in shown["features"]]
    rows += [f"setup       {command}" for command in shown["setup"]]
    rows += [f"command     {key}: {line} (in the workspace)" for key, line in shown["lifecycle"]]
    if shown["workspace_folder"]:
        rows.append(f"workspace   {shown['workspace_folder']} (reaches the clone's workspace)")
    rows += [f"variable    {name}={value}" for name, value in shown["env"].items()]
    rows += [
        f"variable    {name}={value} (remoteEnv: for the engine and the lifecycle commands)"
        for name, value in shown["remote_env"].items()
    ]
    if shown["user"]:
        rows.append(
            f"user        {shown['user']} (not applied: the engine always runs as the clone's "
            "own engine user, apart from the secrets)"
        )
    for key, why in shown["not_applied"].items():
        if key not in ("remoteUser", "containerUser"):
            rows.append(f"not applied {key} ({why})")
    rows += [f"check       {command}" for command in shown["checks"]]
    rows += [f"cache       {path}" for path in shown["caches"]]
    if shown["ignored"]:
        rows.append(
            f"ignored     {', '.join(shown['ignored'])} (for an editor or the host: a clone does "
            "not use them)"
        )
    rows.append(f"on          {shown['clone_image']}")
    if shown["tag"] is None:
        rows.append("image       unknown until the clone image is here (shadowclone image build)")
    else:
        state = "built" if shown["built"] else "not built yet"
        rows.append(f"image       {shown['tag']} ({state})")
    if shown["prebuilt"]:
        made = shown["prebuilt"]
        rows.append(
            f"prebuilt    {made['tag']} (onCreateCommand and updateContentCommand run on "
            f"{made['commit'][:12]}; clones start from it)"
        )
    elif shown["tag"] is not None and any(
        key in ("onCreateCommand", "updateContentCommand") for key, _ in shown["lifecycle"]
    ):
        rows.append("prebuilt    none yet (serve makes one after a clone fills the repo's cache)")
    for row in rows:
        click.echo(row)


def build_environment(repo_text: str, network: str | None, ca_certs: Sequence[Path] = ()) -> str:
    """Build the image of the repository's environment (if it is not there yet); returns its
    tag, which the repository's clones run in."""
    from shadowclone.plugin import repository_setup

    from shadowclone_docker_launch.environments import ensure_image, plan_for

    found = repository_setup(repo_text)
    if found.environment is None:
        raise Refused(f"{found.repo} declares no environment: its clones run in the clone image")
    plan = plan_for(found.environment, found.clone_image)
    tag, _ = ensure_image(plan, network=network, ca_certs=ca_certs)
    return tag


@env.command("build")
@click.argument("repo")
@click.option(
    "--network",
    default="host",
    show_default=True,
    help="The network of the build's steps ('default' for Docker's own).",
)
@ca_cert_option
def build_env(repo: str, network: str, ca_certs: tuple[Path, ...]) -> None:
    """Build the image of REPO's environment ahead of its first clone (once per change of
    what it is made from), and run REPO's clones in it."""
    tag = build_environment(repo, None if network == "default" else network, ca_certs)
    click.echo(f"{repo}'s clones run in {tag}")


def main(argv: Sequence[str]) -> int:
    """`python -m shadowclone_docker_launch.commands image build ...`: the commands, for
    scripts that run them with a given Python."""
    try:
        cli = click.Group(commands={"image": image, "env": env})
        cli.main(args=list(argv), prog_name="shadowclone", standalone_mode=False)
    except (Refused, BadInput, MalformedFile, PluginUnavailable) as error:
        click.echo(f"shadowclone: {error}", err=True)
        return error.exit_code
    except click.ClickException as error:
        error.show()
        return error.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
