"""A clone's Compose services: the other services of its dev container's Compose files, started
beside it on a network of its own, kept from one of its phases to the next (their data with
them), ended and removed with it.

The environment image carries what to start (its `LABEL_SERVICES`: the `Compose` reading, each
service's image made or pulled when the environment image was), so every launch of the image
(a later phase, a prebuilt image, a launcher made after a restart) starts the same services.
They start only for a clone on the open network: a network-off clone has no network to reach
them by (an internal network would also reach the host), so it runs without them.

Each service is a container named `shadowclone-<clone>-<service>`, labelled with its clone
(`LABEL_SERVICE_OF`) and the scope; the clone's network and the services' volumes are labelled
the same way, so what a crash leaves is found and removed (`reap`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from typing import Any

import docker
import docker.errors
from docker.models.containers import Container
from docker.types import Healthcheck, Mount
from shadowclone.plugin import BadInput, Compose, ComposeService, PluginUnavailable, one_line

from shadowclone_docker_launch.names import HOST_GATEWAY, LABEL_SCOPE, container_name
from shadowclone_docker_launch.scope import (
    RUNNING_STATES,
    TAIL_LINES,
    DockerScope,
    explain,
    remove_container,
    state,
)

log = logging.getLogger(__name__)

LABEL_SERVICES = "io.shadowclone.compose"
"""On an environment image: the JSON of the Compose services its clones start beside them."""
LABEL_SERVICE_OF = "shadowclone.service-of"
"""On a service's container, the clone's network and the services' volumes: the clone's id."""
READY_TIMEOUT_S = 300.0
"""How long a launch waits for a service another one needs healthy (or done)."""
LABEL_MADE_OF = "shadowclone.services-made-of"
"""On a clone's network: a digest of the services started on it, which a later phase of the
clone takes up only if it would start the same."""
STOP_GRACE_S = 10


def service_name(clone_id: str, service: str) -> str:
    return f"shadowclone-{clone_id}-{service}"


def network_name(clone_id: str) -> str:
    return f"shadowclone-{clone_id}-network"


def volume_of(clone_id: str, volume: str) -> str:
    return f"shadowclone-{clone_id}-volume-{volume}"


def label_value(composed: Compose) -> str:
    return json.dumps(composed.to_json(), sort_keys=True, separators=(",", ":"))


def services_of(client: docker.DockerClient, image: str) -> Compose | None:
    """The Compose services an image's clones start beside them, or None."""
    try:
        labels = client.images.get(image).labels or {}
    except docker.errors.ImageNotFound:
        return None
    text = labels.get(LABEL_SERVICES)
    if not text:
        return None
    try:
        return Compose.from_json(json.loads(text))
    except (ValueError, BadInput) as error:
        raise PluginUnavailable(
            f"the image {image} names Compose services shadowclone cannot read ({error}): "
            "build the environment again (`shadowclone env build`)"
        ) from None


def start(scope: DockerScope, clone_id: str, composed: Compose) -> dict[str, Any]:
    """Start the clone's services, each once those it needs are started (healthy, or done, when
    it says so), or take up those an earlier phase of the clone started; return the options of
    the clone's container that put it among them. Whatever was started is removed when one
    fails."""
    made_of = hashlib.sha256(label_value(composed).encode()).hexdigest()[:16]
    if _running(scope, clone_id, composed, made_of):
        log.info("clone %s takes up the Compose services its earlier phase started", clone_id)
        return _joining(scope, clone_id, composed)
    remove(scope, clone_id)  # leftovers of a launch that died
    labels = {LABEL_SCOPE: scope.scope, LABEL_SERVICE_OF: clone_id}
    network = network_name(clone_id)
    try:
        scope.client.networks.create(
            network, driver="bridge", labels={**labels, LABEL_MADE_OF: made_of}
        )
        waits = _conditions(composed)
        for service in composed.others:
            container = _create(scope, clone_id, service, labels)
            container.start()
            condition = waits.get(service.name)
            if condition is not None:
                _wait(container, service.name, condition)
    except docker.errors.APIError as error:
        remove(scope, clone_id)
        raise PluginUnavailable(
            f"Docker could not start the Compose services of clone {clone_id}: {explain(error)}"
        ) from None
    except PluginUnavailable:
        remove(scope, clone_id)
        raise
    return _joining(scope, clone_id, composed)


