"""A real Docker Swarm for tests of a swarm launcher: three docker-in-docker nodes (a manager,
two workers) on a bridge network of their own, and a registry that the host and every node name
the same way (`localhost:PORT/...`).

A project takes the fixture by naming this module in its root conftest's `pytest_plugins`
(once per session: imported into several conftests or test modules, each makes a swarm of its
own). Outside CI a machine without Docker, the registry program or the base image
skips the tests that use it, saying why; under CI=true they fail.

How the pieces reach one another:
- the host reaches each inner dockerd at `tcp://NODE_IP:2375` (plain TCP, tests only) and the
  manager's swarm API there too (`Swarm.manager`);
- the registry is the kit's `LocalRegistry` on the host's 127.0.0.1:PORT. A relay container on
  the host's network forwards the network's gateway:PORT to it, and in each node socat forwards
  127.0.0.1:PORT to that gateway, so `localhost:PORT/NAME@sha256:...` pulls in a node as it
  pushes on the host, and every dockerd speaks plain HTTP to it as to any loopback registry;
- each node has a fixed address on the network, so a killed node started again keeps its
  address, its swarm identity and the images it pulled.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import ipaddress
import logging
import os
import socket
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import docker
import docker.errors
import docker.types
import pytest

from shadowclone_testing.harness import skip_or_fail
from shadowclone_testing.registry import PROGRAM_VARIABLE as REGISTRY_BIN
from shadowclone_testing.registry import LocalRegistry
from shadowclone_testing.registry import find_program as find_registry

log = logging.getLogger(__name__)

NODE_FOLDER = Path(__file__).with_name("swarm_node")
"""The node image's Dockerfile and entry script (package data)."""
BASE_VARIABLE = "SHADOWCLONE_SWARM_BASE_IMAGE"
BASE_IMAGE = "shadowclone-base:bookworm"
"""The Debian image scripts/build-image makes with debootstrap where no registry is reachable."""
NODE_REPOSITORY = "shadowclone-swarm-node"
PROBE_REPOSITORY = "shadowclone-swarm-probe"
PREFIX = "shadowclone-swarm"
"""Every container, network and volume of a swarm is named PREFIX-SESSION-..."""
LABEL = "shadowclone.swarm"
"""Its value, `MACHINE:PID:SESSION`, tells a live session's swarm from a crashed one's."""
HOSTNAMES = ("swarm-manager", "swarm-worker-1", "swarm-worker-2")
"""The nodes' hostnames, as the swarm lists them; the first is the manager."""
DAEMON_PORT = 2375
API_VERSION = "1.41"
SWARM_PORT = 2377
START_TIMEOUT_S = 90.0
"""Bound on an inner dockerd answering, and on the manager seeing a node ready."""
NODE_SECURITY = ("seccomp=unconfined", "apparmor=unconfined")
"""Outside --privileged (which this kind of host refuses: its dockerd lacks CAP_SYS_RESOURCE),
what an inner dockerd needs besides every other capability, unmasked system paths and a cgroup
namespace."""


class SwarmUnavailable(Exception):
    """The swarm cannot start on this machine; the message says why and what to do."""


def node_image_tag(base: str) -> str:
    """The content-hash tag of the node and probe images: a changed Dockerfile, entry script or
    base builds them again, an unchanged one reuses what an earlier session built."""
    digest = hashlib.sha256(base.encode())
    for name in ("Dockerfile", "swarm-node-entry"):
        digest.update(b"\0" + name.encode() + b"\0" + (NODE_FOLDER / name).read_bytes())
    return digest.hexdigest()[:16]


def build_images(client: docker.DockerClient, base: str) -> tuple[str, str]:
    """The node image and the probe image (busybox alone), built once per content hash."""
    try:
        client.images.get(base)
    except docker.errors.ImageNotFound:
        raise SwarmUnavailable(
            f"the base image {base} is missing: run scripts/build-image or set {BASE_VARIABLE}"
        ) from None
    tag = node_image_tag(base)
    names = (f"{NODE_REPOSITORY}:{tag}", f"{PROBE_REPOSITORY}:{tag}")
    for name, target in zip(names, ("node", "probe"), strict=True):
        try:
            client.images.get(name)
            continue
        except docker.errors.ImageNotFound:
            pass
        started = time.monotonic()
        try:
            client.images.build(
                path=str(NODE_FOLDER),
                tag=name,
                target=target,
                buildargs={"BASE_IMAGE": base},
                network_mode="host",  # apt reaches Debian's mirrors as the host does
                rm=True,
                forcerm=True,
            )
        except docker.errors.BuildError as error:
            said = "".join(
                str(part.get("stream", part.get("error", ""))) for part in error.build_log
            )
            raise SwarmUnavailable(f"building {name} failed: {error}\n{said[-3000:]}") from error
        log.info("built %s in %.1f s", name, time.monotonic() - started)
    _remove_older(client, names)
    return names


