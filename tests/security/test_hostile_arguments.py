"""Every argument of the CLI, generated: targets (short names, URLs on any host, with users,
ports and look-alike hosts), engine names, clone and question ids, choices, messages, counts,
config keys and values, repositories. Each command ends in its output or in one line and exit
code 1 or 2 (a usage error: 2), never a traceback; no target on another host than
the configured GitHub is ever queued; the config stays loadable.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shadowclone.config import Paths, load_config
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.target import Target
from shadowclone.plugin.node import local_node
from shadowclone_testing.harness import set_up
from shadowclone_testing.hostile import fill_run_folder, home_env, run_cli

EXAMPLES = int(os.environ.get("SHADOWCLONE_FUZZ_EXAMPLES", "150"))
HOSTS = (
    "github.com",
    "GitHub.com",
    "gitlab.com",
    "evil.example",
    "github.com.evil.example",
    "evil.example/github.com",
    "user:pass@evil.example",
    "user:pass@github.com",
    "github.com@evil.example",
    "github.com:443",
    "github.com:99999",
    "[::1]",
    "",
)
words = st.text(max_size=40)
names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,12}", fullmatch=True)
urls = st.builds(
    lambda scheme, host, owner, repo, kind, number, tail: (
        f"{scheme}://{host}/{owner}/{repo}/{kind}/{number}{tail}"
    ),
    st.sampled_from(("https", "http", "ftp", "HTTPS", "javascript")),
    st.sampled_from(HOSTS),
    names,
    names,
    st.sampled_from(("issues", "pull", "pulls", "commits", "")),
    st.integers(min_value=-2, max_value=10**12),
    st.sampled_from(("", "/", "?q=1", "#x", "/../..")),
)
targets = st.one_of(
    urls,
    st.builds(lambda o, r, n: f"{o}/{r}#{n}", names, names, st.integers(-5, 10**11)),
    words,
)
numbers = st.one_of(st.integers(-(10**20), 10**20).map(str), words)
config_keys = st.sampled_from(
    (
        "limits.cpus",
        "limits.memory",
        "limits.ask_timeout_s",
        "limits.stall_timeout_s",
        "engine",
        "launcher",
        "image",
        "parallel_clones",
        "daily_clones",
        "github.url",
        "paths.clones",
        "security.strangers",
        "plugins.disabled",
        "a..b",
        "",
        "providers.claude.login",
    )
)
config_values = st.one_of(
    st.sampled_from(
        ("-2", "0", "nan", "inf", "-inf", '"-4g"', '"lots"', '""', '"4g"', "2.5", "[1]", "{a=1}")
    ),
    st.sampled_from(("9999-12-31T23:59:59-14:00", "1979-05-27", '"https://x@evil"', "true")),
    words,
)


def commands(a: str) -> st.SearchStrategy[tuple[str, ...]]:
    """Any command with generated arguments; `a` is a real clone's id (with a question)."""
    ids = st.one_of(st.just(a), st.just(a[:8]), words, st.just("991399-256199-abcd"))
    return st.one_of(
        st.tuples(st.just("start"), targets),
        st.tuples(st.just("start"), targets, st.just("--engine"), words),
        st.tuples(st.just("start"), targets, st.just("-m"), words),
        st.tuples(st.just("get"), ids),
        st.tuples(st.just("get"), ids, st.just("-n"), numbers),
        st.tuples(st.just("get"), ids, st.just("--json")),
        st.tuples(st.just("list"), st.just("--limit"), numbers),
        st.tuples(st.just("send"), ids, words),
        st.tuples(st.just("answer"), ids, st.one_of(st.just("q1"), words), words),
        st.tuples(st.just("stop"), ids),
        st.tuples(st.just("config"), st.just("set"), config_keys, config_values),
        st.tuples(st.just("config"), st.just("show")),
        st.lists(words, max_size=4).map(tuple),
    )


@pytest.fixture
def arguments_home(sc_home: Paths) -> tuple[Path, str]:
    set_up(sc_home)
    node = local_node(sc_home)
    a = node.start("acme/app#1").id
    fill_run_folder(RunFolder(sc_home.clones_dir / a), a)
    return sc_home.config_file.parent, a


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_arguments_give_output_or_one_line(
    arguments_home: tuple[Path, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    data: st.DataObject,
) -> None:
    root, a = arguments_home
    work = tmp_path / "args"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(root, work, symlinks=True)
    args = data.draw(commands(a))
    if any("\0" in arg for arg in args):
        return  # no process gets a NUL in its arguments
    with home_env(work) as paths:
        result = run_cli(capsys, *args)
        said = f"shadowclone {args!r} -> {result.code}\n{result.out}\n{result.err}"
        assert result.code in (0, 1, 2), said
        assert "Traceback" not in result.out + result.err, said
        if result.code != 0 and args:  # no arguments at all: click shows the help
            lines = result.err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("shadowclone"), said
        load_config(paths)  # whatever was set, the config still loads
        if args[:1] == ("start",) and result.code == 0:
            view = json.loads(run_cli(capsys, "get", a, "--json").out or "{}")
            assert view, said
            started = Target.parse(args[1], "https://github.com")  # raises if not on github.com
            assert started.owner and started.repo, said
