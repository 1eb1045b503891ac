"""The node of this machine with its plugins: `Node` (a layer below) is handed the engines
and logins it needs; `LocalNode` loads them from the installed plugins, once, at the first
need, so that a command that never starts a clone loads no plugin."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from shadowclone.config import Config, Paths, load_config
from shadowclone.config.load import config_or_defaults
from shadowclone.node.local import Node
from shadowclone.node.schemas import now

if TYPE_CHECKING:
    from shadowclone.plugin.manager import Registry

__all__ = ["LocalNode", "local_node", "reading_node"]


class LocalNode(Node):
    """Operations on the clones of this machine, with the plugins' registry (`registry`, or
    the installed plugins less those the config disables)."""

    def __init__(
        self,
        config: Config,
        paths: Paths,
        registry: Registry | None = None,
        clock: Callable[[], datetime] = now,
    ) -> None:
        super().__init__(config, paths, lambda: self.registry, clock)
        self._registry = registry

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            from shadowclone.plugin.manager import load_registry  # pluggy: only when needed

            self._registry = load_registry(self.config.plugins.disabled)
        return self._registry


def local_node(paths: Paths | None = None) -> LocalNode:
    """The node of this machine, with the owner's config (the spec's `localNode()`)."""
    config, resolved = load_config(paths)
    return LocalNode(config, resolved)


def reading_node(paths: Paths | None = None) -> tuple[LocalNode, bool]:
    """The node for what only reads (list, get, follow): with the defaults when there is no
    config file yet (then the flag is True); a config that does not load is refused as ever."""
    config, resolved, defaults = config_or_defaults(paths)
    return LocalNode(config, resolved), defaults
