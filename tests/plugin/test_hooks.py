"""Each hookspec, as the installed plugins answer it; and the meta-tests: every hookspec has a
test here and a section in docs/plugins.md."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from shadowclone.errors import BadInput, PluginUnavailable
from shadowclone.plugin import Family, NotifierContext, load_registry, make_plugin_manager, spec

ROOT = Path(__file__).parents[2]
HOOKSPECS = sorted(
    name for name, value in inspect.getmembers(spec) if name.startswith("shadowclone_")
)


def test_shadowclone_engines() -> None:
    registry = load_registry()
    assert "scripted" in registry.names(Family.ENGINE)
    scripted = registry.engine("scripted")
    assert scripted.logins == ("no-login",)
    for name in registry.names(Family.ENGINE):
        for login in registry.engine(name).logins:
            assert registry.secret_provider(login).engine == name


def test_shadowclone_launchers() -> None:
    registry = load_registry()
    assert {"docker", "fake"} <= set(registry.names(Family.LAUNCHER))
    assert registry.launcher("docker").summary.startswith("runs each clone in a Docker")


def test_shadowclone_review_stages() -> None:
    stages = load_registry().review_stages()
    assert [s.name for s in stages][:1] == ["toolchain"]
    assert stages[0].runs_code


def test_shadowclone_secret_providers() -> None:
    registry = load_registry()
    providers = {p.name: p for p in registry.secret_providers()}
    assert {
        "claude-api-key",
        "claude-subscription",
        "openai-api-key",
        "chatgpt-plan",
        "github-token",
    } <= set(providers)
    plan = providers["chatgpt-plan"]
    assert plan.one_at_a_time and plan.private_repos_only and plan.engine == "codex"
    assert plan.secrets[0].file == "auth.json"
    assert providers["github-token"].engine is None
    keys = [s.key for p in providers.values() for s in p.secrets]
    assert len(keys) == len(set(keys)), "two providers share a secrets-file key"


def test_shadowclone_notifiers(tmp_path: Path) -> None:
    registry = load_registry()
    assert {"desktop", "webhook", "ntfy"} <= set(registry.names(Family.NOTIFIER))
    context = NotifierContext(options={"url": "ftp://example.com"}, folder=tmp_path)
    with pytest.raises(BadInput, match=r"notify\.webhook\.url: expected an http\(s\) URL"):
        registry.notifier("webhook").factory(context)
    ntfy = registry.notifier("ntfy").factory(
        NotifierContext(options={"url": "https://ntfy.example.com/base/topic"}, folder=tmp_path)
    )
    assert (ntfy.server, ntfy.topic) == ("https://ntfy.example.com/base/", "topic")  # type: ignore[attr-defined]


def test_disabled_plugins_are_listed_as_disabled() -> None:
    registry = load_registry(disabled=["shadowclone-docker-launch"])
    docker = next(p for p in registry.plugins if p.name == "docker")
    assert (docker.status, docker.reason) == ("disabled", "disabled in config")
    with pytest.raises(PluginUnavailable, match="no launcher named 'docker'"):
        registry.launcher("docker")


def test_each_call_builds_a_fresh_manager() -> None:
    assert make_plugin_manager() is not make_plugin_manager()
    assert load_registry() is not load_registry()


def test_every_hookspec_has_a_test() -> None:
    tested = {
        name
        for path in (ROOT / "tests").rglob("test_*.py")
        for name in re.findall(r"def test_(shadowclone_\w+)\(", path.read_text())
    }
    assert HOOKSPECS and set(HOOKSPECS) <= tested, set(HOOKSPECS) - tested


def test_every_hookspec_is_documented() -> None:
    guide = (ROOT / "docs" / "plugins.md").read_text()
    headings = set(re.findall(r"^#+ `(shadowclone_\w+)`", guide, re.MULTILINE))
    assert set(HOOKSPECS) <= headings, set(HOOKSPECS) - headings
    for name in HOOKSPECS:
        assert getattr(spec, name).__doc__, f"{name} has no docstring"
