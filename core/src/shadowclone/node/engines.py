"""What the node reads of the plugin registry, and the one check of an engine against its
provider table and login, which `start` makes and `setup` makes first.

The registry is defined in the plugin layer, above the node, so the node names only these
protocols and the caller hands the registry in.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Generic, Protocol, TypeVar

import attrs

from shadowclone.config import Config
from shadowclone.config.schema import ProviderConfig
from shadowclone.errors import BadInput
from shadowclone.node.admission import Login

LoginT = TypeVar("LoginT", bound=Login)
LoginT_co = TypeVar("LoginT_co", bound=Login, covariant=True)


class EngineDefaults(Protocol):
    """What the node reads of an engine's registration."""

    @property
    def default_base_url(self) -> str | None: ...


class Engines(Protocol[LoginT_co]):
    """The engines and logins the loaded plugins provide (`plugin.manager.Registry`); generic
    in the login so that a caller gets back the registration it handed in."""

    def engine(self, name: str) -> EngineDefaults: ...
    def secret_provider(self, name: str) -> LoginT_co: ...


class NoProvider(BadInput):
    """The config has no `[providers.<engine>]` table for the engine chosen."""

    def __init__(self, engine: str, config_file: Path, tables: Sequence[str] = ()) -> None:
        close = difflib.get_close_matches(engine, tables, n=1, cutoff=0.6)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        super().__init__(
            f"engine {engine!r}: no [providers.{engine}] table in {config_file}{guess}"
        )
        self.engine = engine


class LoginOfAnotherEngine(BadInput):
    """The provider table names a login that belongs to another engine."""

    def __init__(
        self, engine: str, provider: ProviderConfig, login: Login, config_file: Path
    ) -> None:
        super().__init__(
            f"{config_file}: providers.{engine}.login: {provider.login!r} is a "
            f"login for {login.engine}, not {engine}"
        )
        self.login = login


@attrs.frozen
class EngineLogin(Generic[LoginT]):
    """An engine with its provider table, its registration and its login, checked."""

    name: str
    provider: ProviderConfig
    registration: EngineDefaults
    login: LoginT


def engine_and_login(
    config: Config, config_file: Path, engines: Callable[[], Engines[LoginT]], engine: str
) -> EngineLogin[LoginT]:
    """`engine` as the config and the plugins provide it: `NoProvider`, `PluginUnavailable`
    (from the registry) or `LoginOfAnotherEngine` if they cannot. `engines` is called only
    once the provider table is found, so an engine the config lacks loads no plugin."""
    provider = config.provider(engine)
    if provider is None:
        raise NoProvider(engine, config_file, sorted(config.providers))
    registry = engines()
    registration = registry.engine(engine)
    login = registry.secret_provider(provider.login)
    if login.engine not in (None, engine):
        raise LoginOfAnotherEngine(engine, provider, login, config_file)
    return EngineLogin(engine, provider, registration, login)