def _running(scope: DockerScope, clone_id: str, composed: Compose, made_of: str) -> bool:
    """Whether an earlier phase of the clone started these very services and each still runs
    (or, one that runs once, ended well)."""
    networks = _labelled(scope, "networks", clone_id)
    if len(networks) != 1 or networks[0].attrs.get("Labels", {}).get(LABEL_MADE_OF) != made_of:
        return False
    found = {container.name: container for container in _containers(scope, clone_id)}
    if set(found) != {service_name(clone_id, service.name) for service in composed.others}:
        return False
    for container in found.values():
        ended_well = container.attrs.get("State", {}).get("ExitCode") == 0
        if state(container) not in RUNNING_STATES and not (
            state(container) == "exited" and ended_well
        ):
            return False
    return True


def _joining(scope: DockerScope, clone_id: str, composed: Compose) -> dict[str, Any]:
    """The options of the clone's container that put it among its services."""
    return _placed(scope, clone_id, composed.service)


def _placed(scope: DockerScope, clone_id: str, service: ComposeService) -> dict[str, Any]:
    """The network options of a container of the clone's Compose project: another service's
    network namespace, none, or the clone's network, where it answers by its service name."""
    mode = service.network_mode
    if mode is not None and mode.startswith("service:"):
        return {"network_mode": f"container:{service_name(clone_id, mode[len('service:') :])}"}
    if mode == "none":
        return {"network_mode": "none"}
    network = network_name(clone_id)
    endpoint = scope.client.api.create_endpoint_config(aliases=[service.name])
    return {
        "network": network,
        "networking_config": {network: endpoint},
        "extra_hosts": HOST_GATEWAY,
    }


def _conditions(composed: Compose) -> dict[str, str]:
    """What a launch waits for of each service: the strongest condition any other asks."""
    rank = {"service_started": 0, "service_healthy": 1, "service_completed_successfully": 2}
    found: dict[str, str] = {}
    for service in (*composed.others, composed.service):
        for name, condition in service.depends_on.items():
            if rank[condition] > rank.get(found.get(name, "service_started"), 0):
                found[name] = condition
    return found


def _create(
    scope: DockerScope,
    clone_id: str,
    service: ComposeService,
    labels: dict[str, str],
) -> Container:
    mounts = []
    for volume in service.volumes:
        name = volume_of(clone_id, volume.name)
        with contextlib.suppress(docker.errors.APIError):  # made already for another service
            scope.client.volumes.create(name, labels=labels)
        mounts.append(Mount(volume.target, name, type="volume", read_only=volume.read_only))
    options = _placed(scope, clone_id, service)
    if service.healthcheck is not None:
        check = service.healthcheck
        options["healthcheck"] = Healthcheck(
            test=list(check.test),
            interval=_ns(check.interval_s),
            timeout=_ns(check.timeout_s),
            retries=check.retries,
            start_period=_ns(check.start_period_s),
        )
    assert service.image is not None, "a service's image is made before its launch"
    container: Container = scope.client.containers.create(
        service.image,
        command=list(service.command) if service.command is not None else None,
        entrypoint=list(service.entrypoint) if service.entrypoint is not None else None,
        name=service_name(clone_id, service.name),
        labels={**labels, "shadowclone.service": service.name},
        environment=dict(service.environment),
        working_dir=service.working_dir,
        user=service.user,
        mounts=mounts,
        tmpfs=dict.fromkeys(service.tmpfs, ""),
        security_opt=["no-new-privileges:true"],
        **options,
    )
    return container


