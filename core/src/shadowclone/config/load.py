"""Reading, checking and editing the config file.

Structuring is strict (no unknown keys, no silent `"3"` to `3`), and every problem becomes one
line naming the file, the key path and what was expected. Edits go through tomlkit so the
owner's comments and key order survive.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cattrs
import tomlkit
import tomlkit.exceptions
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError

from shadowclone.config.paths import Paths, default_paths
from shadowclone.config.schema import (
    DEFAULT_IMAGE,
    NOTIFY_EVENTS,
    STRANGERS,
    STRANGERS_TEXT,
    Config,
    NotifyConfig,
)
from shadowclone.errors import ConfigError, MalformedFile
from shadowclone.files import read_bounded, write_atomic

MAX_CONFIG_BYTES = 1024 * 1024

_MAX_CPUS = 4096
_MEMORY = re.compile(r"^[1-9][0-9]{0,15}[bkmgBKMG]?$")
"""A size as Docker takes it: a whole number of bytes, or of k, m or g."""
_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def _strict(kind: type[Any]) -> Any:
    def structure(value: Any, _type: type[Any]) -> Any:
        ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if not ok:
            raise ValueError(f"expected {_TYPE_NAMES[kind]}, got {value!r}")
        return value

    return structure


def _strict_strings(value: Any, _type: type[Any]) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a list of strings, got {value!r}")
    return list(value)


def make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)
    for kind in _TYPE_NAMES:
        converter.register_structure_hook(kind, _strict(kind))
    converter.register_structure_hook_func(lambda t: t == list[str], _strict_strings)
    converter.register_structure_hook(NotifyConfig, _structure_notify)
    converter.register_unstructure_hook(NotifyConfig, _unstructure_notify)
    return converter


def _structure_notify(value: Any, _type: type[Any]) -> NotifyConfig:
    """`[notify]`: `use` and `events`, and a table of its own per notifier."""
    if not isinstance(value, dict):
        raise ValueError(f"expected a table, got {value!r}")
    options: dict[str, dict[str, Any]] = {}
    plain: dict[str, Any] = {}
    for key, item in value.items():
        (options if isinstance(item, dict) else plain)[key] = item
    extra = sorted(set(plain) - {"use", "events"})
    if extra:
        raise ValueError(
            f"unknown key {extra[0]!r}; expected use, events, or a [notify.NAME] table"
        )
    defaults = NotifyConfig()
    return NotifyConfig(
        use=_strict_strings(plain.get("use", defaults.use), list[str]),
        events=_strict_strings(plain.get("events", defaults.events), list[str]),
        options={name: dict(table) for name, table in options.items()},
    )


def _unstructure_notify(config: NotifyConfig) -> dict[str, Any]:
    return {"use": list(config.use), "events": list(config.events), **config.options}


CONVERTER = make_converter()


def _problems(error: BaseException, path: str) -> list[str]:
    """Flatten cattrs' exception groups into `key.path: what was expected` lines."""
    if isinstance(error, ForbiddenExtraKeysError):
        known = ", ".join(a.name for a in getattr(error.cl, "__attrs_attrs__", ()))
        return [
            f"{_join(path, key)}: unknown key; expected one of {known}"
            for key in sorted(error.extra_fields)
        ]
    if isinstance(error, ClassValidationError | IterableValidationError):
        found: list[str] = []
        with_notes, without = error.group_exceptions()
        for inner, note in with_notes:
            name = getattr(note, "name", getattr(note, "index", "?"))
            found.extend(_problems(inner, _join(path, str(name))))
        for inner in without:
            found.extend(_problems(inner, path))
        return found
    if isinstance(error, KeyError):
        return [f"{path}: missing; this key is required"]
    return [f"{path or 'config'}: {error}"]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def check(config: Config) -> list[str]:
    """Rules the types cannot say; each as `key: problem`."""
    problems: list[str] = []
    if config.version < 1:
        problems.append(f"version: expected an integer of at least 1, got {config.version}")
    if config.parallel_clones < 1:
        problems.append(f"parallel_clones: expected at least 1, got {config.parallel_clones}")
    if config.daily_clones < 1:
        problems.append(f"daily_clones: expected at least 1, got {config.daily_clones}")
    if config.spares < 0:
        problems.append(f"spares: expected 0 or more, got {config.spares}")
    if config.retention.older_than is not None:
        from shadowclone.config.durations import parse_duration
        from shadowclone.errors import BadInput

        try:
            parse_duration(config.retention.older_than)
        except BadInput as error:
            problems.append(f"retention.older_than: {error}")
    for event in config.notify.events:
        if event not in NOTIFY_EVENTS:
            problems.append(
                f"notify.events: unknown event {event!r}; expected some of "
                + ", ".join(NOTIFY_EVENTS)
            )
    if config.dashboard.url is not None and not re.match(
        r"^https?://[^/?#@\s]+(?:/[^?#\s]*)?$", config.dashboard.url
    ):
        problems.append("dashboard.url: expected an http(s) URL")
    if not 0 < config.dashboard.port < 65536:
        problems.append(
            f"dashboard.port: expected a port from 1 to 65535, got {config.dashboard.port}"
        )
    for number, cert in enumerate(config.environment.ca_certs):
        if not Path(cert).expanduser().is_absolute():
            problems.append(f"environment.ca_certs[{number}]: expected an absolute path")
    if config.engine not in config.providers:
        problems.append(
            f"providers.{config.engine}: missing; expected a [providers.{config.engine}] table "
            'with login = "..." for the default engine'
        )
    for name, provider in config.providers.items():
        if not provider.login:
            problems.append(f"providers.{name}.login: expected the name of a login, got ''")
        for key in ("input_usd_per_mtok", "output_usd_per_mtok"):
            price = getattr(provider, key)
            if price is not None and not 0 <= price < math.inf:
                problems.append(f"providers.{name}.{key}: expected a price of 0 or more")
        for key in ("base_url", "token_url"):
            value = getattr(provider, key)
            if value is not None and not re.match(r"^https?://[^/?#@\s]+", value):
                problems.append(f"providers.{name}.{key}: expected an http(s) URL")
    for key in ("url", "api_url"):
        if not re.match(r"^https?://[^/?#@\s]+(?:/[^?#\s]*)?$", getattr(config.github, key)):
            problems.append(f"github.{key}: expected an http(s) URL with no user or password")
    if not 0 < config.limits.ask_timeout_s <= 30 * 60:
        problems.append("limits.ask_timeout_s: expected more than 0 and at most 1800 seconds")
    if not 0 < config.limits.stall_timeout_s < math.inf:
        problems.append("limits.stall_timeout_s: expected a number of seconds more than 0")
    if not 0 <= config.limits.long_wait_s < math.inf:
        problems.append("limits.long_wait_s: expected a number of seconds, 0 or more")
    for key in ("clone_minutes", "clone_cost_usd", "clone_turns", "daily_cost_usd"):
        cap = getattr(config.limits, key)
        if cap is not None and not 0 < cap < math.inf:
            problems.append(f"limits.{key}: expected a number more than 0, got {cap}")
    if not 0 < config.limits.cpus <= _MAX_CPUS:
        problems.append(
            f"limits.cpus: expected a number more than 0 and at most {_MAX_CPUS}, "
            f"got {config.limits.cpus}"
        )
    if not _MEMORY.match(config.limits.memory):
        problems.append(
            f"limits.memory: expected a size such as 512m or 4g, got {config.limits.memory!r}"
        )
    for key in ("engine", "launcher", "image"):
        if not getattr(config, key).strip():
            problems.append(f"{key}: expected a name, got ''")
    for key in ("clones", "secrets"):
        value = getattr(config.paths, key)
        if value is None:
            continue
        if not value.strip() or "\0" in value:
            problems.append(f"paths.{key}: expected a path, got {value!r}")
        elif key == "clones" and not _folder_or_nothing(Path(value).expanduser()):
            problems.append(f"paths.clones: {value} is not a folder")
    if config.security.strangers not in STRANGERS:
        problems.append(
            f"security.strangers: expected one of {', '.join(map(repr, STRANGERS))}, got "
            f"{config.security.strangers!r}"
        )
    if config.security.strangers_text not in STRANGERS_TEXT:
        problems.append(
            "security.strangers_text: expected one of "
            f"{', '.join(map(repr, STRANGERS_TEXT))}, got {config.security.strangers_text!r}"
        )
    return problems


