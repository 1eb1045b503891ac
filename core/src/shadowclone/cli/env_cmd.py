"""`shadowclone env`: the environment a repository declares, as its clones will get it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import click

from shadowclone.cli.app import App, emit_json, json_option, pass_app
from shadowclone.cli.image_cmd import ca_cert_option
from shadowclone.config import load_config
from shadowclone.environment.build import ImagePlan, ensure_image, image_id, plan_from
from shadowclone.errors import Refused
from shadowclone.node.schemas import SetupRecord
from shadowclone.node.setups import (
    environment_dir,
    environment_files,
    read_setup,
)
from shadowclone.node.target import parse_repo


@click.group()
def env() -> None:
    """The environment a repository declares (.shadowclone/environment.toml or
    .devcontainer/devcontainer.json), as setup found it."""


@attrs.frozen
class Kept:
    """A set-up repository and the environment setup kept for it."""

    record: SetupRecord
    clone_image: str
    recipe: ImagePlan | None


def kept(app: App, repo_text: str) -> Kept:
    owner, name = parse_repo(repo_text)
    repo = f"{owner}/{name}"
    record = read_setup(app.paths, repo)
    if record is None:
        raise Refused(f"{repo} is not set up here: run `shadowclone setup {repo}` first")
    config, _ = load_config(app.paths)
    clone_image = record.image or config.image
    if record.environment is None:
        return Kept(record, clone_image, None)
    folder = environment_dir(app.paths, record.repo)
    files = environment_files(app.paths, record.repo)
    return Kept(record, clone_image, plan_from(record.repo, folder, files, clone_image))


def describe(app: App, repo_text: str) -> dict[str, Any]:
    found = kept(app, repo_text)
    shown: dict[str, Any] = {
        "repo": found.record.repo,
        "clone_image": found.clone_image,
        "environment": None,
    }
    if found.recipe is None:
        return shown
    environment = found.recipe.environment
    tag = found.recipe.tag()
    shown.update(
        environment=environment.source,
        image=environment.image,
        dockerfile=environment.dockerfile,
        context=environment.context if environment.dockerfile else None,
        build_args=dict(environment.build_args),
        setup=list(environment.setup),
        env=dict(environment.env),
        user=environment.user,
        checks=list(environment.checks),
        caches=list(environment.caches),
        ignored=list(environment.ignored),
        files=sorted(found.recipe.files),
        tag=tag,
        built=None if tag is None else image_id(tag) is not None,
    )
    return shown


@env.command()
@click.argument("repo")
@json_option
@pass_app
def show(app: App, repo: str, as_json: bool) -> None:
    """Show what a clone of REPO (owner/repo) will get: the declared base, setup commands,
    variables, checks, caches and the image made from them."""
    shown = describe(app, repo)
    if as_json:
        emit_json(shown)
        return
    out = app.out
    if shown["environment"] is None:
        out.print(
            f"{shown['repo']} declares no environment: its clones run in {shown['clone_image']}",
            markup=False,
        )
        return
    rows = [f"repo        {shown['repo']}", f"declared in {shown['environment']}"]
    if shown["image"]:
        rows.append(f"base        the image {shown['image']}")
    else:
        rows.append(f"base        {shown['dockerfile']} (context {shown['context']})")
    for name, value in shown["build_args"].items():
        rows.append(f"build arg   {name}={value}")
    rows += [f"setup       {command}" for command in shown["setup"]]
    rows += [f"variable    {name}={value}" for name, value in shown["env"].items()]
    if shown["user"]:
        rows.append(
            f"user        {shown['user']} (not applied: the engine always runs as the clone's "
            "own engine user, apart from the secrets)"
        )
    rows += [f"check       {command}" for command in shown["checks"]]
    rows += [f"cache       {path}" for path in shown["caches"]]
    if shown["ignored"]:
        rows.append(f"ignored     {', '.join(shown['ignored'])} (a clone does not use them)")
    rows.append(f"on          {shown['clone_image']}")
    if shown["tag"] is None:
        rows.append("image       unknown until the clone image is here (shadowclone image build)")
    else:
        state = "built" if shown["built"] else "not built yet"
        rows.append(f"image       {shown['tag']} ({state})")
    for row in rows:
        out.print(row, markup=False, highlight=False)


def build_environment(
    app: App, repo_text: str, network: str | None, ca_certs: Sequence[Path] = ()
) -> str:
    """Build the image of the repository's environment (if it is not there yet); returns its
    tag, which the repository's clones run in."""
    found = kept(app, repo_text)
    if found.recipe is None:
        raise Refused(
            f"{found.record.repo} declares no environment: its clones run in the clone image"
        )
    tag, _ = ensure_image(found.recipe, network=network, ca_certs=ca_certs)
    return tag


@env.command()
@click.argument("repo")
@click.option(
    "--network",
    default="host",
    show_default=True,
    help="The network of the build's steps ('default' for Docker's own).",
)
@ca_cert_option
@pass_app
def build(app: App, repo: str, network: str, ca_certs: tuple[Path, ...]) -> None:
    """Build the image of REPO's environment ahead of its first clone (once per change of
    what it is made from), and run REPO's clones in it."""
    tag = build_environment(app, repo, None if network == "default" else network, ca_certs)
    app.out.print(f"{repo}'s clones run in {tag}", markup=False, highlight=False)
