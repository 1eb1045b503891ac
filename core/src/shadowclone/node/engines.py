"""What the node reads of the plugin registry: an engine's default API and a login. The
registry is defined in the plugin layer, above the node, so the node names only these
protocols and the caller hands the registry in."""

from __future__ import annotations

from typing import Protocol

from shadowclone.node.admission import Login


class EngineDefaults(Protocol):
    """What the node reads of an engine's registration."""

    @property
    def default_base_url(self) -> str | None: ...


class Engines(Protocol):
    """The engines and logins the loaded plugins provide (`plugin.manager.Registry`)."""

    def engine(self, name: str) -> EngineDefaults: ...
    def secret_provider(self, name: str) -> Login: ...
