"""The admission rules of `start`, apart from the node that applies them under `start.lock`:
which caps a clone gets, whether a repository's setup admits it, the daily limits, one active
clone per issue or pull request, and the request that admission writes.

Each rule is a function of what the node read under the lock, so that the rules read in one
place and the node keeps only the locking, the folders and the order of the writes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Protocol

import attrs

from shadowclone.config import Config, Paths
from shadowclone.config.schema import ProviderConfig
from shadowclone.errors import BadInput, MalformedFile, Refused
from shadowclone.node.ids import id_time
from shadowclone.node.index import CloneIndex
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Caps, NetworkMode, Price, Request, SetupRecord
from shadowclone.node.target import Target, same_repo

DAY = timedelta(hours=24)
"""The window of the daily limits: the 24 hours before now, not a calendar day."""


class Login(Protocol):
    """What admission reads of a login: a secret provider's registration, which the plugin
    API defines above this layer."""

    @property
    def name(self) -> str: ...
    @property
    def engine(self) -> str | None: ...
    @property
    def one_at_a_time(self) -> bool: ...
    @property
    def private_repos_only(self) -> bool: ...
    @property
    def base_url(self) -> str | None: ...
    @property
    def token_url(self) -> str | None: ...


def clone_caps(chosen: Caps, config: Config) -> Caps:
    """This clone's caps: each one given in place of the config's; a given one must be > 0."""
    for name, value in (
        ("max minutes", chosen.minutes),
        ("max turns", chosen.turns),
        ("max cost", chosen.cost_usd),
    ):
        if value is not None and not value > 0:
            raise BadInput(f"{name}: expected a number more than 0, got {value}")
    limits = config.limits
    return Caps(
        minutes=chosen.minutes if chosen.minutes is not None else limits.clone_minutes,
        turns=chosen.turns if chosen.turns is not None else limits.clone_turns,
        cost_usd=chosen.cost_usd if chosen.cost_usd is not None else limits.clone_cost_usd,
    )


def admitted_target(
    target: Target,
    setup: SetupRecord | None,
    config: Config,
    login: Login,
) -> Target:
    """The target as its setup spells it, if the setup admits it: it exists, it is of the
    config's version, and the login may work on the repository's visibility."""
    repo = target.repo_full_name
    if setup is None:
        raise Refused(f"{repo} is not set up on this machine; run `shadowclone setup {repo}`")
    if setup.config_version != config.version:
        raise Refused(
            f"{repo} was set up under config version {setup.config_version} and the config "
            f"is now at version {config.version}; run `shadowclone setup {repo}` again"
        )
    if login_refuses(login, setup.visibility):
        raise Refused(f"the {login.name} login never works on {setup.visibility} {repo}")
    if same_repo(setup.repo, repo):  # shown as GitHub spells it, whatever was typed
        owner, name = setup.repo.split("/", 1)
        return attrs.evolve(target, owner=owner, repo=name)
    return target


def login_refuses(login: Login, visibility: str | None) -> bool:
    """A login for private repositories only (a ChatGPT plan) never works on another: checked
    here for `start` and for `setup`, which refuses the repository before recording it."""
    return login.private_repos_only and visibility != "private"


def check_daily_limit(started_today: int, config: Config) -> None:
    if started_today >= config.daily_clones:
        raise Refused(
            f"daily limit reached: {started_today} clones started in the last 24 hours "
            f"(daily_clones = {config.daily_clones})"
        )


def check_one_per_target(target: Target, active: Iterable[tuple[str, Target, str]]) -> None:
    """`active`: (id, target, state) of each active clone. GitHub ignores letter case."""
    for clone_id, other, state in active:
        if other.folded == target.folded:
            raise Refused(f"{target.key} already has an active clone: {clone_id} ({state})")


def request_for(
    clone_id: str,
    at: datetime,
    target: Target,
    setup: SetupRecord,
    config: Config,
    engine: str,
    login: Login,
    model_host: str | None,
    instructions: str,
    allow_secrets: bool,
    caps: Caps,
) -> Request:
    """The request admission writes: everything the clone needs, fixed at admission."""
    provider = config.providers[engine]
    return Request(
        id=clone_id,
        target=target,
        engine=engine,
        login=login.name,
        launcher=config.launcher,
        image=setup.image or config.image,
        github_url=config.github.url,
        github_api_url=config.github.api_url,
        requested_at=at,
        base_url=provider.base_url or login.base_url,
        token_url=provider.token_url or login.token_url,
        model=provider.model,
        one_at_a_time=login.one_at_a_time,
        model_host=model_host,
        instructions=instructions,
        ask_timeout_s=config.limits.ask_timeout_s,
        stall_timeout_s=config.limits.stall_timeout_s,
        long_wait_s=config.limits.long_wait_s,
        check_commands=setup.check_commands,
        fix_rounds=config.limits.fix_rounds,
        caches=setup.caches,
        lifecycle=setup.lifecycle,
        environment=setup.environment,
        strangers_network=NetworkMode(config.security.strangers),
        omit_strangers_text=config.security.strangers_text == "omitted",
        allow_secrets=allow_secrets,
        caps=caps,
        price=price_of(provider),
    )


def price_of(provider: ProviderConfig) -> Price | None:
    if provider.input_usd_per_mtok is None and provider.output_usd_per_mtok is None:
        return None
    return Price(provider.input_usd_per_mtok or 0.0, provider.output_usd_per_mtok or 0.0)


def spent_since(paths: Paths, index: CloneIndex, since: datetime) -> float:
    """The cost the records of the clones requested since `since` hold (one unreadable is
    counted as nothing: it is reported where it is read)."""
    total = 0.0
    for clone_id in index.newest():
        requested = id_time(clone_id)
        if requested is None:
            continue
        if requested < since.replace(microsecond=0):
            break
        with contextlib.suppress(OSError, MalformedFile):
            record = RunFolder(paths.clones_dir / clone_id).record()
            if record is not None and record.usage.cost_usd:
                total += record.usage.cost_usd
    return total


def daily_cost_reason(spent: float, cap: float) -> str:
    return (
        f"the daily cost cap: ${spent:.2f} spent by the clones of the last 24 hours, "
        f"daily_cost_usd = {cap:g}"
    )