def _remove_older(client: docker.DockerClient, current: tuple[str, ...]) -> None:
    """Drop the node and probe images of earlier Dockerfiles (half a gigabyte each); one that
    a running swarm still uses stays."""
    for repository in (NODE_REPOSITORY, PROBE_REPOSITORY):
        for image in client.images.list(name=repository):
            for tag in image.tags:
                if tag.startswith(f"{repository}:") and tag not in current:
                    try:
                        client.images.remove(tag)
                    except docker.errors.APIError as error:
                        log.info("kept %s: %s", tag, error)


def _session_alive(value: str) -> bool:
    """Whether the session that labelled something with `value` still runs (another machine's
    sessions are taken as alive: their process cannot be asked)."""
    machine, _, rest = value.partition(":")
    pid, _, _ = rest.partition(":")
    if machine != socket.gethostname():
        return True
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: there all the same
    return True


def remove_strays(client: docker.DockerClient) -> list[str]:
    """Remove what the swarms of sessions that no longer run left behind (a crashed or killed
    test run); the names of what was removed."""
    removed: list[str] = []
    for container in client.containers.list(
        all=True, filters={"label": LABEL}, ignore_removed=True
    ):
        if not _session_alive(container.labels.get(LABEL, "")):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True, v=True)
            removed.append(f"container {container.name}")
    for network in client.networks.list(filters={"label": LABEL}):
        if not _session_alive((network.attrs.get("Labels") or {}).get(LABEL, "")):
            with contextlib.suppress(docker.errors.NotFound):
                network.remove()
            removed.append(f"network {network.name}")
    for volume in client.volumes.list(filters={"label": LABEL}):
        if not _session_alive((volume.attrs.get("Labels") or {}).get(LABEL, "")):
            with contextlib.suppress(docker.errors.NotFound):
                volume.remove(force=True)
            removed.append(f"volume {volume.name}")
    return removed


def wait_until(check: Callable[[], Any], what: str, timeout_s: float = START_TIMEOUT_S) -> Any:
    """Poll `check` until it returns something true; a SwarmUnavailable naming `what` after
    `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not (value := check()):
        if time.monotonic() > deadline:
            raise SwarmUnavailable(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.1)
    return value


@attrs.frozen
class SwarmNode:
    """One node: its container on the host, its hostname in the swarm, its address on the
    swarm's network and its swarm node id."""

    container: str
    hostname: str
    address: str
    node_id: str
    role: str
    """"manager" or "worker"."""

    @property
    def base_url(self) -> str:
        """Its dockerd, as docker.DockerClient(base_url=...) or DOCKER_HOST names it."""
        return f"tcp://{self.address}:{DAEMON_PORT}"


