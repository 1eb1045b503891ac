"""The config schema: frozen attrs classes, structured by one strict cattrs converter."""

from __future__ import annotations

import enum
from typing import Any

import attrs

from shadowclone import __version__

DEFAULT_IMAGE = f"ghcr.io/shadowclone/clone:{__version__}"
DEMO_IMAGE = f"shadowclone-demo:{__version__}"
"""The clone image plus the scripted engine (`shadowclone image build --demo`): what
`shadowclone demo --launcher docker` and the Docker tests run. Built locally, never published."""

LONG_WAIT_S = 5 * 60.0
"""A login's usage limit that resets further away than this ends the clone's process (its
engine's session kept) until the reset, rather than holding it while it waits."""


class NotifyEvent(enum.StrEnum):
    """What serve tells the owner of."""

    QUESTION = "question"
    """A clone asks the owner a question (it takes the recommended option after a while)."""
    PAUSED = "paused"
    """A clone reached one of its caps and asks whether to raise it or to finish."""
    SCHEDULED = "scheduled"
    """A clone waits for its login's usage limit to reset."""
    DONE = "done"
    FAILED = "failed"
    STOPPED = "stopped"
    LAUNCH_FAILED = "launch-failed"
    """serve could not launch (or prepare) a clone."""


@attrs.frozen
class ProviderConfig:
    """How one engine reaches its model: which login, and where the API is."""

    login: str
    base_url: str | None = None
    model: str | None = None
    token_url: str | None = None
    """Where a login that renews its tokens (a ChatGPT plan) does so, when not its own."""
    input_usd_per_mtok: float | None = None
    output_usd_per_mtok: float | None = None
    """What a million tokens in and out cost, for an engine that reports tokens but no cost
    (Codex): the clone's cost, and its cost caps, are reckoned from them."""


@attrs.frozen
class GithubConfig:
    url: str = "https://github.com"
    api_url: str = "https://api.github.com"


@attrs.frozen
class LimitsConfig:
    """Bounds for every clone."""

    cpus: float = 2.0
    memory: str = "4g"
    stall_timeout_s: float = 20 * 60
    """A clone whose engine shows nothing for this long is ended as stalled."""
    ask_timeout_s: float = 30 * 60
    """An unanswered question takes its recommended option after this long (at most 30 min)."""
    long_wait_s: float = LONG_WAIT_S
    """A login's usage limit that resets further away than this ends the clone's process (its
    engine's session kept) until serve launches it again at the reset."""
    clone_minutes: float | None = None
    """A clone that has worked this long pauses and asks the owner to raise the cap or finish
    (None: no cap). Time spent waiting for the owner's answers does not count."""
    clone_turns: int | None = None
    """The same, at this many of the engine's turns."""
    clone_cost_usd: float | None = None
    """The same, at this cost, as the engine reports it."""
    daily_cost_usd: float | None = None
    """serve holds queued clones while the clones requested in the last 24 hours have cost
    this much (None: no cap)."""
    fix_rounds: int = attrs.field(default=1, validator=attrs.validators.in_(range(0, 11)))
    """How often failing checks of the repository go back to the engine before the work is
    saved with them failing (0 to 10)."""


@attrs.frozen
class PathsConfig:
    clones: str | None = None
    secrets: str | None = None


STRANGERS = ("model-only", "open")
STRANGERS_TEXT = ("fenced", "omitted")


@attrs.frozen
class SecurityConfig:
    strangers: str = "model-only"
    """How a clone works on an issue written by someone who cannot push to the repository:
    "model-only", its engine has no network but the model's API; "open", it keeps the
    network, as for the owner's own issues."""
    strangers_text: str = "fenced"
    """What the engine reads of comments and reviews by people who cannot push: "fenced",
    each marked as untrusted text; "omitted", none of them (counted only)."""


@attrs.frozen
class PluginsConfig:
    disabled: list[str] = attrs.field(factory=list)
    """Plugin or distribution names not to load."""


@attrs.frozen
class RetentionConfig:
    older_than: str | None = None
    """serve removes clones that ended at least this long ago ("30d", "2w"); None keeps all."""


@attrs.frozen
class EnvironmentConfig:
    network: str = "host"
    """The network of the steps that build a repository's environment image ("default":
    Docker's own)."""
    ca_certs: list[str] = attrs.field(factory=list)
    """PEM certificate authorities those builds trust besides Debian's (a TLS-inspecting
    proxy in front of the registries)."""


NOTIFY_EVENTS = tuple(str(event) for event in NotifyEvent)
"""What `[notify] events` may name."""


@attrs.frozen
class NotifyConfig:
    use: list[str] = attrs.field(factory=list)
    """The notifiers serve tells things to: "desktop", "webhook", "ntfy"..."""
    events: list[str] = attrs.field(factory=lambda: list(NOTIFY_EVENTS))
    """Which events they hear."""
    options: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    """Each notifier's own table, `[notify.NAME]`."""


@attrs.frozen
class DashboardConfig:
    serve: bool = False
    """serve runs the dashboard too (else `shadowclone dashboard` does)."""
    host: str = "127.0.0.1"
    port: int = 8765
    url: str | None = None
    """The dashboard's address as the owner's devices reach it, for the links notifications
    carry (default: http://host:port)."""

    def address(self) -> str:
        return (self.url or f"http://{self.host}:{self.port}").rstrip("/")


def _default_providers() -> dict[str, ProviderConfig]:
    return {
        "claude": ProviderConfig(login="claude-api-key"),
        "codex": ProviderConfig(login="openai-api-key"),
    }


@attrs.frozen
class Config:
    version: int = 1
    """Raise it when a change needs `shadowclone setup` again: older setups are then refused."""
    engine: str = "claude"
    launcher: str = "docker"
    image: str = DEFAULT_IMAGE
    parallel_clones: int = 2
    daily_clones: int = 20
    spares: int = 2
    """How many clones' containers serve keeps started ahead, each for a kind of clone it
    launched lately (image, repository, login): the next such clone skips Docker's start."""
    providers: dict[str, ProviderConfig] = attrs.field(factory=_default_providers)
    github: GithubConfig = GithubConfig()
    limits: LimitsConfig = LimitsConfig()
    paths: PathsConfig = PathsConfig()
    plugins: PluginsConfig = PluginsConfig()
    security: SecurityConfig = SecurityConfig()
    retention: RetentionConfig = RetentionConfig()
    environment: EnvironmentConfig = EnvironmentConfig()
    notify: NotifyConfig = NotifyConfig()
    dashboard: DashboardConfig = DashboardConfig()
    launchers: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    """Each launcher's own table, `[launchers.NAME]`, which that launcher reads (the swarm's
    manager and registry...)."""

    def provider(self, engine: str) -> ProviderConfig | None:
        return self.providers.get(engine)