def _folder_or_nothing(path: Path) -> bool:
    try:
        return path.is_dir() or not path.exists()
    except OSError:  # a path too long, or that cannot be looked at
        return False


def parse_config(text: str, source: Path) -> Config:
    try:
        data = tomlkit.parse(text).unwrap()
    except tomlkit.exceptions.TOMLKitError as error:  # KeyAlreadyPresent is no ParseError
        raise ConfigError(f"{source}: not valid TOML: {error}") from None
    except (ValueError, OverflowError) as error:  # a time at the edge of the calendar
        raise ConfigError(f"{source}: not valid TOML: {error}") from None
    try:
        config = CONVERTER.structure(data, Config)
    except (ClassValidationError, ForbiddenExtraKeysError) as error:
        problems = _problems(error, "")
        raise ConfigError(f"{source}: {problems[0] if problems else error}") from None
    except Exception as error:  # noqa: BLE001 - any shape of hostile TOML is one line
        raise ConfigError(f"{source}: not a valid config: {error}") from None
    problems = check(config)
    if problems:
        raise ConfigError(f"{source}: {problems[0]}")
    return config


def load_config(paths: Paths | None = None) -> tuple[Config, Paths]:
    """The owner's config and the host paths it settles (its [paths] may move the clones folder
    and the secrets file)."""
    paths = paths or default_paths()
    try:
        text = read_bounded(paths.config_file, MAX_CONFIG_BYTES, plain_folder=False).decode()
    except FileNotFoundError:
        raise NoConfigFile(
            f"{paths.config_file}: no config file; run `shadowclone config init` to create one"
        ) from None
    except MalformedFile as error:
        raise ConfigError(str(error)) from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{paths.config_file}: cannot read: {error}") from None
    config = parse_config(text, paths.config_file)
    return config, paths.with_overrides(config.paths.clones, config.paths.secrets)


