"""A network-off clone on the swarm: its one way out is its egress proxy.

A service has no `none` network. A network-off clone's service is on an overlay network of its
own made `--internal` (no way off it, no gateway), where one other service listens: its egress
proxy (the Docker plugin's `proxy.py`, run from the clone image, in `--listen` mode), which is
also on the launcher's egress network and forwards only to the spec's model host (and the
login's token host), only for the holder of the clone's egress token (the run program, never
the engine). The proxy answers by its service name in DNS round-robin mode (`dnsrr`).
"""

from __future__ import annotations

import contextlib
import secrets
import time
from pathlib import Path
from typing import Any, cast

import docker
import docker.errors
from docker.types import EndpointSpec, RestartPolicy, ServiceMode
from shadowclone.plugin import LaunchSpec, PluginUnavailable
from shadowclone_docker_launch import proxy
from shadowclone_docker_launch.names import (
    CLONE_UID,
    EGRESS_USER,
    EGRESS_VARIABLE,
    LABEL_PROXY_OF,
    LABEL_SCOPE,
    proxy_name,
)
from shadowclone_docker_launch.scope import explain

from shadowclone_swarm_launch.tasks import logs

EGRESS_NETWORK = "shadowclone-egress"
"""The overlay the launcher's proxies reach the model providers from (one per swarm)."""
PROXY_PORT = 3128
PROXY_READY_S = 120.0
"""A proxy's first start may pull the image on its node."""


def internal_network(clone_id: str) -> str:
    return f"shadowclone-{clone_id}-internal"


def shut_off(
    client: docker.DockerClient,
    spec: LaunchSpec,
    image: str,
    scope: str,
    also: tuple[str, ...] = (),
) -> tuple[list[str], dict[str, str]]:
    """Start the clone's internal network and egress proxy; the networks of the clone's
    service, and the variables that tell its run program the way out. `also`: host:port
    the run program reaches besides the model (serve's relay), through the proxy too."""
    assert spec.model_host, "`launch` refuses a network-off clone with no model host"
    remove(client, spec.clone_id, scope)  # leftovers of a launch that died
    labels = {LABEL_SCOPE: scope, LABEL_PROXY_OF: spec.clone_id}
    token = secrets.token_urlsafe(32)
    name = proxy_name(spec.clone_id)
    try:
        _egress_network(client, scope)
        client.networks.create(
            internal_network(spec.clone_id), driver="overlay", internal=True, labels=labels
        )
        services: Any = client.services
        services.create(
            image,
            command=["python3", "-c", Path(proxy.__file__).read_text(encoding="utf-8")],
            args=[
                *("--allow", spec.model_host),
                *(("--allow", spec.auth_host) if spec.auth_host else ()),
                *(part for address in also for part in ("--allow", address)),
                *("--listen", f"0.0.0.0:{PROXY_PORT}"),
            ],
            env=[f"{proxy.TOKEN_VARIABLE}={token}"],
            name=name,
            labels=labels,
            container_labels=labels,
            networks=[internal_network(spec.clone_id), EGRESS_NETWORK],
            endpoint_spec=EndpointSpec(mode="dnsrr"),
            mode=ServiceMode("replicated", replicas=1),
            restart_policy=RestartPolicy(condition="none"),
            user=f"{CLONE_UID}:{CLONE_UID}",
            cap_drop=["ALL"],
            read_only=True,
            init=True,
        )
    except docker.errors.APIError as error:
        remove(client, spec.clone_id, scope)
        raise PluginUnavailable(
            f"the swarm could not start the egress proxy of clone {spec.clone_id}: {explain(error)}"
        ) from None
    _wait_ready(client, spec.clone_id, scope)
    environment = {
        EGRESS_VARIABLE: f"http://{EGRESS_USER}:{token}@{name}:{PROXY_PORT}",
        "NO_PROXY": "localhost,127.0.0.1,::1",
        "no_proxy": "localhost,127.0.0.1,::1",
    }
    return [internal_network(spec.clone_id)], environment


def _egress_network(client: docker.DockerClient, scope: str) -> None:
    if client.networks.list(names=[EGRESS_NETWORK]):
        return
    try:
        client.networks.create(EGRESS_NETWORK, driver="overlay", labels={LABEL_SCOPE: scope})
    except docker.errors.APIError as error:
        if error.status_code != 409:  # 409: another launcher made it just now
            raise


def _wait_ready(client: docker.DockerClient, clone_id: str, scope: str) -> None:
    """Until the proxy says it listens: a clone started before would find no way out."""
    service = _proxy(client, clone_id)
    deadline = time.monotonic() + PROXY_READY_S
    while service is not None and time.monotonic() < deadline:
        if proxy.READY_LINE in logs(service):
            return
        tasks: list[dict[str, Any]] = cast(Any, service).tasks()
        if any(task.get("Status", {}).get("State") in ("failed", "rejected") for task in tasks):
            break
        time.sleep(0.1)
    said = logs(service).strip() if service is not None else ""
    remove(client, clone_id, scope)
    raise PluginUnavailable(
        f"the egress proxy of clone {clone_id} did not start: {said or 'no output'}"
    )


def _proxy(client: docker.DockerClient, clone_id: str) -> Any:
    found = client.services.list(filters={"name": proxy_name(clone_id)})
    return next((service for service in found if service.name == proxy_name(clone_id)), None)


def remove(client: docker.DockerClient, clone_id: str, scope: str) -> list[str]:
    """The clone's proxy and internal network; one line per thing removed."""
    removed = []
    service = _proxy(client, clone_id)
    labels = (service.attrs.get("Spec", {}).get("Labels") or {}) if service is not None else {}
    if service is not None and labels.get(LABEL_SCOPE) == scope:
        with contextlib.suppress(docker.errors.NotFound):
            service.remove()
            removed.append(f"service {proxy_name(clone_id)}")
    deadline = time.monotonic() + 30.0  # the network is in use until the tasks are gone
    for network in _internal(client, clone_id, scope):
        while True:
            try:
                network.remove()
                removed.append(f"network {network.name}")
                break
            except docker.errors.NotFound:
                break
            except docker.errors.APIError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    return removed


def traces(client: docker.DockerClient, clone_id: str, scope: str) -> list[str]:
    left = []
    service = _proxy(client, clone_id)
    if service is not None:
        left.append(f"service {service.name}")
    return left + [f"network {network.name}" for network in _internal(client, clone_id, scope)]


def _internal(client: docker.DockerClient, clone_id: str, scope: str) -> list[Any]:
    """The clone's internal network, if this scope made it (Docker's name filter matches
    parts of names: the name is checked whole)."""
    name = internal_network(clone_id)
    return [
        network
        for network in client.networks.list(names=[name])
        if network.name == name and (network.attrs.get("Labels") or {}).get(LABEL_SCOPE) == scope
    ]


def reap(client: docker.DockerClient, scope: str, alive: set[str]) -> list[str]:
    """The proxies and internal networks of clones no longer alive."""
    removed = []
    labelled = {"label": [LABEL_PROXY_OF, f"{LABEL_SCOPE}={scope}"]}
    for service in client.services.list(filters=labelled):
        clone_id = (service.attrs.get("Spec", {}).get("Labels") or {}).get(LABEL_PROXY_OF, "")
        if clone_id and clone_id not in alive:
            removed += [f"{line} (its clone is gone)" for line in remove(client, clone_id, scope)]
    return removed
