"""`shadowclone env`: the environment a repository declares, as its clones will get it."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import click

from shadowclone.cli.app import App, emit_json, json_option, pass_app
from shadowclone.cli.image_cmd import build_image, ca_cert_option
from shadowclone.config import load_config
from shadowclone.environment.declared import Environment, declared, image_tag
from shadowclone.errors import Refused, ShadowcloneError
from shadowclone.node.schemas import SetupRecord
from shadowclone.node.setups import (
    environment_dir,
    environment_files,
    read_setup,
    write_setup,
)
from shadowclone.node.target import parse_repo


@click.group()
def env() -> None:
    """The environment a repository declares (.shadowclone/environment.toml or
    .devcontainer/devcontainer.json), as setup found it."""


def image_id(image: str) -> str | None:
    """The local id of `image`, or None where Docker cannot say."""
    docker = shutil.which("docker")
    if docker is None:
        return None
    done = subprocess.run(
        [docker, "image", "inspect", "--format", "{{.Id}}", image],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return done.stdout.strip() or None if done.returncode == 0 else None


@attrs.frozen
class Kept:
    """A set-up repository and the environment setup kept for it."""

    record: SetupRecord
    clone_image: str
    files: dict[str, str]
    environment: Environment | None

    def tag(self) -> str | None:
        """The environment image's tag, or None while the clone image is not here."""
        clone_id = image_id(self.clone_image)
        return image_tag(self.record.repo, clone_id, self.files) if clone_id else None


def kept(app: App, repo_text: str) -> Kept:
    owner, name = parse_repo(repo_text)
    repo = f"{owner}/{name}"
    record = read_setup(app.paths, repo)
    if record is None:
        raise Refused(f"{repo} is not set up here: run `shadowclone setup {repo}` first")
    config, _ = load_config(app.paths)
    clone_image = record.image or config.image
    if record.environment is None:
        return Kept(record, clone_image, {}, None)
    files = environment_files(app.paths, record.repo)
    environment = declared(files)
    if environment is None:
        raise Refused(
            f"setup kept no environment files for {record.repo}: run `shadowclone setup "
            f"{record.repo}` again"
        )
    return Kept(record, clone_image, files, environment)


def describe(app: App, repo_text: str) -> dict[str, Any]:
    found = kept(app, repo_text)
    shown: dict[str, Any] = {
        "repo": found.record.repo,
        "clone_image": found.clone_image,
        "environment": None,
    }
    environment = found.environment
    if environment is None:
        return shown
    tag = found.tag()
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
        files=sorted(found.files),
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
        rows.append(f"user        {shown['user']}")
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


class EnvironmentBuildError(ShadowcloneError):
    """The environment's image could not be built; docker's output above says why."""


def _docker(argv: list[str], what: str) -> None:
    docker = shutil.which("docker")
    if docker is None:
        raise EnvironmentBuildError("building an environment needs the docker CLI")
    done = subprocess.run([docker, *argv], check=False)
    if done.returncode != 0:
        raise EnvironmentBuildError(f"docker could not build {what} (exit {done.returncode})")


def final_dockerfile(base: str, environment: Environment) -> str:
    """The last layer: the environment's variables, then its setup commands, as root with
    the network on; nothing of the owner's secrets is there to read."""
    lines = [f"FROM {base}", "USER root"]
    lines += [f"ENV {name}={_quoted(value)}" for name, value in environment.env.items()]
    lines += [f"RUN {json.dumps(['/bin/sh', '-c', command])}" for command in environment.setup]
    lines.append(f"LABEL io.shadowclone.environment={json.dumps(environment.source)}")
    return "\n".join(lines) + "\n"


def _quoted(value: str) -> str:
    """`value` as a Dockerfile ENV value: quoted, with nothing expanded (`$`) or escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'


def build_environment(
    app: App, repo_text: str, network: str | None, ca_certs: Sequence[Path] = ()
) -> str:
    """Build the image of the repository's environment (if it is not there yet) and make it
    the image of the repository's clones; returns its tag."""
    found = kept(app, repo_text)
    repo, environment = found.record.repo, found.environment
    if environment is None:
        raise Refused(f"{repo} declares no environment: its clones run in the clone image")
    tag = found.tag()
    if tag is None:
        raise Refused(
            f"the clone image {found.clone_image} is not on this machine: build it with "
            "`shadowclone image build`, then build the environment"
        )
    folder = environment_dir(app.paths, repo)
    name, _, digest = tag.partition(":")
    net = ["--network", network] if network else []
    if image_id(tag) is None:
        base = environment.image
        if environment.dockerfile is not None:
            base = f"{name}:{digest}-base"
            args = [f"--build-arg={key}={value}" for key, value in environment.build_args.items()]
            dockerfile = folder / environment.dockerfile
            context = folder / environment.context
            _docker(
                ["build", *net, "--tag", base, "--file", str(dockerfile), *args, str(context)],
                f"the base of {repo}'s environment from {environment.dockerfile}",
            )
        assert base is not None
        clone = f"{name}:{digest}-clone"
        build_image(clone, base, network=network, ca_certs=ca_certs)
        with tempfile.TemporaryDirectory(prefix="shadowclone-env-") as context_dir:
            (Path(context_dir) / "Dockerfile").write_text(final_dockerfile(clone, environment))
            _docker(["build", *net, "--tag", tag, context_dir], f"{repo}'s environment")
    write_setup(app.paths, attrs.evolve(found.record, environment_image=tag))
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
