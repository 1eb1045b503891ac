"""`shadowclone status`: can clones run on this machine, and if not, why (as `gh auth status`
and `docker info` answer for theirs)."""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime

import attrs
import click
from rich.text import Text

from shadowclone.cli.app import App, ago, emit_json, json_option, pass_app
from shadowclone.errors import ConfigError, ShadowcloneError


@attrs.frozen
class Check:
    name: str
    ok: bool
    detail: str
    blocks: bool = False
    """Failing, it keeps clones from starting (the exit code is then 1)."""


def _serve(app: App) -> Check:
    from shadowclone.node.servelock import running

    found = running(app.paths)
    if found is None:
        return Check(
            "serve",
            False,
            "not running: start it with `shadowclone serve`, or `shadowclone service install`",
            blocks=True,
        )
    pid = f"pid {found.pid}" if found.pid is not None else "pid not written yet"
    since = (
        f", since {found.since.astimezone():%Y-%m-%d %H:%M:%S} ({ago(found.since)})"
        if found.since
        else ""
    )
    return Check("serve", True, f"running ({pid}{since})")


def _service() -> Check:
    from shadowclone.serve.service import Service

    try:
        result = Service().status()
    except ShadowcloneError as error:
        return Check("service", False, str(error))
    return Check("service", result.installed and result.running, result.summary)


def _launcher(app: App) -> list[Check]:
    from shadowclone.plugin import DescribedLauncher, LauncherSettings

    config = app.node().config
    try:
        settings = LauncherSettings.of(config, app.node().paths.clones_dir, config.image)
        launcher = app.node().registry.launcher(config.launcher).factory(settings)
        launcher.check()
        described = launcher.describe() if isinstance(launcher, DescribedLauncher) else []
    except ShadowcloneError as error:
        return [Check(f"launcher {config.launcher}", False, str(error), blocks=True)]
    what = f"ready, image {config.image}" if config.launcher == "docker" else "ready"
    found = [Check(f"launcher {config.launcher}", True, what)]
    return found + [Check(name, fine, detail) for name, fine, detail in described]


def _queue(app: App) -> list[Check]:
    from shadowclone.node import spares
    from shadowclone.node.admission import DAY

    node = app.node()
    active = node.active()
    counts = {
        state: sum(1 for v in active if v.state == state)
        for state in ("running", "waiting", "scheduled", "preparing", "queued")
    }
    detail = ", ".join(f"{n} {state}" for state, n in counts.items())
    checks = [Check("clones", True, f"{detail}; parallel_clones = {node.config.parallel_clones}")]
    waiting = sum(1 for _ in spares.waiting(node.paths.clones_dir))
    if waiting:
        checks.append(
            Check(
                "spares",
                True,
                f"{waiting} started ahead for the next clone of a kind; spares = "
                f"{node.config.spares}",
            )
        )
    for login, limit in sorted(node.throttles().items()):
        checks.append(
            Check(
                "overload",
                True,
                f"the provider of login {login} is overloaded: serve runs at most {limit} of "
                "its clones for now, one more per quiet spell",
            )
        )
    queued = sorted(
        (v for v in active if v.state == "queued"), key=lambda v: (v.requested_at, v.id)
    )
    if queued:
        first = queued[0]
        checks.append(Check("queue", True, f"{first.id} waits for {node.waiting_for(first)}"))
    today = node.started_since(datetime.now(UTC) - DAY)
    limit = node.config.daily_clones
    checks.append(
        Check(
            "today",
            today < limit,
            f"{today} of daily_clones = {limit} started in the last 24 hours",
            blocks=today >= limit,
        )
    )
    cap = node.config.limits.daily_cost_usd
    if cap is not None:
        spent = node.spent_since(datetime.now(UTC) - DAY)
        checks.append(
            Check(
                "cost",
                spent < cap,
                f"${spent:.2f} of daily_cost_usd = {cap:g} spent in the last 24 hours"
                + ("; queued clones wait" if spent >= cap else ""),
                blocks=spent >= cap,
            )
        )
    return checks


