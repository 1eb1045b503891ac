"""The images clones run on, on every node: pushed to the registry the owner names and run by
digest, so each node pulls exactly the image this machine built."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from typing import ClassVar

import docker
import docker.errors
from shadowclone.plugin import PluginUnavailable, one_line
from shadowclone_docker_launch.scope import explain, unreachable

DOCKER_TIMEOUT_S = 600
ACCEPT = {
    "Accept": ", ".join(
        (
            "application/vnd.docker.distribution.manifest.v2+json",
            "application/vnd.docker.distribution.manifest.list.v2+json",
            "application/vnd.oci.image.manifest.v1+json",
            "application/vnd.oci.image.index.v1+json",
        )
    )
}
"""The manifests a push makes, so the registry answers for the digest it gave."""


class Images:
    """Pushes from this machine's Docker, where images are built, to `registry`."""

    _pushed: ClassVar[dict[tuple[str, str], str]] = {}
    """(image id, registry) -> the reference by digest: one push per image per process."""
    _pushing: ClassVar[threading.Lock] = threading.Lock()
    """One push at a time: two clones prepared at once push their image once."""

    def __init__(self, local: docker.DockerClient | None, registry: str | None) -> None:
        self._local = local
        self.registry = registry

    @property
    def local(self) -> docker.DockerClient:
        if self._local is None:
            try:
                self._local = docker.from_env(timeout=DOCKER_TIMEOUT_S)
            except docker.errors.DockerException as error:
                raise unreachable(error) from None
        return self._local

    def pushed(self, image: str) -> bool:
        """Whether `image` needs no push (by digest already, no registry, or pushed)."""
        if "@sha256:" in image or self.registry is None:
            return True
        try:
            found = self.local.images.get(image)
        except docker.errors.ImageNotFound:
            return False  # `reference` says so
        except docker.errors.DockerException as error:
            raise unreachable(error) from None
        return (str(found.id), self.registry) in self._pushed

    def reference(self, image: str) -> str:
        """`image` as the nodes pull it: by digest from the registry (pushed first), or as it
        is where it is by digest already or no registry is named."""
        if "@sha256:" in image or self.registry is None:
            return image
        try:
            found = self.local.images.get(image)
        except docker.errors.ImageNotFound:
            raise PluginUnavailable(
                f"the clone image {image} is not on this machine: build it with "
                "`shadowclone image build`"
            ) from None
        key = (str(found.id), self.registry)
        with self._pushing:
            known = self._pushed.get(key)
            if known is None or not self._still_there(known):
                self._pushed[key] = self._push(image, str(found.id))
            return self._pushed[key]

    def _base_url(self) -> str:
        """The registry's API: plain HTTP on this machine (as Docker speaks to it), else TLS."""
        assert self.registry is not None
        host = self.registry.partition("/")[0]
        plain = host.startswith(("localhost", "127.")) or host.endswith(".localhost")
        return f"{'http' if plain else 'https'}://{host}/v2/"

    def _still_there(self, reference: str) -> bool:
        """False only when the registry says it has no such manifest (emptied or pruned since
        this process pushed): anything else (a login asked for, no answer) trusts the push."""
        name, _, digest = reference.partition("@")
        path = name.partition("/")[2]
        request = urllib.request.Request(
            f"{self._base_url()}{path}/manifests/{digest}", method="HEAD", headers=ACCEPT
        )
        try:
            with urllib.request.urlopen(request, timeout=10):
                return True
        except urllib.error.HTTPError as error:
            return error.code != 404
        except (urllib.error.URLError, OSError):
            return True

    def check(self) -> tuple[str, bool, str]:
        """Whether the registry answers this machine (the nodes reach it by the same name)."""
        url = self._base_url()
        try:
            with urllib.request.urlopen(url, timeout=10):
                pass
        except urllib.error.HTTPError as error:
            if error.code != 401:  # asks for a login: it answers
                return ("registry", False, f"{url} answered {error.code}")
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            return ("registry", False, f"{url} does not answer ({reason})")
        return ("registry", True, f"{self.registry}: clones' images are pushed there")

    def _push(self, image: str, image_id: str) -> str:
        name = image.rsplit("/", 1)[-1].partition("@")[0].partition(":")[0]
        repository = f"{self.registry}/shadowclone/{name}"
        tag = image_id.removeprefix("sha256:")[:16]
        try:
            self.local.images.get(image_id).tag(repository, tag)
            digest = None
            for event in self.local.images.push(repository, tag, stream=True, decode=True):
                if "error" in event:
                    raise PluginUnavailable(
                        f"could not push {image} to {self.registry}: {one_line(event['error'])}"
                    )
                digest = (event.get("aux") or {}).get("Digest", digest)
        except docker.errors.APIError as error:
            raise PluginUnavailable(
                f"could not push {image} to {self.registry}: {explain(error)}"
            ) from None
        if not digest:
            raise PluginUnavailable(f"{self.registry} gave no digest for {image}")
        return f"{repository}@{digest}"
