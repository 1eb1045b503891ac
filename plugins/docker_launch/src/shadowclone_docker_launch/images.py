"""Building the clone image on this machine (`shadowclone image build`, commands.py).

For owners who do not pull the published image, and for CI, where no registry is reachable.
It builds the repository's `image/Dockerfile` (shipped in this plugin's wheel) with the docker
CLI (whose output the owner wants to see live): the build context is that folder plus
`packages/`, holding wheels of the shadowclone distributions and the pinned requirements of
their dependencies. From a checkout, `uv build` makes the wheels and `uv.lock` pins the rest;
from an installation, the wheels are made of the installed files and the pins are the installed
versions, so the image runs what this machine runs. A cached build takes seconds.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Sequence
from importlib import resources
from importlib.abc import Traversable
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import attrs
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from shadowclone.plugin import CORE_VERSION, Refused

from shadowclone_docker_launch.builds import BuildError, Say, run_build

DEFAULT_BASE = "debian:bookworm-slim"
IMAGE_PACKAGES = ("shadowclone", "shadowclone-claude", "shadowclone-codex")
"""The distributions the clone needs inside: the run program and both engines."""
DEMO_PACKAGES = ("shadowclone-testing", "shadowclone-fake-launch")
"""What the demo image adds: the scripted engine, which the demo and the Docker tests play
(with the test fakes of the same distribution, kept out of the image owners run), and the
test-script player of the fake launcher's distribution, which the Docker tests run in it."""
STAGES = {"clone": "the clone image", "demo": "the demo image"}
"""The Dockerfile's stages this command builds."""
ENGINE_PINS = {"CLAUDE_CODE_VERSION": "CLAUDE_VERSION", "CODEX_VERSION": "CODEX_VERSION"}
"""Build argument of the Dockerfile -> variable of image/engines.env that pins it."""
IMAGE_FILES = ("Dockerfile", "clone-entry")
"""What of image/ goes into the build context."""


class ImageBuildError(Refused):
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


def image_files() -> Traversable:
    """The Dockerfile, the entry point and the engine pins: the copy this plugin's wheel ships
    (its build puts the checkout's image/ there), which wins when present; an editable install
    runs from the checkout and has no copy, so it reads the checkout's own image/."""
    shipped = resources.files("shadowclone_docker_launch") / "image"
    if shipped.is_dir():
        return shipped
    source = find_source()
    if source is None:
        raise ImageBuildError(
            "this shadowclone-docker-launch has no image/: neither its wheel's nor a checkout's"
        )
    return source / IMAGE_IN_SOURCE


IMAGE_IN_SOURCE = Path("image")
"""Where image/ is in a checkout: at its top."""


def is_source(folder: Path) -> bool:
    return (folder / IMAGE_IN_SOURCE / "Dockerfile").is_file() and (folder / "uv.lock").is_file()


def find_source(start: Path | None = None) -> Path | None:
    """The shadowclone checkout this code runs from (an editable or workspace install), or None
    for an installation from wheels."""
    here = (start or Path(__file__)).resolve()
    for folder in (here, *here.parents):
        if is_source(folder):
            return folder
    return None


def engine_versions(files: Traversable | Path | None = None) -> dict[str, str]:
    """The engine versions image/engines.env pins (scripts/install-engines installs the same
    for the tests), as the Dockerfile's build arguments: the image runs the engines the tests
    ran."""
    pins = (files or image_files()) / "engines.env"
    text = pins.read_text(encoding="utf-8")
    found: dict[str, str] = {}
    for argument, variable in ENGINE_PINS.items():
        match = re.search(rf'^{variable}="([^"\s]+)"', text, re.MULTILINE)
        if match is None:
            raise ImageBuildError(f'{pins}: no pinned {variable}="..." line')
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
    source: Path | None,
    context: Path,
    ca_certs: Sequence[Path] = (),
    uv: Sequence[str] | None = None,
) -> dict[str, str]:
    """Fill `context` with the image files, ca-certificates/ and packages/ (wheels and
    requirements.txt): from a checkout, wheels `uv build` makes and the versions `uv.lock` pins;
    from an installation (`source` None), wheels of the installed distributions and the
    versions installed beside them. Returns the SHADOWCLONE_PACKAGES and DEMO_PACKAGES build
    arguments (the wheels, relative to packages/)."""
    files = image_files()
    context.mkdir(parents=True, exist_ok=True)
    for name in IMAGE_FILES:
        (context / name).write_bytes((files / name).read_bytes())
    (context / "clone-entry").chmod(0o755)
    write_authorities(context / "ca-certificates", ca_certs)
    packages = context / "packages"
    packages.mkdir(exist_ok=True)
    if source is None:
        for name in (*IMAGE_PACKAGES, *DEMO_PACKAGES):
            with contextlib.suppress(PackageNotFoundError):
                wheel_from_installed(name, packages)
        pins = installed_requirements(IMAGE_PACKAGES)
        (packages / "requirements.txt").write_text("".join(f"{p}\n" for p in pins))
    else:
        uv = list(uv or uv_command())
        build = [*uv, "build", "--project", str(source), "--all-packages", "--wheel"]
        _run([*build, "--out-dir", str(packages), "--quiet"], "uv build")
        export = [*uv, "export", "--project", str(source), "--frozen", "--no-dev"]
        export += ["--no-emit-workspace", "--no-hashes", "--no-header", "--no-annotate", "--quiet"]
        for name in IMAGE_PACKAGES:
            export += ["--package", name]
        _run([*export, "--output-file", str(packages / "requirements.txt")], "uv export")
    return {
        "SHADOWCLONE_PACKAGES": _wheels(packages, IMAGE_PACKAGES),
        "DEMO_PACKAGES": _wheels(packages, DEMO_PACKAGES, optional=True),
    }


