"""setup with the Docker launcher and no clone image on this machine: one line says how to get
the image (the launcher's check for the config's image, the check clone for a repository's own),
and no setup record is written."""

from __future__ import annotations

import os
from collections.abc import Callable

import docker
from shadowclone.config import Paths, set_value
from shadowclone.node.setups import read_setup
from shadowclone_testing.harness import CliResult

MISSING = "shadowclone-no-such-image:0"


def test_setup_says_how_to_get_a_missing_image(
    client: docker.DockerClient, sc_cli: Callable[..., CliResult], sc_home: Paths
) -> None:
    assert not client.images.list(name=MISSING)
    set_value(sc_home, "launcher", '"docker"')
    set_value(sc_home, "image", f'"{MISSING}"')
    descriptor = os.open(sc_home.secrets_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write('github_token = "ghp_x"\n')
    result = sc_cli("setup", "you/app")
    assert result.code == 1, result.out + result.err
    assert [line.split()[1] for line in result.out.splitlines() if line.startswith("FAIL")] == [
        "launcher"
    ]
    words = " ".join(result.out.split())  # a narrow terminal may wrap the line
    assert (
        f"FAIL launcher docker: the clone image {MISSING} is not on this machine: build it "
        f"with `shadowclone image build`, or `docker pull {MISSING}`"
    ) in words
    assert "next: fix the launcher, then run setup again" in words


def test_setup_with_a_missing_image_of_its_own_says_how_to_get_it(
    client: docker.DockerClient, sc_cli: Callable[..., CliResult], sc_home: Paths, image: str
) -> None:
    """The config's image is there, the repository's own (--image) is not: the check clone
    cannot start, and says how to get that image."""
    set_value(sc_home, "launcher", '"docker"')
    set_value(sc_home, "image", f'"{image}"')
    descriptor = os.open(sc_home.secrets_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write('github_token = "ghp_x"\n')
    result = sc_cli("setup", "you/app", "--image", MISSING)
    assert result.code == 1, result.out + result.err
    words = " ".join(result.out.split())
    assert "ok launcher docker can run clones" in words
    assert (
        f"FAIL check clone the clone image {MISSING} is not on this machine: build it "
        f"with `shadowclone image build`, or `docker pull {MISSING}`"
    ) in words
    assert "Traceback" not in result.err
    assert read_setup(sc_home, "you/app") is None
    assert "Traceback" not in result.err
    assert read_setup(sc_home, "you/app") is None