def _ns(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1e9)


def _wait(container: Container, name: str, condition: str) -> None:
    """Until the service is healthy (or has ended well), as a service that needs it asks."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        container.reload()
        found = state(container)
        info = container.attrs.get("State", {})
        if condition == "service_healthy":
            health = (info.get("Health") or {}).get("Status")
            if health == "healthy" or (health is None and found in RUNNING_STATES):
                return  # no health check: started is all it can be
            if found not in RUNNING_STATES:
                break
        elif condition == "service_completed_successfully" and found in ("exited", "dead"):
            if info.get("ExitCode") == 0:
                return
            break
        time.sleep(0.2)
    output = container.logs(tail=TAIL_LINES).decode("utf-8", errors="replace").strip()
    said = one_line(output.splitlines()[-1]) if output else "no output"
    wanted = "healthy" if condition == "service_healthy" else "done"
    raise PluginUnavailable(
        f"the Compose service {name} was not {wanted} ({state(container)}): {said}"
    )


def stop(scope: DockerScope, clone_id: str) -> None:
    """Stop the clone's services (its network and volumes stay until `remove`)."""
    for container in _containers(scope, clone_id):
        if state(container) in RUNNING_STATES:
            with contextlib.suppress(docker.errors.NotFound):
                container.stop(timeout=STOP_GRACE_S)


def remove(scope: DockerScope, clone_id: str) -> list[str]:
    """Remove the clone's services, its network and their volumes; one line per thing."""
    removed = []
    for container in _containers(scope, clone_id):
        remove_container(container)
        removed.append(f"container {container.name}")
    for network in _labelled(scope, "networks", clone_id):
        with contextlib.suppress(docker.errors.NotFound):
            network.remove()
            removed.append(f"network {network.name}")
    for volume in _labelled(scope, "volumes", clone_id):
        with contextlib.suppress(docker.errors.NotFound):
            volume.remove(force=True)
            removed.append(f"volume {volume.name}")
    return removed


def traces(scope: DockerScope, clone_id: str) -> list[str]:
    left = [f"container {c.name} ({state(c)})" for c in _containers(scope, clone_id)]
    left += [f"network {n.name}" for n in _labelled(scope, "networks", clone_id)]
    return left + [f"volume {v.name}" for v in _labelled(scope, "volumes", clone_id)]


def reap(scope: DockerScope) -> list[str]:
    """Remove the services (and networks, volumes) of clones whose container is gone."""
    owners = set()
    for kind in ("containers", "networks", "volumes"):
        owners |= {_owner(thing) for thing in _labelled(scope, kind, None)}
    removed = []
    for clone_id in sorted(owners - {""}):
        if scope.container(container_name(clone_id)) is None:
            removed += [f"{line} (its clone is gone)" for line in remove(scope, clone_id)]
    return removed


def _owner(thing: Any) -> str:
    labels = getattr(thing, "labels", None)
    if labels is None:  # a volume's labels are in its attributes
        labels = thing.attrs.get("Labels") or {}
    return str(labels.get(LABEL_SERVICE_OF, ""))


def _containers(scope: DockerScope, clone_id: str) -> list[Container]:
    return scope.labelled(f"{LABEL_SERVICE_OF}={clone_id}")


def _labelled(scope: DockerScope, kind: str, clone_id: str | None) -> list[Any]:
    label = LABEL_SERVICE_OF if clone_id is None else f"{LABEL_SERVICE_OF}={clone_id}"
    filters: dict[str, str | list[str] | bool] = {"label": [label, f"{LABEL_SCOPE}={scope.scope}"]}
    try:
        if kind == "containers":
            return list(
                scope.client.containers.list(all=True, filters=filters, ignore_removed=True)
            )
        if kind == "networks":
            return list(scope.client.networks.list(filters=filters))
        return list(scope.client.volumes.list(filters=filters))
    except docker.errors.NotFound:
        return []