class Swarm:
    """A running swarm of one session: its nodes, the manager's API, the registry they share,
    and killing a node and starting it again."""

    def __init__(
        self,
        host: docker.DockerClient,
        nodes: tuple[SwarmNode, ...],
        registry: str,
        node_image: str,
        probe_image: str,
    ) -> None:
        self.host = host
        """The host's Docker engine (where the nodes run, and where a launcher pushes from)."""
        self.nodes = nodes
        self.registry = registry
        """`localhost:PORT`: the one registry address the host and every node use."""
        self.node_image = node_image
        self.probe_image = probe_image
        """A tiny image on the host (`/bin/busybox` its entry point) to push and run."""
        self._clients: dict[str, docker.DockerClient] = {}
        self._published: list[str] = []
        self._killed: set[str] = set()

    @property
    def manager_node(self) -> SwarmNode:
        return next(node for node in self.nodes if node.role == "manager")

    @property
    def workers(self) -> tuple[SwarmNode, ...]:
        return tuple(node for node in self.nodes if node.role == "worker")

    @property
    def manager_url(self) -> str:
        """The manager's dockerd, `tcp://IP:2375`: the swarm's API."""
        return self.manager_node.base_url

    @property
    def manager(self) -> docker.DockerClient:
        return self.client(self.manager_node.hostname)

    def node(self, name: str) -> SwarmNode:
        """A node by hostname, container name or swarm node id."""
        for node in self.nodes:
            if name in (node.hostname, node.container, node.node_id):
                return node
        raise KeyError(f"no node {name!r} in this swarm: {[n.hostname for n in self.nodes]}")

    def client(self, name: str) -> docker.DockerClient:
        """A client of the node's own dockerd (kept and closed with the swarm)."""
        node = self.node(name)
        if node.hostname not in self._clients:
            self._clients[node.hostname] = node_client(node.base_url)
        return self._clients[node.hostname]

    def state(self, name: str) -> str:
        """The node's state as the manager sees it: "ready", "down", "unknown"..."""
        found: str = self.manager.nodes.get(self.node(name).node_id).attrs["Status"]["State"]
        return found

    def kill_node(self, name: str) -> None:
        """Kill the node's container at once (SIGKILL: its dockerd and tasks die with it, as
        when a machine dies). The manager marks it down some 15 s later; `restore_node` brings
        it back."""
        node = self.node(name)
        self.host.containers.get(node.container).kill()
        self._killed.add(node.hostname)
        stale = self._clients.pop(node.hostname, None)
        if stale is not None:
            stale.close()

    def restore_node(self, name: str, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start a killed node's container again (same address, same swarm node id, the images
        it had) and wait until the manager sees every node not killed ready: a manager started
        again reports its workers "unknown" until they call in."""
        node = self.node(name)
        container = self.host.containers.get(node.container)
        if container.status != "running":
            container.start()
        self._killed.discard(node.hostname)
        wait_until(lambda: _answers(node.base_url), f"{node.hostname}'s dockerd", timeout_s)
        alive = [n.hostname for n in self.nodes if n.hostname not in self._killed]
        wait_until(lambda: all(map(self.ready, alive)), f"{', '.join(alive)} ready", timeout_s)

    def ready(self, name: str) -> bool:
        """Whether the manager sees the node ready (False while the manager itself starts)."""
        try:
            return self.state(name) == "ready"
        except (docker.errors.DockerException, OSError):
            return False

    def publish(self, image: str, repository: str, tag: str = "latest") -> str:
        """Push a host image to the registry as `REGISTRY/repository:tag`; its reference by
        digest, `REGISTRY/repository@sha256:...`, which every node can pull."""
        reference = f"{self.registry}/{repository}"
        self.host.images.get(image).tag(reference, tag)
        self._published.append(f"{reference}:{tag}")
        digest = ""
        for line in self.host.images.push(reference, tag=tag, stream=True, decode=True):
            if "error" in line:
                raise RuntimeError(f"pushing {reference}:{tag} failed: {line['error']}")
            digest = line.get("aux", {}).get("Digest", digest)
        if not digest:
            raise RuntimeError(f"pushing {reference}:{tag} gave no digest")
        return f"{reference}@{digest}"

    def ready_for_clones(self, reference: str) -> None:
        """The image pulled on the workers, side by side, and the manager drained: clones run
        on the workers (a test may kill one; the manager it cannot)."""
        with concurrent.futures.ThreadPoolExecutor(len(self.workers)) as pool:
            pulls = [
                pool.submit(self.client(node.hostname).images.pull, reference)
                for node in self.workers
            ]
            for pull in pulls:
                pull.result()
        manager = self.manager.nodes.get(self.manager_node.node_id)
        manager.update({**manager.attrs["Spec"], "Availability": "drain"})

    def close(self) -> None:
        """Close the node clients and take the host's tags `publish` made (the registry, and
        with it what was pushed, goes with the session)."""
        for name in self._published:
            with contextlib.suppress(docker.errors.ImageNotFound):
                self.host.images.remove(name, noprune=True)
        for client in self._clients.values():
            client.close()
        self._clients.clear()


def _answers(base_url: str) -> bool:
    try:
        client = node_client(base_url, timeout_s=3)
    except docker.errors.DockerException:
        return False
    try:
        return bool(client.ping())
    except (docker.errors.DockerException, OSError):
        return False
    finally:
        client.close()


def _registry_answers(address: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{address}/v2/", timeout=2) as got:
            return bool(got.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def node_client(base_url: str, timeout_s: float = 60) -> docker.DockerClient:
    """A client of a node's dockerd (Debian bookworm's 20.10: API 1.41, never asked)."""
    return docker.DockerClient(base_url=base_url, version=API_VERSION, timeout=int(timeout_s))


@attrs.define
class _Start:
    """What one swarm's start made, in order, so that a start cut short is removed too."""

    host: docker.DockerClient
    session: str
    label: dict[str, str]
    network: str = ""
    shared: Path | None = None
    containers: list[str] = attrs.Factory(list)
    volumes: list[str] = attrs.Factory(list)

    def name(self, part: str) -> str:
        return f"{PREFIX}-{self.session}-{part}"

    def make_network(self) -> tuple[ipaddress.IPv4Network, ipaddress.IPv4Address]:
        """A bridge network of its own, with the subnet Docker chooses (clear of the host's
        routes) but set explicitly, which fixed container addresses need."""
        name = self.name("net")
        chosen = self.host.networks.create(name, driver="bridge", labels=self.label)
        chosen.reload()
        pool = chosen.attrs["IPAM"]["Config"][0]
        chosen.remove()
        ipam = docker.types.IPAMConfig(
            pool_configs=[docker.types.IPAMPool(subnet=pool["Subnet"], gateway=pool["Gateway"])]
        )
        self.host.networks.create(name, driver="bridge", labels=self.label, ipam=ipam)
        self.network = name
        return ipaddress.IPv4Network(pool["Subnet"]), ipaddress.IPv4Address(pool["Gateway"])

    def start_relay(self, image: str, gateway: str, port: int) -> None:
        """gateway:PORT on the host, forwarded to the registry on 127.0.0.1:PORT."""
        name = self.name("relay")
        self.containers.append(name)
        self.host.containers.run(
            image,
            name=name,
            entrypoint=["socat"],
            command=[f"TCP-LISTEN:{port},bind={gateway},fork,reuseaddr", f"TCP:127.0.0.1:{port}"],
            network_mode="host",
            init=True,
            labels=self.label,
            detach=True,
        )
        wait_until(lambda: _registry_answers(f"{gateway}:{port}"), f"the relay on {gateway}")

    def start_node(self, image: str, hostname: str, address: str, forward: str) -> None:
        name = self.name(hostname)
        volume = self.host.volumes.create(f"{name}-docker", labels=self.label)
        self.volumes.append(str(volume.name))
        api = self.host.api
        host_config = api.create_host_config(
            cap_add=["ALL"],
            cap_drop=["SYS_RESOURCE"],
            security_opt=list(NODE_SECURITY),
            cgroupns="private",
            init=True,
            tmpfs={"/run": "rw,exec,nosuid,size=256m"},  # no pid file outlives a kill
            binds={
                str(volume.name): {"bind": "/var/lib/docker", "mode": "rw"},
                **(
                    {str(self.shared): {"bind": str(self.shared), "mode": "rw"}}
                    if self.shared
                    else {}
                ),
            },
            network_mode=self.network,
        )
        # The CLI's `--security-opt systempaths=unconfined`, as it sends it (the engine refuses
        # the option itself, and the SDK has no word for it).
        host_config["MaskedPaths"] = []
        host_config["ReadonlyPaths"] = []
        networking = api.create_networking_config()  # its stub takes one endpoint, not a dict
        networking["EndpointsConfig"] = {
            self.network: api.create_endpoint_config(ipv4_address=address)
        }
        created = api.create_container(
            image,
            name=name,
            hostname=hostname,
            labels=self.label,
            environment={
                "SWARM_REGISTRY_PORT": forward.rpartition(":")[2],
                "SWARM_REGISTRY_TARGET": forward,
            },
            host_config=host_config,
            networking_config=networking,
        )
        self.containers.append(name)
        api.start(created["Id"])

    def remove(self) -> None:
        for name in reversed(self.containers):
            with contextlib.suppress(docker.errors.NotFound):
                self.host.containers.get(name).remove(force=True, v=True)
        for name in self.volumes:
            with contextlib.suppress(docker.errors.NotFound):
                self.host.volumes.get(name).remove(force=True)
        if self.network:
            with contextlib.suppress(docker.errors.NotFound):
                self.host.networks.get(self.network).remove()


