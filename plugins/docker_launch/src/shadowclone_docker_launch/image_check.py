"""Whether an image on this machine can run clones, asked before any container is made.

A clone image of another shadowclone, or one without an engine user, would start and then
fail inside, where the owner sees it late and unclearly; here the refusal says what to do.
"""

from __future__ import annotations

from typing import Any

import docker
import docker.errors
from shadowclone.plugin import CORE_VERSION, PluginUnavailable, Refused

from shadowclone_docker_launch.names import ENGINE_USER_VARIABLE, VERSION_LABEL
from shadowclone_docker_launch.scope import unreachable


def check_image(client: docker.DockerClient, image: str, owner_uid: int) -> str:
    """The image is here, has an engine user, and the owner is not that user; its id."""
    try:
        found = client.images.get(image)
    except docker.errors.ImageNotFound:
        raise PluginUnavailable(
            f"the clone image {image} is not on this machine: build it with "
            f"`shadowclone image build`, or `docker pull {image}`"
        ) from None
    except docker.errors.DockerException as error:
        raise unreachable(error) from None
    labels = (found.attrs.get("Config") or {}).get("Labels") or {}
    inside = labels.get(VERSION_LABEL)
    if inside and inside != CORE_VERSION:
        raise PluginUnavailable(
            f"the clone image {image} holds shadowclone {inside}, and this machine runs "
            f"{CORE_VERSION}: build it again with `shadowclone image build`"
        )
    engine = _engine_uid(found.attrs.get("Config") or {})
    if engine is None:
        raise PluginUnavailable(
            f"the clone image {image} has no engine user of its own (it predates them): "
            "build it again with `shadowclone image build`"
        )
    if engine == owner_uid:
        raise Refused(
            f"your uid {engine} is the clone image's engine user's; build the image with "
            "another (`docker build --build-arg ENGINE_UID=<a uid no owner has>` of "
            "image/Dockerfile)"
        )
    return str(found.id)


def _engine_uid(config: dict[str, Any]) -> int | None:
    """The engine user's uid an image's configuration names, or None."""
    for item in config.get("Env") or []:
        name, _, value = str(item).partition("=")
        uid = value.partition(":")[0]
        if name == ENGINE_USER_VARIABLE and uid.isdigit():
            return int(uid)
    return None
