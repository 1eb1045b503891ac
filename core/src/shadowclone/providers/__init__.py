"""The built-in secret providers: the model logins and the GitHub token.

Each names the key the owner pastes into the secrets file, how the value reaches the engine
inside the clone, and its limits. The host never reads the values; only the run program inside
the clone does.
"""

from __future__ import annotations

from collections.abc import Iterator

from shadowclone.plugin import hookimpl
from shadowclone.plugin.types import Secret, SecretProviderRegistration

GITHUB_TOKEN = "github-token"


@hookimpl
def shadowclone_secret_providers() -> Iterator[SecretProviderRegistration]:
    yield SecretProviderRegistration(
        name="claude-api-key",
        summary="Anthropic API key for Claude Code",
        engine="claude",
        secrets=(
            Secret(
                key="anthropic_api_key",
                description="Anthropic API key (console.anthropic.com, Settings > API keys)",
                env="ANTHROPIC_API_KEY",
            ),
        ),
    )
    yield SecretProviderRegistration(
        name="claude-subscription",
        summary="Claude subscription token for Claude Code (claude setup-token)",
        engine="claude",
        secrets=(
            Secret(
                key="claude_code_oauth_token",
                description="Claude subscription token: run `claude setup-token` and paste it",
                env="CLAUDE_CODE_OAUTH_TOKEN",
            ),
        ),
    )
    yield SecretProviderRegistration(
        name="openai-api-key",
        summary="OpenAI API key for Codex",
        engine="codex",
        secrets=(
            Secret(
                key="openai_api_key",
                description="OpenAI API key (platform.openai.com, API keys)",
                env="OPENAI_API_KEY",
            ),
        ),
    )
    yield SecretProviderRegistration(
        name="chatgpt-plan",
        summary="ChatGPT plan login for Codex: one clone at a time, private repositories only",
        engine="codex",
        one_at_a_time=True,
        private_repos_only=True,
        base_url="https://chatgpt.com/backend-api/codex",
        token_url="https://auth.openai.com/oauth/token",
        secrets=(
            Secret(
                key="codex_auth_json",
                description="the whole auth.json of a login of shadowclone's own: run "
                "`CODEX_HOME=$(mktemp -d) codex login`, then paste $CODEX_HOME/auth.json between "
                "triple quotes (not ~/.codex/auth.json: your own Codex would spend its refresh "
                "token)",
                file="auth.json",
            ),
        ),
    )
    yield SecretProviderRegistration(
        name=GITHUB_TOKEN,
        summary="GitHub token the clone works with, as the owner",
        secrets=(
            Secret(
                key="github_token",
                description="GitHub token with repo access (github.com/settings/tokens)",
                env="GH_TOKEN",
            ),
        ),
    )