class NoConfigFile(ConfigError):
    """There is no config file yet (as opposed to one that does not load)."""


def config_or_defaults(paths: Paths | None = None) -> tuple[Config, Paths, bool]:
    """The owner's config, or the defaults (those of `config init`'s template) when there is no
    config file yet: what a command that only reads can work with. The flag: defaults."""
    paths = paths or default_paths()
    try:
        config, resolved = load_config(paths)
    except NoConfigFile:
        return parse_config(TEMPLATE, paths.config_file), paths, True
    return config, resolved, False


def unstructure(config: Config) -> dict[str, Any]:
    data: dict[str, Any] = _drop_none(CONVERTER.unstructure(config))
    return data


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    return value


TEMPLATE = f"""\
# shadowclone config. The README's "Config" part explains each key.

# Raise the version when you change something that needs `shadowclone setup` again:
# `start` then refuses repositories set up under an older version.
version = 1

# The engine a clone uses unless `shadowclone start --engine` says otherwise.
engine = "claude"
# Where clones run: "docker" for real use, "fake" to run them as local processes.
launcher = "docker"
# The clone image: pulled, or built with `shadowclone image build`.
image = "{DEFAULT_IMAGE}"
# At most this many clones run at once; the others wait in the queue.
parallel_clones = 2
# At most this many clones start in any 24 hours.
daily_clones = 20

[providers.claude]
# The login Claude Code uses: "claude-api-key" or "claude-subscription".
login = "claude-api-key"
# base_url = "https://gateway.example.com"   # an API gateway, if you use one
# model = "claude-sonnet-4-5"

[providers.codex]
# The login Codex uses: "openai-api-key" or "chatgpt-plan" (one clone at a time, private
# repositories only).
login = "openai-api-key"
# Codex reports tokens, not cost: its cost (and cost caps) come from your model's prices.
# input_usd_per_mtok = 1.25
# output_usd_per_mtok = 10.0
# base_url = "https://gateway.example.com/v1"
# token_url = "https://auth.openai.com/oauth/token"   # where a ChatGPT plan renews its token

[github]
url = "https://github.com"
api_url = "https://api.github.com"

[limits]
cpus = 2.0
memory = "4g"
# A clone whose engine shows nothing for this long ends as stalled.
stall_timeout_s = 1200
# A question nobody answers takes its recommended option after this long (at most 1800).
ask_timeout_s = 1800
# A login's usage limit that resets further away than this ends the clone's process until
# the reset (its engine's session kept); a shorter wait is waited out in the clone.
long_wait_s = 300
# Caps: a clone that reaches one pauses and asks you to raise it or to finish (the work is
# then saved as a draft pull request). `start --max-minutes/--max-turns/--max-cost` override.
# clone_minutes = 60
# clone_turns = 20
# clone_cost_usd = 5.0
# serve holds queued clones while those of the last 24 hours have cost this much:
# daily_cost_usd = 20.0

[paths]
# clones = "/somewhere/clones"        # default: the platform's data folder
# secrets = "/somewhere/secrets.toml" # default: beside this file

[plugins]
# Plugins (or distributions) not to load.
disabled = []

[retention]
# serve removes the clones (their run folders and workspaces) that ended this long ago,
# when it starts and every hour: 30d, 2w, 12h. Unset: clones stay until `shadowclone prune`.
# older_than = "30d"

[environment]
# How serve builds the image of a repository that declares its environment
# (.devcontainer/devcontainer.json or .shadowclone/environment.toml) before its first clone.
network = "host"     # the build steps' network; "default" for Docker's own
ca_certs = []        # PEM files of certificate authorities the builds trust

[notify]
# Who serve tells when a clone asks a question, pauses at a cap, waits for a usage limit,
# ends, or cannot be launched: "desktop", "webhook", "ntfy" (each configured below).
use = []
# events = ["question", "paused", "scheduled", "done", "failed", "stopped", "launch-failed"]
# [notify.webhook]
# url = "https://example.com/hook"     # JSON POSTs signed with HMAC-SHA256 (see the README)
# [notify.ntfy]
# url = "https://ntfy.sh/a-topic-only-you-know"   # a question's options become buttons

[dashboard]
# `shadowclone dashboard` serves it; with serve = true, serve does too.
serve = false
host = "127.0.0.1"
port = 8765
# url = "https://my-machine.example.net:8765"   # where your phone reaches it (answer links)
"""


