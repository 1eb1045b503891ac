"""A clone's service as the swarm runs it: its newest task's state and exit code, and a task
whose node was lost, which is ended so that it never runs again."""

from __future__ import annotations

import datetime
import logging
import re
import time
from typing import Any, cast

import docker
import docker.errors
from docker.models.services import Service
from docker.types import ServiceMode
from shadowclone.plugin import CloneStatus, LaunchState
from shadowclone_docker_launch.scope import explain

log = logging.getLogger(__name__)

LABEL_LOST = "shadowclone.lost"
"""On a clone's service its launcher ended: why (its node was lost)."""
TAIL_LINES = 40
RUNNING = {"new", "allocated", "pending", "assigned", "accepted", "preparing", "ready"}
RUNNING |= {"starting", "running"}
"""Task states before the clone has ended."""


class Tasks:
    """Reads clones' tasks; `down_since` (by node id, when a launcher first saw it down) lives
    as long as the launcher. How long a node has been down is the longer of that and the
    manager's own record (the node's last change, by the manager's clock), so a restarted
    serve does not count from nothing again; both are at most the truth."""

    def __init__(
        self, client: docker.DockerClient, node_lost_s: float, down_since: dict[str, float]
    ) -> None:
        self.client = client
        self.node_lost_s = node_lost_s
        self._down_since = down_since

    def status_of(self, clone_id: str, service: Service) -> CloneStatus:
        lost = (service.attrs.get("Spec", {}).get("Labels") or {}).get(LABEL_LOST)
        if lost:
            return CloneStatus(clone_id, LaunchState.EXITED, None, lost)
        task = newest(service)
        if task is None:
            return CloneStatus(clone_id, LaunchState.RUNNING)  # being scheduled
        status = task.get("Status") or {}
        state = str(status.get("State", ""))
        if state in RUNNING:
            why = self._lost(task)
            if why is None:
                return CloneStatus(clone_id, LaunchState.RUNNING)
            self._end_lost(service, why)
            return CloneStatus(clone_id, LaunchState.EXITED, None, why)
        code = (status.get("ContainerStatus") or {}).get("ExitCode")
        tail = logs(service)
        if state in ("rejected", "failed") and status.get("Err"):
            tail += f"\n(the swarm: {status['Err']})"
        return CloneStatus(clone_id, LaunchState.EXITED, code, tail.strip("\n"))

    def _lost(self, task: dict[str, Any]) -> str | None:
        """Why the task's clone is lost (its node down for longer than `node_lost_s`), or
        None while it is not."""
        node_id = str(task.get("NodeID") or "")
        if not node_id:
            return None
        try:
            node = cast(Any, self.client.nodes).get(node_id)
        except docker.errors.NotFound:
            node = None
        state = ((node.attrs.get("Status") or {}).get("State") if node else "gone") or ""
        if state != "down" and node is not None:
            self._down_since.pop(node_id, None)
            return None
        since = self._down_since.setdefault(node_id, time.monotonic())
        down_s = max(time.monotonic() - since, self._recorded_down_s(node))
        if down_s < self.node_lost_s:
            return None
        name = (node.attrs.get("Description") or {}).get("Hostname", node_id) if node else node_id
        return (
            f"its node {name} has been down for {down_s:.0f} s (node_lost_s "
            f"{self.node_lost_s:.0f}): the clone was ended there and is never run again"
        )

    def _recorded_down_s(self, node: Any) -> float:
        """Since the manager last changed the node (marking it down, or later): 0 for a node
        removed, or when either time cannot be read."""
        if node is None:
            return 0.0
        try:
            now = rfc3339(str(self.client.info().get("SystemTime", "")))
        except docker.errors.APIError:
            return 0.0
        changed = rfc3339(str(node.attrs.get("UpdatedAt", "")))
        if now is None or changed is None:
            return 0.0
        return max(0.0, (now - changed).total_seconds())

    def _end_lost(self, service: Service, why: str) -> None:
        """No replica, so a node that comes back stops the clone; the reason, for a later
        launcher."""
        spec = service.attrs.get("Spec", {})
        labels = {**(spec.get("Labels") or {}), LABEL_LOST: why}
        try:
            cast(Any, service).update(mode=ServiceMode("replicated", replicas=0), labels=labels)
        except docker.errors.APIError as error:
            log.warning("could not end lost clone service %s: %s", service.name, explain(error))


def rfc3339(text: str) -> datetime.datetime | None:
    """Docker's times (`2026-12-06T23:40:01.123456789Z`, nanoseconds and any offset), aware;
    None for anything else."""
    match = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)", text)
    if match is None:
        return None
    whole, fraction, zone = match.groups()
    micro = (fraction or ".0")[1:7].ljust(6, "0")
    try:
        return datetime.datetime.fromisoformat(
            f"{whole}.{micro}{'+00:00' if zone == 'Z' else zone}"
        )
    except ValueError:
        return None


def hostname(node: Any) -> str:
    return str((node.attrs.get("Description") or {}).get("Hostname") or node.id)


def newest(service: Service) -> dict[str, Any] | None:
    tasks: list[dict[str, Any]] = cast(Any, service).tasks()
    return max(tasks, key=lambda task: str(task.get("CreatedAt", "")), default=None)


def logs(service: Service) -> str:
    try:
        data = b"".join(cast(Any, service).logs(stdout=True, stderr=True, tail=TAIL_LINES))
    except docker.errors.APIError:
        return ""
    return data.decode("utf-8", errors="replace")
