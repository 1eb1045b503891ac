"""The swarm launcher's table of the owner's config, `[launchers.swarm]`, read and checked: a
key it cannot use is refused in one line naming it."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

import attrs
from shadowclone.plugin import BadInput

RUN_FOLDERS = ("shared", "sent")
"""How clones reach their run folders: "shared", the clones folder at the same path on every
node (NFS, or one machine); "sent", a volume of the clone's node kept in step with serve's copy
over the network (sent.py)."""


@attrs.frozen
class SwarmSettings:
    manager: str | None = None
    """The Docker API of a manager of the swarm (`tcp://HOST:2376`, `ssh://user@host`...);
    None: Docker's own settings (DOCKER_HOST, or this machine's engine)."""
    registry: str | None = None
    """`HOST[:PORT][/PATH]`: where the launcher pushes the images clones run on, which every
    node pulls by digest; None: the nodes must have them already."""
    node_lost_s: float = 60.0
    """A clone whose node has been down this long has failed: it is ended, never run again."""
    run_folders: str | None = None
    """How the clones reach their run folders (`RUN_FOLDERS`); None: not said yet."""
    host_address: str | None = None
    """The address at which the nodes reach this machine; None: the one this machine reaches
    the manager from."""
    relay_port: int = 7475
    """With run_folders "sent": where serve's relay listens, at `host()`."""

    def host(self) -> str:
        """Where the nodes reach this machine: `host_address`, or the address this machine
        reaches the manager from."""
        if self.host_address:
            return self.host_address
        url = urlparse(self.manager or os.environ.get("DOCKER_HOST", ""))
        if url.hostname and url.scheme in ("tcp", "ssh", "http", "https"):
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                probe.connect((url.hostname, url.port or 2375))  # no packet is sent
                return str(probe.getsockname()[0])
        return "127.0.0.1"  # the manager is this machine

    @classmethod
    def read(cls, options: Mapping[str, Any]) -> SwarmSettings:
        known = {field.name for field in attrs.fields(cls)}
        for key in options:
            if key not in known:
                listed = ", ".join(sorted(known))
                shown = key if str(key).isprintable() else repr(key)
                raise BadInput(f"launchers.swarm.{shown}: unknown key; expected one of {listed}")
        for key in ("manager", "registry", "run_folders", "host_address"):
            value = options.get(key)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise BadInput(f"launchers.swarm.{key}: expected a non-empty string")
        lost = options.get("node_lost_s", attrs.fields(cls).node_lost_s.default)
        if isinstance(lost, bool) or not isinstance(lost, int | float) or not 5 <= lost <= 86400:
            raise BadInput("launchers.swarm.node_lost_s: expected seconds, from 5 to 86400")
        port = options.get("relay_port", attrs.fields(cls).relay_port.default)
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise BadInput("launchers.swarm.relay_port: expected a port, from 1 to 65535")
        folders = options.get("run_folders")
        if folders is not None and folders not in RUN_FOLDERS:
            raise BadInput(f"launchers.swarm.run_folders: expected one of {', '.join(RUN_FOLDERS)}")
        return cls(
            manager=options.get("manager"),
            registry=options.get("registry"),
            node_lost_s=float(lost),
            run_folders=folders,
            host_address=options.get("host_address"),
            relay_port=port,
        )