def _config(app: App) -> tuple[list[Check], bool]:
    """The config file, and whether the checks that need a config can go on: with the file's,
    or, while it does not load, with the config serve keeps in force (which is what serve
    applies, and so what the queue's lines must say)."""
    from shadowclone.config.load import NoConfigFile, config_or_defaults
    from shadowclone.plugin.node import LocalNode
    from shadowclone.serve.following import served_config, served_node_config

    try:
        node = app.node()
    except NoConfigFile as error:
        config, paths, _ = config_or_defaults(app.paths)
        app.use_node(LocalNode(config, paths))
        said = f"{error}; the checks below use the defaults"
        return [Check("config", False, said, blocks=True)], True
    except ConfigError as error:
        served = served_config(app.paths)
        held = served_node_config(app.paths, served) if served is not None else None
        if held is not None:
            app.use_node(LocalNode(*held))
            return [Check("config", False, str(error), blocks=True)], True
        return [Check("config", False, f"{error}; every command refuses it", blocks=True)], False
    checks = [Check("config", True, f"{node.paths.config_file}, version {node.config.version}")]
    served = served_config(app.paths)
    if served is not None and served.restart_needed:
        checks.append(
            Check(
                "config",
                False,
                f"{', '.join(served.restart_needed)} changed; serve (pid {served.pid}) takes "
                "that up only when it restarts",
            )
        )
    return checks, True


def _setups(app: App) -> list[Check]:
    from shadowclone.node.schemas import SetupRecord, read

    config = app.node().config
    checks: list[Check] = []
    root = app.node().paths.setup_dir
    records = sorted(root.glob("*/*.json")) if root.is_dir() else []
    if not records:
        checks.append(
            Check("setups", False, "none: run `shadowclone setup OWNER/REPO`", blocks=True)
        )
    for path in records:
        try:
            record = read(path, SetupRecord)
        except (OSError, ShadowcloneError) as error:
            checks.append(Check(f"setup {path.stem}", False, f"{path}: unreadable: {error}"))
            continue
        current = record.config_version == config.version
        detail = f"config version {record.config_version}, engine {record.engine}" + (
            "" if current else f"; set up again: `shadowclone setup {record.repo}`"
        )
        checks.append(Check(f"setup {record.repo}", current, detail))
    return checks


def _caches(app: App) -> list[Check]:
    """The repositories' caches: their size and when each last fetched."""
    from shadowclone.cli.clones import size
    from shadowclone.node.repocaches import repo_caches

    checks = []
    for cache in repo_caches(app.node().paths):
        when = f"fetched {ago(cache.updated_at)}" if cache.updated_at else "not filled yet"
        detail = f"{size(cache.bytes)}, {when} ({cache.path})"
        checks.append(Check(f"cache {cache.repo}", True, detail))
    return checks


def _secrets(app: App) -> Check:
    """By its metadata alone: host code never opens the secrets file."""
    path = app.node().paths.secrets_file
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return Check(
            "secrets", False, f"{path}: missing; `shadowclone setup` writes a template", blocks=True
        )
    if not stat.S_ISREG(info.st_mode):
        return Check("secrets", False, f"{path}: not a plain file", blocks=True)
    if info.st_mode & 0o077:
        return Check(
            "secrets",
            False,
            f"{path}: others can read it (mode {stat.S_IMODE(info.st_mode):o}); "
            f"run chmod 600 {path}",
            blocks=True,
        )
    return Check("secrets", True, f"{path}, private (mode {stat.S_IMODE(info.st_mode):o})")


@click.command()
@json_option
@pass_app
def status(app: App, as_json: bool) -> int:
    """Say whether clones can run here: serve, the service, the launcher, the queue, today's
    count, the setups and the secrets file; exit 1 when something keeps clones from starting.

    \b
    Examples:
      shadowclone status
      shadowclone status --json | jq '.checks[] | select(.ok | not)'
    """
    config, usable = _config(app)
    checks = [_serve(app), _service()]
    if usable:
        checks += [*_launcher(app), *_queue(app), *config, *_setups(app), _secrets(app)]
        checks += _caches(app)
    else:
        checks += config
    blocked = any(c.blocks and not c.ok for c in checks)
    if as_json:
        emit_json({"ok": not blocked, "checks": checks})
    else:
        for check in checks:
            mark = (
                ("ok  ", "green")
                if check.ok
                else (("FAIL", "red") if check.blocks else ("warn", "yellow"))
            )
            app.out.print(Text.assemble(mark, f" {check.name:<20} {check.detail}"))
        app.out.print("clones can start" if not blocked else "clones cannot start: see FAIL above")
    return 1 if blocked else 0