def _node_log(host: docker.DockerClient, container: str) -> str:
    try:
        said: bytes = host.containers.get(container).logs(tail=30)
    except docker.errors.DockerException as error:
        return f"(no log: {error})"
    return said.decode(errors="replace")


def _wait_for_daemons(start: _Start, nodes: list[tuple[str, str]]) -> None:
    """Until every inner dockerd answers; a node whose container exits fails at once."""

    def all_answer() -> bool:
        for container, _ in nodes:
            if start.host.containers.get(container).status == "exited":
                raise SwarmUnavailable(f"the node {container} stopped")
        return all(_answers(base_url) for _, base_url in nodes)

    try:
        wait_until(all_answer, "the nodes' dockerd")
    except SwarmUnavailable as error:
        said = "\n".join(_node_log(start.host, c) for c, _ in nodes)
        raise SwarmUnavailable(f"{error}\n{said[-4000:]}") from error


def _form(
    clients: list[docker.DockerClient], start: _Start, addresses: list[str]
) -> tuple[SwarmNode, ...]:
    """`swarm init` on the first node, the others join it as workers."""
    manager, *workers = clients
    manager.swarm.init(advertise_addr=addresses[0], listen_addr=f"{addresses[0]}:{SWARM_PORT}")
    manager.swarm.reload()
    token = manager.swarm.attrs["JoinTokens"]["Worker"]
    for client, address in zip(workers, addresses[1:], strict=True):
        client.swarm.join(
            remote_addrs=[f"{addresses[0]}:{SWARM_PORT}"],
            join_token=token,
            listen_addr=f"{address}:{SWARM_PORT}",
            advertise_addr=address,
        )
    return tuple(
        SwarmNode(
            container=start.name(hostname),
            hostname=hostname,
            address=address,
            node_id=str(client.info()["Swarm"]["NodeID"]),
            role="manager" if client is manager else "worker",
        )
        for client, hostname, address in zip(clients, HOSTNAMES, addresses, strict=True)
    )


