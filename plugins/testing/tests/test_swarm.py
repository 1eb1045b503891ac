"""The kit's swarm: a service placed on a worker runs an image pushed to the session's registry
and its output is read from its task's logs; the same reference by digest pulls on every node;
a killed node goes down as the manager sees it, and comes back."""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Callable
from typing import Any

import docker.errors
import pytest
from docker.types import RestartPolicy, ServiceMode
from shadowclone_testing.swarm import Swarm

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DEADLINE_S = 120.0
"""Generous: a loaded CI machine, and a dead node is marked down only after some 15 s."""


def eventually(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + DEADLINE_S
    while not (value := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {DEADLINE_S:.0f} s waiting for {what}")
        time.sleep(0.5)
    return value


def test_the_swarm_has_a_manager_and_two_workers(sc_swarm: Swarm) -> None:
    listed = {node.id: node.attrs for node in sc_swarm.manager.nodes.list()}
    assert {node.node_id for node in sc_swarm.nodes} == set(listed)
    roles = {listed[node.node_id]["Description"]["Hostname"]: node.role for node in sc_swarm.nodes}
    assert roles == {
        "swarm-manager": "manager",
        "swarm-worker-1": "worker",
        "swarm-worker-2": "worker",
    }
    assert sc_swarm.manager_url == f"tcp://{sc_swarm.manager_node.address}:2375"
    assert all(sc_swarm.state(node.hostname) == "ready" for node in sc_swarm.nodes)


def test_a_service_on_a_worker_runs_an_image_from_the_registry(sc_swarm: Swarm) -> None:
    reference = sc_swarm.publish(sc_swarm.probe_image, "tests/probe", "service")
    services: Any = sc_swarm.manager.services  # the SDK's stubs leave `create` untyped
    service = services.create(
        reference,
        command=["/bin/busybox", "sh", "-c", "echo hello from $NODE"],
        env=["NODE={{.Node.Hostname}}"],
        name="probe-on-a-worker",
        constraints=["node.role==worker"],
        mode=ServiceMode("replicated", replicas=1),
        restart_policy=RestartPolicy(condition="none"),
    )
    try:
        task = eventually(lambda: finished(service.tasks()), "the probe's task to complete")
        worker = sc_swarm.node(task["NodeID"])
        assert worker.role == "worker"
        logs = b"".join(service.logs(stdout=True, stderr=True)).decode()
        assert f"hello from {worker.hostname}" in logs
    finally:
        service.remove()


def finished(tasks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The task that completed; a task that failed fails the test."""
    for task in tasks:
        if task["Status"]["State"] in ("failed", "rejected"):
            pytest.fail(f"the task failed: {task['Status']}")
        if task["Status"]["State"] == "complete":
            return task
    return None


def test_the_same_reference_pulls_by_digest_on_every_node(sc_swarm: Swarm) -> None:
    nonce = uuid.uuid4().hex
    recipe = f"FROM {sc_swarm.probe_image}\nLABEL nonce={nonce}\n".encode()
    image, _ = sc_swarm.host.images.build(fileobj=io.BytesIO(recipe), tag=f"sc-swarm-test:{nonce}")
    try:
        reference = sc_swarm.publish(f"sc-swarm-test:{nonce}", "tests/fresh", nonce)
    finally:
        sc_swarm.host.images.remove(f"sc-swarm-test:{nonce}")
    assert reference.startswith(f"{sc_swarm.registry}/tests/fresh@sha256:")
    assert sc_swarm.registry.startswith("localhost:")
    for node in sc_swarm.nodes:
        client = sc_swarm.client(node.hostname)
        pulled = client.images.pull(reference)  # no node had it: a new image, never run
        assert pulled.id == image.id, node.hostname
        assert reference in pulled.attrs["RepoDigests"], node.hostname
        said = client.containers.run(reference, ["echo", node.hostname], remove=True)
        assert said.decode().strip() == node.hostname


def test_a_reference_the_registry_lacks_does_not_pull(sc_swarm: Swarm) -> None:
    missing = f"{sc_swarm.registry}/tests/nothing@sha256:{'0' * 64}"
    with pytest.raises(docker.errors.NotFound):
        sc_swarm.client(sc_swarm.workers[0].hostname).images.pull(missing)


def test_a_killed_worker_goes_down_and_comes_back(sc_swarm: Swarm) -> None:
    worker = sc_swarm.workers[-1]
    sc_swarm.kill_node(worker.hostname)
    try:
        eventually(lambda: sc_swarm.state(worker.hostname) == "down", f"{worker.hostname} down")
    finally:
        sc_swarm.restore_node(worker.hostname)
    assert sc_swarm.state(worker.hostname) == "ready"
    assert sc_swarm.client(worker.hostname).info()["Swarm"]["NodeID"] == worker.node_id
