"""Images reach the nodes through the owner's registry: pushed once per image, named by
digest, and pushed again when the registry no longer has what this process pushed (emptied,
garbage-collected, or another registry at the same address)."""

from __future__ import annotations

import io
import shutil
import tarfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from shadowclone_testing.containers import docker_client
from shadowclone_testing.registry import LocalRegistry

from shadowclone_swarm_launch.images import ACCEPT, Images


@pytest.fixture
def tiny_image(tmp_path: Path) -> Iterator[str]:
    """An image of one small file, made on this machine's Docker."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        content = tmp_path.name.encode()  # unique: its own layer and id
        entry = tarfile.TarInfo("hello.txt")
        entry.size = len(content)
        tar.addfile(entry, io.BytesIO(content))
    client = docker_client()
    name = f"shadowclone-test-tiny:{tmp_path.name[-12:].lower()}"
    repository, tag = name.split(":")
    client.api.import_image_from_data(data.getvalue(), repository=repository, tag=tag)
    try:
        yield name
    finally:
        client.images.remove(name, force=True)


def manifest_there(registry: LocalRegistry, reference: str) -> bool:
    name, _, digest = reference.partition("@")
    path = name.partition("/")[2]
    request = urllib.request.Request(
        f"http://127.0.0.1:{registry.port}/v2/{path}/manifests/{digest}", headers=ACCEPT
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return bool(answer.status == 200)
    except urllib.error.HTTPError as error:
        assert error.code == 404, error
        return False


def test_an_image_is_pushed_once_and_again_when_the_registry_lost_it(
    sc_registry: LocalRegistry, tiny_image: str
) -> None:
    images = Images(docker_client(), sc_registry.address)
    assert not images.pushed(tiny_image)
    reference = images.reference(tiny_image)
    assert reference.startswith(f"{sc_registry.address}/shadowclone/shadowclone-test-tiny@sha256:")
    assert images.pushed(tiny_image) and manifest_there(sc_registry, reference)
    assert Images(docker_client(), sc_registry.address).reference(tiny_image) == reference
    shutil.rmtree(sc_registry.folder / "data")  # the registry emptied behind our back
    assert not manifest_there(sc_registry, reference)
    assert images.reference(tiny_image) == reference, "the same image, the same digest"
    assert manifest_there(sc_registry, reference), "pushed again"


def test_an_image_named_by_digest_or_with_no_registry_is_used_as_it_is(tiny_image: str) -> None:
    by_digest = "registry.lan/app@sha256:" + "0" * 64
    assert Images(docker_client(), "registry.lan").reference(by_digest) == by_digest
    assert Images(docker_client(), None).reference(tiny_image) == tiny_image
