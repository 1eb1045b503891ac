"""Finding plugins, loading them one by one, and remembering who provides which name.

A broken plugin (an import error, a misspelled hook, a hook that raises or returns the wrong
type, a name another plugin also claims) is recorded with its distribution and version and
skipped; the others keep working. There is no module-level manager: each call builds its own.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, TypeVar

import attrs
import pluggy

from shadowclone.errors import PluginUnavailable
from shadowclone.plugin import spec
from shadowclone.plugin.types import (
    EngineRegistration,
    Family,
    LauncherRegistration,
    NotifierRegistration,
    Registration,
    ReviewStageRegistration,
    SecretProviderRegistration,
)

ENTRY_POINT_GROUP = "shadowclone"

BUILTIN_PLUGINS: tuple[str, ...] = (
    "shadowclone.providers",
    "shadowclone.run.review",
    "shadowclone.notify.builtin",
)
"""Core modules that register through the same hooks as any third-party plugin."""

HOOKS: dict[Family, tuple[str, type[Any]]] = {
    Family.ENGINE: ("shadowclone_engines", EngineRegistration),
    Family.LAUNCHER: ("shadowclone_launchers", LauncherRegistration),
    Family.REVIEW_STAGE: ("shadowclone_review_stages", ReviewStageRegistration),
    Family.SECRET_PROVIDER: ("shadowclone_secret_providers", SecretProviderRegistration),
    Family.NOTIFIER: ("shadowclone_notifiers", NotifierRegistration),
}

Status = Literal["active", "disabled", "failed"]
R = TypeVar("R", bound=Registration)


def make_plugin_manager() -> pluggy.PluginManager:
    """A fresh manager that knows the hookspecs and nothing else."""
    manager = pluggy.PluginManager(spec.PROJECT)
    manager.add_hookspecs(spec)
    return manager


@attrs.frozen
class PluginInfo:
    """One plugin module: an entry point of a distribution, or a built-in core module."""

    name: str
    distribution: str
    version: str
    status: Status
    reason: str = ""

    @property
    def origin(self) -> str:
        return f"{self.distribution} {self.version}"


@attrs.frozen
class Provided:
    """One name in one family, and the plugin that provides it."""

    family: Family
    name: str
    summary: str
    plugin: PluginInfo
    status: Status
    reason: str = ""
    registration: Registration | None = None


PROJECT_DISTRIBUTIONS = {
    (Family.ENGINE, "claude"): "shadowclone-claude",
    (Family.ENGINE, "codex"): "shadowclone-codex",
    (Family.ENGINE, "scripted"): "shadowclone-testing",
    (Family.LAUNCHER, "docker"): "shadowclone-docker-launch",
    (Family.LAUNCHER, "fake"): "shadowclone-fake-launch",
    (Family.LAUNCHER, "swarm"): "shadowclone-swarm-launch",
}
"""The project's own plugins, by what they provide: a name asked for and not installed says
which distribution to add (a core-only install has no engine and no launcher)."""


@attrs.frozen
class Registry:
    """What the installed plugins provide, with every failure kept for `shadowclone plugins`."""

    plugins: tuple[PluginInfo, ...]
    provided: tuple[Provided, ...]

    def names(self, family: Family) -> list[str]:
        return sorted(
            {p.name for p in self.provided if p.family is family and p.status == "active"}
        )

    def get(self, family: Family, name: str) -> Registration:
        """The registration for `name`, or an error saying what is installed and what failed."""
        candidates = [p for p in self.provided if p.family is family and p.name == name]
        for candidate in candidates:
            if candidate.status == "active" and candidate.registration is not None:
                return candidate.registration
        if candidates:
            raise PluginUnavailable(
                f"the {family} {name!r} is {candidates[0].status}: {candidates[0].reason}"
            )
        names = self.names(family)
        installed = ", ".join(names) or "none"
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        failed = [
            f"{p.name} ({p.origin}: {p.reason})" for p in self.plugins if p.status == "failed"
        ]
        tail = f"; plugins that failed to load: {'; '.join(failed)}" if failed else ""
        distribution = PROJECT_DISTRIBUTIONS.get((family, name))
        if distribution is not None:
            guess = f" (it comes with {distribution}: install that beside shadowclone)"
        raise PluginUnavailable(f"no {family} named {name!r}{guess}; installed: {installed}{tail}")

    def _typed(self, family: Family, name: str, kind: type[R]) -> R:
        registration = self.get(family, name)
        assert isinstance(registration, kind)
        return registration

    def engine(self, name: str) -> EngineRegistration:
        return self._typed(Family.ENGINE, name, EngineRegistration)

    def launcher(self, name: str) -> LauncherRegistration:
        return self._typed(Family.LAUNCHER, name, LauncherRegistration)

    def secret_provider(self, name: str) -> SecretProviderRegistration:
        return self._typed(Family.SECRET_PROVIDER, name, SecretProviderRegistration)

    def notifier(self, name: str) -> NotifierRegistration:
        return self._typed(Family.NOTIFIER, name, NotifierRegistration)

    def secret_providers(self) -> list[SecretProviderRegistration]:
        return [self.secret_provider(n) for n in self.names(Family.SECRET_PROVIDER)]

    def review_stages(self) -> list[ReviewStageRegistration]:
        stages = [
            self._typed(Family.REVIEW_STAGE, n, ReviewStageRegistration)
            for n in self.names(Family.REVIEW_STAGE)
        ]
        return sorted(stages, key=lambda s: (s.order, s.name))


@attrs.define
class _Loader:
    manager: pluggy.PluginManager
    disabled: frozenset[str]
    plugins: dict[str, PluginInfo] = attrs.field(factory=dict)

    def fail(self, info: PluginInfo, reason: str) -> None:
        self.plugins[info.name] = attrs.evolve(info, status="failed", reason=reason)
        if self.manager.has_plugin(info.name):
            self.manager.unregister(name=info.name)

    def add(self, info: PluginInfo, load: Callable[[], object]) -> None:
        if info.name in self.plugins:
            other = self.plugins[info.name]
            reason = f"the plugin name {info.name!r} is claimed by {other.origin} and {info.origin}"
            self.fail(other, reason)
            self.plugins[f"{info.name} ({info.distribution})"] = attrs.evolve(
                info, status="failed", reason=reason
            )
            return
        if info.name in self.disabled or info.distribution in self.disabled:
            self.plugins[info.name] = attrs.evolve(
                info, status="disabled", reason="disabled in config"
            )
            return
        self.plugins[info.name] = info
        try:
            module = load()
        except Exception as error:  # noqa: BLE001 - any import failure must not stop the others
            self.fail(info, f"failed to import: {type(error).__name__}: {error}")
            return
        try:
            self.manager.register(module, name=info.name)
            self.manager.check_pending()
        except (pluggy.PluginValidationError, ValueError) as error:
            self.fail(info, f"invalid plugin: {error}")


def _dist_of(entry_point: importlib.metadata.EntryPoint) -> tuple[str, str]:
    dist = entry_point.dist
    if dist is None:
        return ("unknown", "?")
    return (dist.metadata["Name"] or dist.name, dist.version)


def _collect(
    manager: pluggy.PluginManager, plugins: dict[str, PluginInfo]
) -> list[tuple[Family, PluginInfo, Registration]]:
    found: list[tuple[Family, PluginInfo, Registration]] = []
    for family, (hook_name, kind) in HOOKS.items():
        hook: pluggy.HookCaller = getattr(manager.hook, hook_name)
        for impl in hook.get_hookimpls():
            info = plugins[impl.plugin_name]
            if info.status != "active":
                continue
            try:
                result = impl.function()
                items = list(result) if isinstance(result, Iterable) else [result]
            except Exception as error:  # noqa: BLE001 - one plugin's bug must not stop the others
                plugins[info.name] = attrs.evolve(
                    info,
                    status="failed",
                    reason=f"{hook_name} raised {type(error).__name__}: {error}",
                )
                continue
            wrong = [item for item in items if not isinstance(item, kind)]
            if wrong:
                plugins[info.name] = attrs.evolve(
                    info,
                    status="failed",
                    reason=f"{hook_name} returned {type(wrong[0]).__name__}, "
                    f"expected {kind.__name__}",
                )
                continue
            found.extend((family, info, item) for item in items if isinstance(item, kind))
    return found


def load_registry(
    disabled: Iterable[str] = (),
    builtins: Sequence[str] = BUILTIN_PLUGINS,
    entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
) -> Registry:
    """Load the built-in plugins and every entry point of the group `shadowclone`."""
    from shadowclone import __version__

    loader = _Loader(make_plugin_manager(), frozenset(disabled))
    for module_name in builtins:
        loader.add(
            PluginInfo(module_name, "shadowclone", __version__, "active"),
            lambda name=module_name: importlib.import_module(name),  # type: ignore[misc]
        )
    if entry_points is None:
        entry_points = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    for entry_point in sorted(entry_points, key=lambda e: e.name):
        distribution, version = _dist_of(entry_point)
        loader.add(PluginInfo(entry_point.name, distribution, version, "active"), entry_point.load)

    found = _collect(loader.manager, loader.plugins)
    by_name: dict[tuple[Family, str], list[tuple[PluginInfo, Registration]]] = defaultdict(list)
    for family, info, registration in found:
        current = loader.plugins[info.name]
        if current.status == "active":
            by_name[(family, registration.name)].append((current, registration))

    provided: list[Provided] = []
    for (family, name), claims in sorted(by_name.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if len(claims) > 1:
            reason = f"the {family} name {name!r} is claimed by " + " and ".join(
                info.origin for info, _ in claims
            )
            provided.extend(
                Provided(family, name, reg.summary, info, "failed", reason) for info, reg in claims
            )
        else:
            info, reg = claims[0]
            provided.append(Provided(family, name, reg.summary, info, "active", "", reg))
    return Registry(plugins=tuple(loader.plugins.values()), provided=tuple(provided))