def init_config(paths: Paths, force: bool = False) -> Path:
    if paths.config_file.exists() and not force:
        raise ConfigError(f"{paths.config_file}: already exists; use --force to replace it")
    write_atomic(paths.config_file, TEMPLATE.encode())
    return paths.config_file


def _parse_value(raw: str) -> Any:
    """A value from the command line, read as TOML where it parses (3, true, "x", [..])."""
    try:
        return tomlkit.parse(f"v = {raw}")["v"]
    except tomlkit.exceptions.ParseError:
        return raw


def set_value(
    paths: Paths, key: str, raw: str, check: Callable[[Config], None] | None = None
) -> Config:
    """Change one key, keeping every comment and the order; refuses a result that would not load,
    or that `check` refuses (raising), before anything is written."""
    try:
        data = read_bounded(paths.config_file, MAX_CONFIG_BYTES, plain_folder=False)
        document = tomlkit.parse(data.decode())
    except FileNotFoundError:
        raise ConfigError(
            f"{paths.config_file}: no config file; run `shadowclone config init`"
        ) from None
    except MalformedFile as error:
        raise ConfigError(str(error)) from None
    except (tomlkit.exceptions.TOMLKitError, ValueError) as error:
        raise ConfigError(f"{paths.config_file}: not valid TOML: {error}") from None
    *parents, leaf = key.split(".")
    table: Any = document
    try:
        for part in parents:
            if part not in table:
                table[part] = tomlkit.table()
            table = table[part]
            if not isinstance(table, dict):
                raise ConfigError(f"{paths.config_file}: {key}: {part} is not a table")
        table[leaf] = _parse_value(raw)
        text = tomlkit.dumps(document)
    except (tomlkit.exceptions.TOMLKitError, ValueError) as error:
        raise ConfigError(f"{paths.config_file}: {key}: cannot set it: {error}") from None
    config = parse_config(text, paths.config_file)
    if check is not None:
        check(config)
    write_atomic(paths.config_file, text.encode())
    return config
