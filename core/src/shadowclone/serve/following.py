"""serve follows the config file as it changes, and says which config it applies.

serve reads the config file again whenever it changes (a watcher on the config's folder wakes
it; a look at the file's size, times and inode before every launch decision, and a read of its
text on every rescan, catch what an event missed) and applies what it reads at once. A file
that no longer loads (bad TOML, a bad value, gone) leaves the last good config in force, said
once in serve's log. A few keys name what serve was started with and wait for a restart
(`RESTART_KEYS`).

What serve applies it writes beside the config file (`Paths.served_config_file`): the text of
the config in force, when it took it up, why the file as it is now is not applied, and which
changed keys wait for a restart. The CLI reads the config file itself, which is what serve
applies whenever it loads; only when it does not load does the CLI read that file, to say
which config serve keeps in force (`shadowclone status` shows it and goes on with it).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs
from watchfiles import Change, watch

from shadowclone import files
from shadowclone.config import Config, Paths, parse_config
from shadowclone.config.load import MAX_CONFIG_BYTES, unstructure
from shadowclone.errors import ConfigError, MalformedFile
from shadowclone.node import schemas
from shadowclone.node.schemas import now

log = logging.getLogger(__name__)

RESTART_KEYS = ("launcher", "paths.clones", "plugins.disabled")
"""What serve takes up only when it starts: its launcher, the clones folder it holds the lock
of, and the plugins it loaded. Every other key serve uses applies at once."""

Signature = tuple[int, int, int, int, int]


@attrs.frozen
class ServedConfig:
    """serve's word on the config it applies; only serve writes it."""

    pid: int
    clones_dir: str
    """The clones folder of that serve (where its lock is)."""
    config_file: str
    text: str
    """The config in force, as serve read it ("" for one given to it, never read)."""
    applied_at: datetime
    """When serve took that config up."""
    error: str = ""
    """Why the config file as it is now is not applied: one line naming the file and what is
    wrong ("" when it is)."""
    restart_needed: list[str] = attrs.field(factory=list)
    """Keys whose change in the file serve takes up only when it restarts."""
    v: int = schemas.SCHEMA_VERSION


def signature(path: Path) -> Signature | None:
    """What changes when a file is written or replaced; None when it cannot be looked at."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        return {prefix: data}
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            flat.update(_flat(value, name))
        else:
            flat[name] = value
    return flat


def changes(old: Config, new: Config) -> list[str]:
    """`key old -> new` for each key that differs, in the schema's order."""
    before, after = _flat(unstructure(old)), _flat(unstructure(new))
    return [
        f"{key} {before.get(key)!r} -> {after.get(key)!r}"
        for key in dict.fromkeys([*before, *after])
        if before.get(key) != after.get(key)
    ]


