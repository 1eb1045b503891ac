"""The secrets file, read inside the clone only: the host never opens it.

The run program reads it once, gives the engine the values its login needs (as variables or
as files in the engine's private state folder), keeps the GitHub token for its own git and API
calls, and masks every value in everything it writes.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import attrs

from shadowclone import contract
from shadowclone.errors import ShadowcloneError
from shadowclone.plugin.types import SecretProviderRegistration
from shadowclone.redact import Redactor, login_values

GITHUB_TOKEN_KEY = contract.GITHUB_TOKEN_KEY


class SecretsError(ShadowcloneError):
    """The secrets file is missing, unreadable, or lacks a value a login needs."""


@attrs.frozen
class Secrets:
    path: Path
    values: dict[str, str]
    redactor: Redactor = attrs.field(init=False, eq=False, repr=False)
    """One for the whole clone: what it learns (a rotated token) every writer then hides."""

    @redactor.default
    def _redactor(self) -> Redactor:
        return Redactor(self.all_values())

    @classmethod
    def read(cls, path: Path) -> Secrets:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise SecretsError(f"{path}: no secrets file is mounted in this clone") from None
        except (OSError, UnicodeDecodeError) as error:
            raise SecretsError(f"{path}: cannot read the secrets file: {error}") from None
        except tomllib.TOMLDecodeError as error:
            raise SecretsError(f"{path}: not valid TOML: {error}") from None
        values = {k: v.strip() for k, v in data.items() if isinstance(v, str) and v.strip()}
        return cls(path, values)

    def all_values(self) -> list[str]:
        """Every value to redact: each value, and each string inside a value that is a JSON
        login (a refresh token inside a pasted `auth.json` must be hidden on its own too)."""
        return [leaf for value in self.values.values() for leaf in login_values(value)]

    def require(self, key: str, why: str) -> str:
        value = self.values.get(key)
        if not value:
            raise SecretsError(f"{self.path}: no value for {key} ({why}); paste it there")
        return value

    @property
    def github_token(self) -> str:
        return self.require(GITHUB_TOKEN_KEY, "the GitHub token every clone needs")

    def engine_env(self, login: SecretProviderRegistration, state_dir: Path) -> dict[str, str]:
        """The variables the engine gets for its login; file secrets are written into
        `state_dir` (mode 0600) and are not variables."""
        env: dict[str, str] = {}
        for secret in login.secrets:
            value = self.require(secret.key, f"the {login.name} login")
            if secret.env:
                env[secret.env] = value
            if secret.file:
                target = state_dir / secret.file
                target.parent.mkdir(parents=True, exist_ok=True)
                descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                    handle.write(value)
        return env
