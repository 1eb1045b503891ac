"""From an installation as a user makes it (the README's install line, wheels of this checkout
standing in for the registry, nothing of the workspace): `shadowclone image build --demo` builds
the clone image and the demo image from the installed distributions, and
`shadowclone demo --launcher docker` runs its clone in a container of it."""

from __future__ import annotations

import contextlib
import re
import uuid
from pathlib import Path

import docker
import pytest
from shadowclone import __version__
from shadowclone_testing.containers import clone_image
from shadowclone_testing.installs import build_wheels, make_venv, run, user_env, uv_pip

BASE = "shadowclone-base:bookworm"
"""The base scripts/build-image makes where no image registry is reachable."""
RUN = uuid.uuid4().hex[:8]
"""This run's: the images it builds and removes are its own, never another run's beside it."""
TAG = f"shadowclone-install-test:{__version__}-{RUN}"
DEMO_TAG = f"shadowclone-install-test-demo:{__version__}-{RUN}"

SOURCE = Path(__file__).resolve().parents[2]
"""This checkout."""

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_image_build_and_the_docker_demo_from_an_installation(
    client: docker.DockerClient, tmp_path: Path
) -> None:
    clone_image(client, BASE)
    bin_dir = make_venv(tmp_path / "venv")
    uv_pip(bin_dir, *map(str, build_wheels(SOURCE, tmp_path / "wheels")))
    env = user_env(tmp_path / "home")
    certs = [
        arg
        for cert in sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))
        for arg in ("--ca-cert", str(cert))
    ]
    try:
        out = run(
            [
                str(bin_dir / "shadowclone"),
                "image",
                "build",
                "--tag",
                TAG,
                "--base",
                BASE,
                "--demo",
                "--demo-tag",
                DEMO_TAG,
                *certs,
            ],
            env=env,
            cwd=tmp_path,
            timeout=1800,
        )
        assert f"built {TAG} and {DEMO_TAG}" in out
        probe = "import shadowclone, sys; print(shadowclone.__version__)"
        output: bytes = client.containers.run(TAG, ["python", "-c", probe], remove=True)
        assert output.decode().strip() == __version__
        demo = run(
            [str(bin_dir / "shadowclone"), "demo", "--launcher", "docker", "--image", DEMO_TAG],
            env=env,
            cwd=tmp_path,
            timeout=900,
        )
        assert "serve is running (docker launcher, scripted engine)" in demo
        assert re.search(r"pull request http://[\d.]+:\d+/you/hello/pull/\d+", demo)
    finally:
        for name in (DEMO_TAG, TAG):
            with contextlib.suppress(docker.errors.ImageNotFound):
                client.images.remove(name)
