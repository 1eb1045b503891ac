"""`shadowclone image build`: build the clone image on this machine.

For owners who do not pull the published image, and for CI, where no registry is reachable.
It builds `image/Dockerfile` of a shadowclone checkout with the docker CLI (whose output the
owner wants to see live): the build context is that folder plus `packages/`, holding wheels of
the shadowclone distributions built from the checkout with `uv build` and the pinned
requirements of their dependencies from `uv.lock`, so that a cached build takes seconds.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import attrs
import click

from shadowclone.cli.app import App, pass_app
from shadowclone.config import load_config
from shadowclone.config.schema import DEFAULT_IMAGE, DEMO_IMAGE
from shadowclone.errors import ConfigError, ShadowcloneError

DEFAULT_BASE = "debian:bookworm-slim"
IMAGE_PACKAGES = ("shadowclone", "shadowclone-claude", "shadowclone-codex")
"""The distributions the clone needs inside: the run program and both engines."""
DEMO_PACKAGES = ("shadowclone-fake-launch",)
"""What the demo image adds: the scripted engine, which the demo and the Docker tests play
(with the test fakes of the same distribution, kept out of the image owners run)."""
STAGES = {"clone": "the clone image", "demo": "the demo image"}
"""The Dockerfile's stages this command builds."""
ENGINE_PINS = {"CLAUDE_CODE_VERSION": "CLAUDE_VERSION", "CODEX_VERSION": "CODEX_VERSION"}
"""Build argument of the Dockerfile -> variable of scripts/install-engines that pins it."""


class ImageBuildError(ShadowcloneError):
    """The image could not be built; the message says why and what to do."""


@attrs.frozen
class BuildPlan:
    """Everything `docker build` needs, once the context is prepared."""

    tag: str
    base: str
    context: Path
    build_args: dict[str, str]
    network: str | None = "host"
    platform: str | None = None
    push: bool = False
    quiet: bool = False
    target: str | None = None

    def command(self, docker: str = "docker") -> list[str]:
        buildx = self.platform is not None or self.push
        argv = [docker, "buildx", "build"] if buildx else [docker, "build"]
        argv += ["--tag", self.tag]
        if self.target:
            argv += ["--target", self.target]
        if self.network:
            argv += ["--network", self.network]
        if self.platform:
            argv += ["--platform", self.platform]
        if self.push:
            argv.append("--push")
        if self.quiet:
            argv.append("--quiet")
        for name, value in {"BASE_IMAGE": self.base, **self.build_args}.items():
            argv += ["--build-arg", f"{name}={value}"]
        argv.append(str(self.context))
        return argv


def is_source(folder: Path) -> bool:
    return (folder / "image" / "Dockerfile").is_file() and (
        folder / "scripts" / "install-engines"
    ).is_file()


def find_source(start: Path | None = None) -> Path:
    """The shadowclone checkout this code runs from (an editable or workspace install)."""
    here = (start or Path(__file__)).resolve()
    for folder in (here, *here.parents):
        if is_source(folder):
            return folder
    raise ImageBuildError(
        "cannot find shadowclone's sources (image/Dockerfile) around this installation; "
        "pass --source with a checkout of shadowclone, or pull the published image"
    )


def engine_versions(source: Path) -> dict[str, str]:
    """The engine versions scripts/install-engines pins, as the Dockerfile's build arguments:
    the image runs the engines the tests ran."""
    script = source / "scripts" / "install-engines"
    text = script.read_text(encoding="utf-8")
    found: dict[str, str] = {}
    for argument, variable in ENGINE_PINS.items():
        match = re.search(rf'^{variable}="([^"\s]+)"', text, re.MULTILINE)
        if match is None:
            raise ImageBuildError(f'{script}: no pinned {variable}="..." line')
        found[argument] = match.group(1)
    return found


def uv_command() -> list[str]:
    found = shutil.which("uv")
    if found:
        return [found]
    if importlib.util.find_spec("uv") is not None:
        return [sys.executable, "-m", "uv"]
    raise ImageBuildError("building the image needs uv (`pip install uv`)")


