"""A network-off clone's one way out: its egress proxy container and the relay to it.

An open clone is on Docker's default bridge and reaches servers on the host at
host.docker.internal. A network-off clone (`NetworkMode.MODEL_ONLY`) has no network but
loopback; its one way out is an egress proxy container (`proxy.py`, run from the clone image)
on the default bridge, which forwards only to the spec's model host (and the login's token
host), and only for a client holding the clone's egress token. The proxy listens on a Unix
socket in a volume the two share, and a relay in the clone (image/clone-entry) listens on
127.0.0.1:3128. The run program alone gets the token, in SHADOWCLONE_EGRESS_PROXY: its model
proxy goes out that way, and the engine, which reaches the model only through the run
program's model proxy, cannot use the relay. (An internal Docker network is not enough: from
one, a container still reaches every address of the host.)
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

import docker.errors
from docker.models.containers import Container
from docker.types import Mount
from shadowclone.plugin import LaunchSpec, PluginUnavailable, Refused

from shadowclone_docker_launch import proxy
from shadowclone_docker_launch.names import (
    CLONE_UID,
    EGRESS_FOLDER,
    EGRESS_SOCKET,
    EGRESS_USER,
    EGRESS_VARIABLE,
    HOST_GATEWAY,
    LABEL_EGRESS_OF,
    LABEL_PROXY_OF,
    LABEL_SCOPE,
    RELAY_ADDRESS,
    proxy_name,
    volume_name,
)
from shadowclone_docker_launch.scope import RUNNING_STATES, TAIL_LINES, DockerScope, explain, state

PROXY_READY_S = 15.0


def shut_off(
    docker_scope: DockerScope,
    spec: LaunchSpec,
    mounts: list[Mount],
    environment: dict[str, str],
) -> dict[str, Any]:
    """Start the clone's egress proxy, add to `mounts` and `environment` what the clone needs
    to reach it, and return the container options that leave it no network of its own."""
    token = secrets.token_urlsafe(32)
    start_proxy(docker_scope, spec, token)
    mounts.append(Mount(EGRESS_FOLDER, volume_name(spec.clone_id), type="volume", read_only=True))
    environment["SHADOWCLONE_EGRESS_SOCKET"] = EGRESS_SOCKET
    environment[EGRESS_VARIABLE] = f"http://{EGRESS_USER}:{token}@{RELAY_ADDRESS}"
    environment["NO_PROXY"] = environment["no_proxy"] = "localhost,127.0.0.1,::1"
    return {"network_mode": "none"}


def start_proxy(docker_scope: DockerScope, spec: LaunchSpec, token: str) -> None:
    """The egress proxy of a network-off clone, and the volume of its socket."""
    if not spec.model_host:
        raise Refused(
            f"clone {spec.clone_id} is network-off and its spec names no model host to reach"
        )
    docker_scope.remove_all(spec.clone_id, keep_clone=True)  # leftovers of a launch that died
    labels = {LABEL_SCOPE: docker_scope.scope}
    client = docker_scope.client
    try:
        client.volumes.create(
            volume_name(spec.clone_id), labels={**labels, LABEL_EGRESS_OF: spec.clone_id}
        )
        helper = client.containers.create(
            spec.image,
            entrypoint=["python3", "-c", Path(proxy.__file__).read_text(encoding="utf-8")],
            command=[
                *("--allow", spec.model_host),
                *(("--allow", spec.auth_host) if spec.auth_host else ()),
                *("--socket", EGRESS_SOCKET),
            ],
            environment={proxy.TOKEN_VARIABLE: token},
            name=proxy_name(spec.clone_id),
            labels={**labels, LABEL_PROXY_OF: spec.clone_id},
            mounts=[Mount(EGRESS_FOLDER, volume_name(spec.clone_id), type="volume")],
            extra_hosts=HOST_GATEWAY,
            init=True,
            user=f"{CLONE_UID}:{CLONE_UID}",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges:true"],
            read_only=True,
            mem_limit="256m",
        )
        helper.start()
    except docker.errors.APIError as error:
        docker_scope.remove_all(spec.clone_id, keep_clone=True)
        raise PluginUnavailable(
            f"Docker could not start the egress proxy of clone {spec.clone_id}: {explain(error)}"
        ) from None
    _wait_proxy(docker_scope, helper, spec.clone_id)


def _wait_proxy(docker_scope: DockerScope, helper: Container, clone_id: str) -> None:
    """Until the proxy says it listens: a clone started before would find no way out."""
    deadline = time.monotonic() + PROXY_READY_S
    while time.monotonic() < deadline:
        logs = helper.logs().decode("utf-8", errors="replace")
        if proxy.READY_LINE in logs:
            return
        helper.reload()
        if state(helper) not in RUNNING_STATES:
            break
        time.sleep(0.05)
    output = helper.logs(tail=TAIL_LINES).decode("utf-8", errors="replace").strip()
    docker_scope.remove_all(clone_id, keep_clone=True)
    raise PluginUnavailable(
        f"the egress proxy of clone {clone_id} did not start: {output or 'no output'}"
    )
