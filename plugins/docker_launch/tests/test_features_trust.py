"""Features behind a TLS-inspecting proxy: the extra certificate authorities the owner gives
(`[environment] ca_certs`) are trusted where a feature's install script downloads, so a
feature that fetches over HTTPS from a server whose certificate only that authority signed is
installed; without them the build fails and says which option gives them. What a feature
declares besides its install is kept (its lifecycle commands) or named as not applied."""

from __future__ import annotations

import http.server
import json
import ssl
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
import trustme
from shadowclone.environment import devcontainer
from shadowclone.environment.declared import from_reading
from shadowclone.plugin import DEVCONTAINER_READING

from shadowclone_docker_launch.builds import CA_HINT, BuildError, docker_cli
from shadowclone_docker_launch.environments import ImagePlan
from shadowclone_docker_launch.features import build_with_features, features_metadata

SOURCE = ".devcontainer/devcontainer.json"
FETCH = (
    '#!/bin/sh\nset -e\npython3 -c "import urllib.request; '
    "print(urllib.request.urlopen('https://localhost:{port}/', timeout=10).read().decode())\""
    " > /etc/fetched\n"
)


class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"fetched through the proxy's authority"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def authority() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def https_port(authority: trustme.CA) -> Iterator[int]:
    """An HTTPS server on the host's loopback whose certificate only `authority` signed."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("localhost", "127.0.0.1").configure_cert(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def plan_for(folder: Path, port: int, image: str) -> ImagePlan:
    files = {
        SOURCE: json.dumps({"image": image, "features": {"./fetch": {}}}),
        ".devcontainer/fetch/devcontainer-feature.json": json.dumps(
            {
                "id": "fetch",
                "version": "1.0.0",
                "name": "Fetch",
                "postStartCommand": {"show": "cat /etc/fetched"},
                "privileged": True,
            }
        ),
        ".devcontainer/fetch/install.sh": FETCH.format(port=port),
    }
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    reading = devcontainer.read_configuration(files[SOURCE], SOURCE, "app")
    (folder / DEVCONTAINER_READING).parent.mkdir(parents=True, exist_ok=True)
    (folder / DEVCONTAINER_READING).write_text(json.dumps(reading))
    environment = from_reading(reading, SOURCE)
    return ImagePlan("owner/app", folder, files, environment, image)


def test_a_feature_downloads_through_an_authority_the_owner_gives(
    client: docker.DockerClient,
    image: str,
    authority: trustme.CA,
    https_port: int,
    sc_devcontainer_cli: Path,
    tmp_path: Path,
) -> None:
    pem = tmp_path / "proxy-ca.pem"
    authority.cert_pem.write_to_path(str(pem))
    plan = plan_for(tmp_path / "kept", https_port, image)
    tag = f"shadowclone-test-trust:{uuid.uuid4().hex[:12]}"
    heard: list[str] = []
    try:
        with pytest.raises(BuildError) as refused:  # the authority not given: not trusted
            build_with_features(plan, tag, docker_cli(), heard.append, None, "host", image)
        assert str(refused.value).endswith(CA_HINT), str(refused.value)
        build_with_features(plan, tag, docker_cli(), heard.append, None, "host", image, [pem])
        fetched = client.containers.run(tag, ["cat", "/etc/fetched"], entrypoint=[], remove=True)
        assert bytes(fetched).decode().strip() == "fetched through the proxy's authority"
        user = client.images.get(tag).attrs["Config"]["User"]
        assert user == client.images.get(image).attrs["Config"]["User"]  # as the base had it
        # What the feature declares besides: its commands kept for the run program, the rest
        # said to be not applied.
        said: list[str] = []
        kept = features_metadata(tag, said.append)
        assert kept == [{"id": "./fetch", "postStartCommand": {"show": "cat /etc/fetched"}}]
        assert said == [
            "feature ./fetch: privileged is not applied: a clone's container keeps its own"
        ]
    finally:
        for made in (tag, f"{tag}-trusting"):
            try:
                client.images.remove(made, force=True)
            except docker.errors.ImageNotFound:
                continue
