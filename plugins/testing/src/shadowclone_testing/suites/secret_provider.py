"""The secret provider contract: tests every secret provider passes.

A secret provider's tests subclass `SecretProviderContract` and say which registration to
check:

    class TestMyLogin(SecretProviderContract):
        def make_registration(self): ...

The rules are those of the secrets file the core writes for the provider (its template, on
the host) and reads for it (inside the clone, where each value reaches the engine).
"""

from __future__ import annotations

import abc
import ipaddress
import re
import string
import tempfile
import tomllib
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shadowclone.plugin import SecretProviderRegistration
from shadowclone.plugin.types import NAME_PATTERN
from shadowclone.proxy.secrets import Secrets
from shadowclone.setup.secrets_file import create_template

SHARED = [HealthCheck.differing_executors]
"""One suite runs for many plugins, each subclass an executor of its own."""

KEY_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")
"""A bare TOML key, as the template writes it unquoted."""
ENV_PATTERN = re.compile(r"^[A-Z_][A-Z0-9_]*$")

VALUES = st.text(
    st.sampled_from(string.ascii_letters + string.digits + '-_.+/=:{}" ,'), min_size=1
).filter(lambda value: value.strip() != "" and "'''" not in value)
"""What an owner pastes: a token, or a JSON login between triple quotes."""


def is_allowed_url(url: str) -> bool:
    """https with a host and no user; plain http only to this machine."""
    parts = urlsplit(url)
    if not parts.hostname or parts.username or parts.password:
        return False
    if parts.scheme == "https":
        return True
    if parts.scheme != "http":
        return False
    if parts.hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return False


def _toml_string(value: str, multiline: bool) -> str:
    if multiline:
        return f"'''{value}'''"
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class SecretProviderContract(abc.ABC):
    """What the setup, admission and the run program rely on from any secret provider."""

    # ------------------------------------------------------------------ what a plugin provides

    @abc.abstractmethod
    def make_registration(self) -> SecretProviderRegistration:
        """The provider's registration, as its plugin's hook yields it."""

    # ------------------------------------------------------------------ the contract

    def test_the_registration_is_valid(self) -> None:
        registration = self.make_registration()
        assert isinstance(registration, SecretProviderRegistration)
        assert NAME_PATTERN.match(registration.name)
        assert registration.summary.strip() and "\n" not in registration.summary
        if registration.engine is not None:
            assert NAME_PATTERN.match(registration.engine), "engine names an engine"

    def test_its_secrets_have_distinct_keys_and_one_line_descriptions(self) -> None:
        secrets = self.make_registration().secrets
        assert secrets, "a provider names at least one key of the secrets file"
        keys = [secret.key for secret in secrets]
        assert len(set(keys)) == len(keys), f"keys repeat: {keys}"
        for secret in secrets:
            assert KEY_PATTERN.match(secret.key), f"{secret.key!r} is not a bare TOML key"
            described = secret.description
            assert described.strip() and "\n" not in described, (
                f"{secret.key}: the description is the template's one comment line"
            )

    def test_each_secret_reaches_the_engine_by_a_variable_or_a_file_in_its_state(self) -> None:
        for secret in self.make_registration().secrets:
            assert secret.env or secret.file, f"{secret.key} reaches the engine in no way"
            if secret.env:
                assert ENV_PATTERN.match(secret.env), f"{secret.env!r} is no variable name"
                assert not secret.env.startswith("SHADOWCLONE_"), "the run program's own"
            if secret.file:
                path = PurePosixPath(secret.file)
                assert not path.is_absolute() and ".." not in path.parts, (
                    f"{secret.file!r} leaves the engine's state folder"
                )
                assert str(path) not in (".", ""), "a file secret names a file"

    def test_its_urls_are_https_or_this_machine(self) -> None:
        registration = self.make_registration()
        for url in (registration.base_url, registration.token_url):
            if url is not None:
                assert is_allowed_url(url), f"{url!r} is neither https nor loopback http"

    def test_the_template_is_toml_with_each_key_under_its_description(self, tmp_path: Path) -> None:
        registration = self.make_registration()
        path = tmp_path / "secrets.toml"
        assert create_template(path, [registration])
        assert path.stat().st_mode & 0o077 == 0, "the template is private from the start"
        text = path.read_text(encoding="utf-8")
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise AssertionError(f"the template is not valid TOML: {error}") from None
        lines = text.splitlines()
        for secret in registration.secrets:
            assert data.get(secret.key) == "", f"{secret.key} is in the template, empty"
            where = next(i for i, line in enumerate(lines) if line.startswith(f"{secret.key} ="))
            first = where
            while first > 0 and lines[first - 1].startswith("# "):
                first -= 1
            comment = " ".join(line[2:] for line in lines[first:where])
            assert comment.startswith(" ".join(secret.description.split())), (
                f"{secret.key}: its description is not the comment above it"
            )
            assert all(len(line) <= 100 for line in lines[first:where]), "a comment too wide"

    @settings(max_examples=25, deadline=None, suppress_health_check=SHARED)
    @given(data=st.data())
    def test_pasted_values_reach_the_engine_as_they_were_pasted(self, data: st.DataObject) -> None:
        registration = self.make_registration()
        values = {
            secret.key: data.draw(VALUES, label=secret.key) for secret in registration.secrets
        }
        with tempfile.TemporaryDirectory() as folder:
            path, state = Path(folder) / "secrets.toml", Path(folder) / "state"
            create_template(path, [registration])
            text = path.read_text(encoding="utf-8")
            for secret in registration.secrets:
                empty = "''''''" if secret.file else '""'
                pasted = _toml_string(values[secret.key], multiline=bool(secret.file))
                text = text.replace(f"{secret.key} = {empty}", f"{secret.key} = {pasted}", 1)
            path.write_text(text, encoding="utf-8")
            env = Secrets.read(path).engine_env(registration, state)
            for secret in registration.secrets:
                value = values[secret.key].strip()
                if secret.env:
                    assert env[secret.env] == value
                if secret.file:
                    written = state / secret.file
                    assert written.read_text(encoding="utf-8") == value
                    assert written.stat().st_mode & 0o077 == 0, f"{secret.file} is not private"
