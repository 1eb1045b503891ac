"""The kit's local registry: it starts on loopback, features published to it with the Dev
Containers CLI are listed in its catalog, and it stops with the `with`."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from shadowclone_testing.registry import LocalRegistry, publish_features


def catalog(registry: LocalRegistry) -> list[str]:
    url = f"http://127.0.0.1:{registry.port}/v2/_catalog"
    with urllib.request.urlopen(url, timeout=5) as answer:
        found: list[str] = json.load(answer)["repositories"]
    return found


def test_a_published_feature_is_in_the_registry(
    sc_registry: LocalRegistry, sc_devcontainer_cli: Path, tmp_path: Path
) -> None:
    feature = tmp_path / "features" / "src" / "hello"
    feature.mkdir(parents=True)
    (feature / "devcontainer-feature.json").write_text(
        json.dumps({"id": "hello", "version": "2.1.0", "name": "Hello"})
    )
    (feature / "install.sh").write_text("#!/bin/sh\necho hello > /etc/hello\n")
    published = publish_features(
        sc_devcontainer_cli, sc_registry.address, "team/features", tmp_path / "features"
    )
    assert published == [f"{sc_registry.address}/team/features/hello:2"]
    assert "team/features/hello" in catalog(sc_registry)


def test_the_registry_stops_with_the_with(tmp_path: Path, sc_registry: LocalRegistry) -> None:
    with LocalRegistry(tmp_path / "other") as other:
        assert catalog(other) == []
    with pytest.raises((urllib.error.URLError, OSError)):
        catalog(other)