def _run(argv: Sequence[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise ImageBuildError(f"{what} failed (exit {done.returncode}): " + " | ".join(detail))


def prepare_context(
    source: Path,
    context: Path,
    ca_certs: Sequence[Path] = (),
    uv: Sequence[str] | None = None,
) -> dict[str, str]:
    """Fill `context` with image/, ca-certificates/ and packages/ (wheels and
    requirements.txt); returns the SHADOWCLONE_PACKAGES and DEMO_PACKAGES build arguments (the
    wheels, relative to packages/)."""
    uv = list(uv or uv_command())
    shutil.copytree(source / "image", context, dirs_exist_ok=True)
    authorities = context / "ca-certificates"
    authorities.mkdir(exist_ok=True)
    for number, cert in enumerate(ca_certs):
        try:
            text = cert.read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as error:
            raise ImageBuildError(f"{cert}: cannot read the certificate: {error}") from None
        if "-----BEGIN CERTIFICATE-----" not in text:
            raise ImageBuildError(f"{cert}: not a PEM certificate")
        (authorities / f"extra-{number}-{cert.stem}.crt").write_text(text, encoding="ascii")
    packages = context / "packages"
    packages.mkdir(exist_ok=True)
    build = [*uv, "build", "--project", str(source), "--all-packages", "--wheel"]
    _run([*build, "--out-dir", str(packages), "--quiet"], "uv build")
    export = [*uv, "export", "--project", str(source), "--frozen", "--no-dev"]
    export += ["--no-emit-workspace", "--no-hashes", "--no-header", "--no-annotate", "--quiet"]
    for name in IMAGE_PACKAGES:
        export += ["--package", name]
    _run([*export, "--output-file", str(packages / "requirements.txt")], "uv export")
    return {
        "SHADOWCLONE_PACKAGES": _wheels(packages, IMAGE_PACKAGES),
        "DEMO_PACKAGES": _wheels(packages, DEMO_PACKAGES),
    }


def _wheels(packages: Path, names: Sequence[str]) -> str:
    wheels = []
    for name in names:
        found = sorted(packages.glob(f"{name.replace('-', '_')}-*.whl"))
        if len(found) != 1:
            raise ImageBuildError(f"uv build made {len(found)} wheels of {name}, not one")
        wheels.append(f"./{found[0].name}")
    return " ".join(wheels)


def default_tag(app: App) -> str:
    """The image serve runs: the config's, or the default where there is no config yet."""
    try:
        config, _ = load_config(app.paths)
    except ConfigError:
        return DEFAULT_IMAGE
    return config.image


def build_image(
    tag: str,
    base: str = DEFAULT_BASE,
    source: Path | None = None,
    *,
    network: str | None = "host",
    platform: str | None = None,
    push: bool = False,
    quiet: bool = False,
    ca_certs: Sequence[Path] = (),
    demo_tag: str | None = None,
) -> None:
    """Build (and with `push`, publish) the clone image from a checkout of shadowclone, and
    with `demo_tag` the demo image on top of it; `ca_certs` are certificate authorities the
    image trusts besides Debian's."""
    if demo_tag is not None and push:
        raise ImageBuildError(
            "the demo image is built for this machine only: drop --demo or --push"
        )
    docker = shutil.which("docker")
    if docker is None:
        raise ImageBuildError("building the image needs the docker CLI; install Docker first")
    source = source or find_source()
    if not is_source(source):
        raise ImageBuildError(f"{source} is not a shadowclone checkout (no image/Dockerfile)")
    with tempfile.TemporaryDirectory(prefix="shadowclone-image-") as folder:
        context = Path(folder)
        packages = prepare_context(source, context, ca_certs)
        builds = {"clone": tag} | ({"demo": demo_tag} if demo_tag else {})
        for target, name in builds.items():
            plan = BuildPlan(
                tag=name,
                base=base,
                context=context,
                build_args={**engine_versions(source), **packages},
                network=network,
                target=target,
                platform=platform,
                push=push,
                quiet=quiet,
            )
            done = subprocess.run(plan.command(docker), check=False)
            if done.returncode != 0:
                raise ImageBuildError(
                    f"docker build of {STAGES[target]} {name} failed (exit {done.returncode}); "
                    "see above"
                )


@click.group()
def image() -> None:
    """The clone image: build it here if you do not pull the published one."""


@image.command()
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
    help="A checkout of shadowclone (default: the one this installation runs from).",
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
    "--ca-cert",
    "ca_certs",
    multiple=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="A PEM certificate authority to trust inside the image (a TLS-inspecting proxy).",
)
@pass_app
def build(
    app: App,
    tag: str | None,
    base: str,
    source: Path | None,
    network: str,
    platform: str | None,
    push: bool,
    quiet: bool,
    demo: bool,
    ca_certs: tuple[Path, ...],
) -> None:
    """Build the clone image from image/Dockerfile, with this checkout's shadowclone inside."""
    tag = tag or default_tag(app)
    build_image(
        tag,
        base,
        source,
        network=None if network == "default" else network,
        platform=platform,
        push=push,
        quiet=quiet,
        ca_certs=ca_certs,
        demo_tag=DEMO_IMAGE if demo else None,
    )
    if not quiet:
        app.out.print(f"built {tag}" + (f" and {DEMO_IMAGE}" if demo else ""))


def main(argv: Sequence[str]) -> int:
    """`python -m shadowclone.cli.image_cmd ARGS`: `shadowclone image ARGS`, for scripts that
    run it with a given Python."""
    from shadowclone.cli import main as cli_main

    return cli_main(["image", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
