"""The secrets template as an owner reads it: every comment wrapped to the width of a
terminal, and the ChatGPT plan's login taken from a CODEX_HOME of shadowclone's own, as the
README says, never from the owner's own Codex."""

from __future__ import annotations

import tomllib

from shadowclone.plugin import load_registry
from shadowclone.setup.secrets_file import template


def test_the_template_says_what_the_readme_says_and_fits_a_terminal() -> None:
    registry = load_registry()
    text = template(registry.secret_providers())
    assert all(value == "" for value in tomllib.loads(text).values())
    assert all(len(line) <= 100 for line in text.splitlines())
    flat = " ".join(line.removeprefix("# ") for line in text.splitlines())
    assert "run `CODEX_HOME=$(mktemp -d) codex login`, then paste $CODEX_HOME/auth.json" in flat
    assert "not ~/.codex/auth.json" in flat