@contextlib.contextmanager
def _registry(folder: Path, program: Path) -> Iterator[LocalRegistry]:
    """The kit's loopback registry; one that does not start makes the swarm unavailable."""
    with contextlib.ExitStack() as stack:
        try:
            registry = stack.enter_context(LocalRegistry(folder, program))
        except (RuntimeError, OSError) as error:
            raise SwarmUnavailable(f"the registry did not start: {error}") from error
        yield registry


@contextlib.contextmanager
def running_swarm(
    host: docker.DockerClient,
    registry_folder: Path,
    base: str = BASE_IMAGE,
    shared: Path | None = None,
) -> Iterator[Swarm]:
    """A swarm of three nodes and its registry for as long as the `with` lasts; everything it
    made (containers, network, volumes, the registry) is removed at its end. `shared`: a folder
    of the host at the same path in every node (as an owner shares the clones folder by NFS)."""
    program = find_registry()
    if program is None or not program.is_file():
        raise SwarmUnavailable(
            f"no docker-registry ({program}): run scripts/install-registry or set {REGISTRY_BIN}"
        )
    for removed in remove_strays(host):
        log.info("removed %s, left by a session that no longer runs", removed)
    node_image, probe_image = build_images(host, base)
    started = time.monotonic()
    session = uuid.uuid4().hex[:8]
    start = _Start(host, session, {LABEL: f"{socket.gethostname()}:{os.getpid()}:{session}"})
    start.shared = shared
    clients: list[docker.DockerClient] = []
    try:
        with _registry(registry_folder, program) as registry:
            subnet, gateway = start.make_network()
            start.start_relay(node_image, str(gateway), registry.port)
            addresses = [str(subnet.network_address + 2 + n) for n in range(len(HOSTNAMES))]
            forward = f"{gateway}:{registry.port}"
            for hostname, address in zip(HOSTNAMES, addresses, strict=True):
                start.start_node(node_image, hostname, address, forward)
            urls = [f"tcp://{address}:{DAEMON_PORT}" for address in addresses]
            _wait_for_daemons(start, list(zip(map(start.name, HOSTNAMES), urls, strict=True)))
            clients = [node_client(url) for url in urls]
            nodes = _form(clients, start, addresses)
            swarm = Swarm(host, nodes, registry.address, node_image, probe_image)
            try:
                wait_until(lambda: all(swarm.ready(n.hostname) for n in nodes), "nodes ready")
                log.info("swarm started in %.1f s", time.monotonic() - started)
                yield swarm
            finally:
                swarm.close()
    finally:
        for client in clients:
            client.close()
        start.remove()


@pytest.fixture(scope="session")
def sc_swarm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Swarm]:
    """A swarm of three docker-in-docker nodes and a registry, for the whole session. Without
    Docker, the registry program or the base image it skips with the reason, except under
    CI=true, where it fails. A test that kills a node restores it before it ends. Every test's
    `tmp_path` is at the same path in every node."""
    with contextlib.ExitStack() as stack:
        try:
            host = docker.from_env(timeout=300)
            stack.callback(host.close)
            host.ping()
        except docker.errors.DockerException as error:
            skip_or_fail(f"no Docker engine answers ({error}); run scripts/start-docker")
            raise AssertionError("unreachable") from error
        base = os.environ.get(BASE_VARIABLE, BASE_IMAGE)
        folder = tmp_path_factory.mktemp("swarm-registry")
        try:
            shared = tmp_path_factory.getbasetemp()  # every test's tmp_path, as NFS would share
            swarm = stack.enter_context(running_swarm(host, folder, base, shared))
        except (SwarmUnavailable, docker.errors.DockerException) as error:
            skip_or_fail(f"the swarm cannot start: {error}")
            raise AssertionError("unreachable") from error
        yield swarm