def write_authorities(folder: Path, ca_certs: Sequence[Path]) -> list[Path]:
    """Copy the extra certificate authorities into `folder` as `*.crt` files, each checked to
    be a PEM certificate; the copies."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for number, cert in enumerate(ca_certs):
        try:
            text = cert.read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as error:
            raise ImageBuildError(f"{cert}: cannot read the certificate: {error}") from None
        if "-----BEGIN CERTIFICATE-----" not in text:
            raise ImageBuildError(f"{cert}: not a PEM certificate")
        written.append(folder / f"extra-{number}-{cert.stem}.crt")
        written[-1].write_text(text, encoding="ascii")
    return written


SKIPPED_METADATA = {"INSTALLER", "REQUESTED", "RECORD", "direct_url.json"}
"""What an installer adds to a distribution's metadata: no part of the wheel."""


def wheel_from_installed(name: str, out: Path) -> Path:
    """A wheel of the installed distribution `name`, made from the files it installed (its
    RECORD): the image gets the very code this machine runs, with no registry and no sources."""
    dist = distribution(name)
    direct = dist.read_text("direct_url.json")
    if direct and json.loads(direct).get("dir_info", {}).get("editable"):
        raise ImageBuildError(
            f"{name} is installed in editable mode: pass --source with its checkout"
        )
    tags = [
        line.split(":", 1)[1].strip()
        for line in (dist.read_text("WHEEL") or "").splitlines()
        if line.startswith("Tag:")
    ]
    if not tags or not dist.files:
        raise ImageBuildError(f"{name}: its installation has no WHEEL tags or RECORD")
    version = dist.version
    stem = f"{canonicalize_name(name).replace('-', '_')}-{version}"
    wheel = out / f"{stem}-{tags[0]}.whl"
    info = f"{stem}.dist-info"
    record: list[str] = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in dist.files:
            parts = file.parts
            if parts[0] == ".." or "__pycache__" in parts or file.suffix == ".pyc":
                continue  # scripts (the installer makes them again) and byte code
            if parts[0].endswith(".dist-info") and file.name in SKIPPED_METADATA:
                continue
            arcname = "/".join((info, *parts[1:]) if parts[0].endswith(".dist-info") else parts)
            data = Path(str(file.locate())).read_bytes()
            archive.writestr(arcname, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{arcname},sha256={digest.decode()},{len(data)}")
        record.append(f"{info}/RECORD,,")
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel


def installed_requirements(names: Sequence[str]) -> list[str]:
    """`name==version` of every distribution the given ones need, as installed here (their
    own excluded: they come as wheels)."""
    own = {canonicalize_name(name) for name in names}
    pins: dict[str, str] = {}
    todo = [Requirement(name) for name in names]
    while todo:
        requirement = todo.pop()
        key = canonicalize_name(requirement.name)
        if key in pins:
            continue
        try:
            dist = distribution(requirement.name)
        except PackageNotFoundError:
            raise ImageBuildError(f"{requirement.name} is not installed here") from None
        pins[key] = dist.version
        extras = requirement.extras or {""}
        for text in dist.requires or []:
            needed = Requirement(text)
            if needed.marker is None or any(
                needed.marker.evaluate({"extra": extra}) for extra in extras
            ):
                todo.append(needed)
    return [f"{name}=={version}" for name, version in sorted(pins.items()) if name not in own]


def _wheels(packages: Path, names: Sequence[str], *, optional: bool = False) -> str:
    wheels = []
    for name in names:
        found = sorted(packages.glob(f"{name.replace('-', '_')}-*.whl"))
        if optional and not found:
            continue
        if len(found) != 1:
            raise ImageBuildError(
                f"{len(found)} wheels of {name}, not one: is it installed?"
                if not found
                else f"{len(found)} wheels of {name}, not one"
            )
        wheels.append(f"./{found[0].name}")
    return " ".join(wheels)


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
    say: Say | None = None,
    cancel: threading.Event | None = None,
) -> None:
    """Build (and with `push`, publish) the clone image from a checkout of shadowclone, and
    with `demo_tag` the demo image on top of it; `ca_certs` are certificate authorities the
    image trusts besides Debian's. With `say`, docker's output goes there line by line, and a
    set `cancel` ends the build."""
    if demo_tag is not None and push:
        raise ImageBuildError(
            "the demo image is built for this machine only: drop --demo or --push"
        )
    docker = shutil.which("docker")
    if docker is None:
        raise ImageBuildError("building the image needs the docker CLI; install Docker first")
    source = source or find_source()
    if source is not None and not is_source(source):
        raise ImageBuildError(
            f"{source} is not a shadowclone checkout (no {IMAGE_IN_SOURCE}/Dockerfile)"
        )
    with tempfile.TemporaryDirectory(prefix="shadowclone-image-") as folder:
        context = Path(folder)
        packages = prepare_context(source, context, ca_certs)
        if demo_tag is not None and not packages["DEMO_PACKAGES"]:
            raise ImageBuildError(
                "the demo image needs shadowclone-testing: install it beside shadowclone"
            )
        builds = {"clone": tag} | ({"demo": demo_tag} if demo_tag else {})
        for target, name in builds.items():
            plan = BuildPlan(
                tag=name,
                base=base,
                context=context,
                build_args={
                    **engine_versions(),
                    **packages,
                    "SHADOWCLONE_VERSION": CORE_VERSION,
                },
                network=network,
                target=target,
                platform=platform,
                push=push,
                quiet=quiet,
            )
            try:  # with no `say`, docker's lines go to our output as they come
                run_build(plan.command(docker), f"{STAGES[target]} {name}", say, cancel)
            except BuildError as error:
                raise ImageBuildError(str(error)) from None