class ConfigFollower:
    """The config serve applies, and the file it follows.

    `paths`: the host paths serve runs with (its clones folder); `base`: the paths before the
    config's `[paths]` overrides, which a new config's overrides apply to."""

    def __init__(
        self, config: Config, paths: Paths, base: Paths | None = None, text: str | None = None
    ) -> None:
        self.started = config
        """What serve started with: `RESTART_KEYS` keep these values."""
        self.config = config
        self.paths = paths
        self.base = base or paths
        self.text = text
        """The text of the config in force; None for one given to serve, never read."""
        self._seen = text if text is not None else _peek(paths.config_file)
        """The file's text at the last look: only a text unlike it is parsed again (a config
        given to serve stays until the file changes)."""
        if self.text is None and self._seen is not None and _parses_to(self._seen, paths, config):
            self.text = self._seen  # the config given is the file's
        self.applied_at = now()
        self.error = ""
        self.restart_needed: list[str] = []
        self._signature = signature(paths.config_file)
        self._changed = threading.Event()
        """Set by the watcher: read the file's text, whatever its signature says."""

    @classmethod
    def load(cls, base: Paths) -> ConfigFollower:
        """The config file as serve starts with it (`ConfigError` if it does not load)."""
        before = signature(base.config_file)
        text = _read(base.config_file)
        config = parse_config(text, base.config_file)
        paths = base.with_overrides(config.paths.clones, config.paths.secrets)
        follower = cls(config, paths, base, text)
        follower._signature = before  # changed since: read again at the first look
        return follower

    @property
    def file(self) -> Path:
        return self.paths.config_file

    # ------------------------------------------------------------------ following

    def watch(self, stop_event: threading.Event, wake: Callable[[], None]) -> None:
        """Wake serve whenever the config file changes (on a thread of its own; the folder
        alone, not what is below it)."""
        name = self.file.name

        def wanted(_change: Change, path: str) -> bool:
            return Path(path).name == name

        try:
            for _changes in watch(
                self.file.parent,
                watch_filter=wanted,
                recursive=False,
                debounce=50,
                step=10,
                stop_event=stop_event,
                raise_interrupt=False,
            ):
                self._changed.set()
                wake()
        except (OSError, RuntimeError) as error:
            log.warning(
                "cannot watch %s (%s); serve looks at it before each launch", self.file, error
            )

    def check(self, force: bool = False) -> tuple[Config, Paths] | None:
        """The config and paths to apply now, if the file changed and loads; None if nothing
        is to change (unchanged, or no longer loading: the last good config stays).
        `force`: read the text even if the file looks unchanged (the rescan's safety net)."""
        found = signature(self.file)
        if not (force or self._changed.is_set() or found != self._signature):
            return None
        self._changed.clear()
        self._signature = found
        try:
            text = _read(self.file)
            if text == self._seen:
                return None
            text = _settled(self.file, text)
        except ConfigError as error:
            self._seen = None
            self._failed(str(error))
            return None
        self._seen = text
        try:
            config = parse_config(text, self.file)
        except ConfigError as error:
            self._failed(str(error))
            return None
        if text == self.text:
            self._recovered()
            return None
        return self._take(config, text)

    def _take(self, config: Config, text: str) -> tuple[Config, Paths]:
        paths = self.base.with_overrides(config.paths.clones, config.paths.secrets)
        waiting = []
        if config.launcher != self.started.launcher:
            waiting.append("launcher")
        if paths.clones_dir != self.paths.clones_dir:
            waiting.append("paths.clones")
        if config.plugins != self.started.plugins:
            waiting.append("plugins.disabled")
        applied = attrs.evolve(config, launcher=self.started.launcher, plugins=self.started.plugins)
        paths = attrs.evolve(paths, clones_dir=self.paths.clones_dir)
        changed = changes(self.config, applied)
        self.config, self.paths, self.text = applied, paths, text
        self.applied_at, self.error = now(), ""
        if changed:
            log.info("config: applied %s: %s", self.file, "; ".join(changed))
        if waiting != self.restart_needed and waiting:
            log.warning(
                "config: %s changed in %s; serve takes that up only when it restarts",
                ", ".join(waiting),
                self.file,
            )
        self.restart_needed = waiting
        self.publish()
        return applied, paths

    def _failed(self, error: str) -> None:
        if error == self.error:
            return
        self.error = error
        log.error("config: %s; %s", error, self.in_force())
        self.publish()

    def _recovered(self) -> None:
        if self.error:
            log.info("config: %s loads again; serve applies it", self.file)
            self.error = ""
            self.publish()

    def in_force(self) -> str:
        applied = self.applied_at.astimezone()
        return f"serve keeps the last good config, of {applied:%H:%M:%S}, in force"

    # ------------------------------------------------------------------ telling

    def publish(self) -> None:
        """Write what serve applies beside the config file, for `status` and the CLI."""
        served = ServedConfig(
            pid=os.getpid(),
            clones_dir=str(self.paths.clones_dir),
            config_file=str(self.file),
            text=self.text or "",
            applied_at=self.applied_at,
            error=self.error,
            restart_needed=list(self.restart_needed),
        )
        try:
            files.write_atomic(
                self.paths.served_config_file, schemas.dumps(served) + b"\n", plain_folder=False
            )
        except (OSError, MalformedFile) as error:
            log.warning("cannot write %s: %s", self.paths.served_config_file, error)

    def withdraw(self) -> None:
        """serve stops: what it applied is no longer in force anywhere."""
        try:
            files.remove(self.paths.served_config_file)
        except MalformedFile as error:
            log.warning("%s", error)


SETTLE_S = 0.02
"""A changed file is read again this much later, until two reads agree: a file written in
place (truncated, then written) is never taken up half written."""


def _settled(path: Path, text: str) -> str:
    """`text`, read from `path`, once a read `SETTLE_S` later agrees (or the latest read)."""
    for _ in range(25):
        time.sleep(SETTLE_S)
        again = _read(path)
        if again == text:
            break
        text = again
    return text


def _parses_to(text: str, paths: Paths, config: Config) -> bool:
    try:
        return parse_config(text, paths.config_file) == config
    except ConfigError:
        return False


def _peek(path: Path) -> str | None:
    try:
        return _read(path)
    except ConfigError:
        return None


def _read(path: Path) -> str:
    try:
        return files.read_bounded(path, MAX_CONFIG_BYTES, plain_folder=False).decode()
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: no config file; run `shadowclone config init` to create one"
        ) from None
    except MalformedFile as error:
        raise ConfigError(str(error)) from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: cannot read: {error}") from None


def served_config(paths: Paths) -> ServedConfig | None:
    """What the serve that runs now applies, as it wrote it; None when no serve runs (or it
    wrote nothing readable)."""
    from shadowclone.node.servelock import running

    try:
        data = files.read_bounded(paths.served_config_file, plain_folder=False)
        served = schemas.loads(data, ServedConfig, paths.served_config_file)
    except (OSError, MalformedFile):
        return None
    found = running(attrs.evolve(paths, clones_dir=Path(served.clones_dir)))
    if found is None or (found.pid is not None and found.pid != served.pid):
        return None
    return served


def served_node_config(paths: Paths, served: ServedConfig) -> tuple[Config, Paths] | None:
    """The config serve keeps in force, and the paths it settles; None if it is not one the
    config file held (serve was given it) or no longer parses."""
    if not served.text:
        return None
    try:
        config = parse_config(served.text, paths.config_file)
    except ConfigError:
        return None
    resolved = paths.with_overrides(config.paths.clones, config.paths.secrets)
    return config, attrs.evolve(resolved, clones_dir=Path(served.clones_dir))


def held_line(served: ServedConfig) -> str:
    """What `status` and a refused command add to a config error while serve runs."""
    return (
        f"serve (pid {served.pid}) keeps the last good config, of "
        f"{served.applied_at.astimezone():%H:%M:%S}, in force"
    )
