"""Every built-in secret provider keeps the secret provider contract of the testing kit.

One test class per provider the built-in plugins register, so that a new built-in login is held
to the contract without a line here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from shadowclone.plugin import Family, Secret, SecretProviderRegistration
from shadowclone.plugin.manager import load_registry
from shadowclone_testing.suites.secret_provider import SecretProviderContract

REGISTRY = load_registry(entry_points=())
NAMES = REGISTRY.names(Family.SECRET_PROVIDER)


class BuiltinProvider(SecretProviderContract):
    provider_name = ""

    def make_registration(self) -> SecretProviderRegistration:
        return REGISTRY.secret_provider(self.provider_name)


def _title(name: str) -> str:
    return "TestSecretProvider_" + name.replace("-", "_")


for _name in NAMES:
    globals()[_title(_name)] = type(
        _title(_name), (BuiltinProvider,), {"provider_name": _name, "__qualname__": _title(_name)}
    )


def test_the_built_in_providers_are_all_held_to_the_contract() -> None:
    assert {"claude-api-key", "chatgpt-plan", "github-token"} <= set(NAMES)
    assert all(_title(name) in globals() for name in NAMES)


class Broken(SecretProviderContract):
    """A provider that breaks the contract in several ways at once."""

    def make_registration(self) -> SecretProviderRegistration:
        return SecretProviderRegistration(
            name="broken",
            summary="breaks",
            base_url="http://models.example.com/v1",
            secrets=(
                Secret(key="token", description="a token\nover two lines", env="TOKEN"),
                Secret(key="token", description="again", file="../outside.json"),
                Secret(key="Not-Bare", description="nowhere"),
            ),
        )


@pytest.mark.parametrize(
    "test",
    [
        "test_its_secrets_have_distinct_keys_and_one_line_descriptions",
        "test_each_secret_reaches_the_engine_by_a_variable_or_a_file_in_its_state",
        "test_its_urls_are_https_or_this_machine",
    ],
)
def test_the_suite_catches_a_provider_that_breaks_the_contract(test: str) -> None:
    with pytest.raises(AssertionError):
        getattr(Broken(), test)()


def test_the_suite_catches_a_description_the_template_cannot_hold(tmp_path: Path) -> None:
    with pytest.raises(AssertionError):
        Broken().test_the_template_is_toml_with_each_key_under_its_description(tmp_path)
