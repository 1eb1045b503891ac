"""serve follows the config file as it changes: a real `serve` process applies a daily cost cap
lowered and raised, and `parallel_clones` changed, without a restart, while `get` and `status`
say what serve does; a config that no longer loads leaves the last good one in force, said by
serve's log, `status` and every refused command; and whatever valid and broken configs are
written, serve applies the last valid one."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shadowclone.config import Paths, parse_config, set_value
from shadowclone.errors import ConfigError
from shadowclone.node.schemas import State
from shadowclone.plugin.node import local_node
from shadowclone.serve.following import served_config
from shadowclone_fake_launch.launcher import FakeLauncher
from shadowclone_fake_launch.scripts import Play, Script, ScriptsFile, write_scripts
from shadowclone_testing.harness import CliResult, set_up
from shadowclone_testing.serving import (
    FAST,
    Scripts,
    ServeProcess,
    ServeThread,
    make_serve_home,
    state_of,
    wait_state,
    wait_until,
)

APPLIED_WITHIN_S = 5.0
"""A change of the config file takes effect within this (serve takes it up in milliseconds)."""
HELD_S = 1.0
"""How long a clone is watched to stay queued: serve sees a request in tens of milliseconds."""


def stays_queued(home: Paths, clone_id: str, scripts: Scripts) -> None:
    deadline = time.monotonic() + HELD_S
    while time.monotonic() < deadline:
        assert state_of(home, clone_id) in (None, State.QUEUED)  # None: not yet recorded
        assert clone_id not in scripts.starts()
        time.sleep(0.05)


def running_within(home: Paths, clone_id: str) -> None:
    wait_until(
        lambda: state_of(home, clone_id) is State.RUNNING,
        f"clone {clone_id} to run",
        APPLIED_WITHIN_S,
    )


def waits_for(home: Paths, clone_id: str) -> str:
    return local_node(home).get(clone_id).waiting_for


@contextlib.contextmanager
def serve_process(home: Paths) -> Iterator[ServeProcess]:
    process = ServeProcess.start(home, "--stop-grace", "2")
    try:
        process.wait_serving()
        yield process
    finally:
        assert process.end() == 0, process.output


def test_a_cap_and_parallel_clones_changed_while_serve_runs_take_effect_at_once(
    sc_home: Paths, sc_scripts: Scripts, sc_cli: Callable[..., CliResult]
) -> None:
    set_up(sc_home)
    set_value(sc_home, "parallel_clones", "1")
    sc_scripts.set("acme/app#1", Script(play=Play.FINISH, steps=1, delay_s=0.01, cost_usd=0.5))
    sc_scripts.default = Script(play=Play.HANG)
    sc_scripts.save()
    with serve_process(sc_home):
        spent = local_node(sc_home).start("acme/app#1").id
        wait_state(sc_home, spent, State.DONE)

        # Lowered while serve runs: the next clone waits, as start and status say.
        assert sc_cli("config", "set", "limits.daily_cost_usd", "0.01").code == 0
        held = sc_cli("start", "acme/app#2")
        assert held.code == 0, held.err
        assert "waiting for the daily cost cap" in held.out
        capped = local_node(sc_home).list().clones[0].id
        stays_queued(sc_home, capped, sc_scripts)
        assert waits_for(sc_home, capped).startswith("the daily cost cap")
        status = sc_cli("status")
        assert "queued clones wait" in status.out
        assert f"{capped} waits for the daily cost cap" in status.out

        # Raised: it runs, with no restart.
        assert sc_cli("config", "set", "limits.daily_cost_usd", "5").code == 0
        running_within(sc_home, capped)

        # One slot, taken: the next waits for it until parallel_clones grows.
        second = local_node(sc_home).start("acme/app#3").id
        stays_queued(sc_home, second, sc_scripts)
        assert waits_for(sc_home, second).startswith("a slot")
        assert sc_cli("config", "set", "parallel_clones", "2").code == 0
        running_within(sc_home, second)

        # Fewer again: a third waits while two run.
        assert sc_cli("config", "set", "parallel_clones", "1").code == 0
        third = local_node(sc_home).start("acme/app#4").id
        stays_queued(sc_home, third, sc_scripts)
        assert waits_for(sc_home, third).startswith("a slot: 2 clones running, parallel_clones = 1")
        for clone_id in (capped, second, third):
            assert sc_cli("stop", clone_id).code == 0
        for clone_id in (capped, second, third):
            wait_state(sc_home, clone_id, State.STOPPED)
        log = sc_home.serve_log.read_text(encoding="utf-8")
        assert "config: applied" in log and "limits.daily_cost_usd None -> 0.01" in log


def test_a_broken_config_leaves_the_last_good_one_in_force_and_says_so(
    sc_home: Paths, sc_scripts: Scripts, sc_cli: Callable[..., CliResult]
) -> None:
    set_up(sc_home)
    set_value(sc_home, "parallel_clones", "1")
    sc_scripts.default = Script(play=Play.HANG)
    sc_scripts.save()
    with serve_process(sc_home):
        first = local_node(sc_home).start("acme/app#1").id
        wait_state(sc_home, first, State.RUNNING)
        second = local_node(sc_home).start("acme/app#2").id
        good = sc_home.config_file.read_text(encoding="utf-8")
        # Two slots, but a value that does not load with them: none of it is applied.
        broken = good.replace("parallel_clones = 1", "parallel_clones = 2").replace(
            "daily_clones = 1000", "daily_clones = 'many'"
        )
        assert "daily_clones = 'many'" in broken
        sc_home.config_file.write_text(broken, encoding="utf-8")
        problem = f"{sc_home.config_file}: daily_clones: expected an integer, got 'many'"

        def said_in_log() -> bool:
            return problem in sc_home.serve_log.read_text(encoding="utf-8")

        wait_until(said_in_log, "serve's log to name the broken config", APPLIED_WITHIN_S)
        line = next(x for x in sc_home.serve_log.read_text().splitlines() if problem in x)
        assert "serve keeps the last good config" in line and "in force" in line
        stays_queued(sc_home, second, sc_scripts)

        status = sc_cli("status")
        assert status.code == 1
        (config_line,) = [x for x in status.out.splitlines() if problem in x]
        assert config_line.startswith("FAIL config")
        assert "keeps the last good config" in config_line
        # The rest is what serve applies: the last good config's one slot.
        assert "parallel_clones = 1" in status.out
        assert f"{second} waits for a slot: 1 clones running, parallel_clones = 1" in status.out
        refused = sc_cli("get", second)
        assert refused.code == 2
        assert problem in refused.err and "keeps the last good config" in refused.err

        sc_home.config_file.write_text(good.replace("parallel_clones = 1", "parallel_clones = 2"))
        running_within(sc_home, second)
        assert sc_cli("status").out.count("FAIL config") == 0
        for clone_id in (first, second):
            assert sc_cli("stop", clone_id).code == 0
            wait_state(sc_home, clone_id, State.STOPPED)


@attrs.frozen
class Write:
    parallel: int
    cap_cents: int | None
    broken: str | None
    """None: a valid config; else the line that breaks it."""
    in_place: bool
    """Truncated and written over, as some editors do, rather than replaced."""


BREAKAGES = ("parallel_clones = 'lots'", "[limits", "daily_clones = 0", "spares = -1")
WRITES = st.builds(
    Write,
    st.integers(min_value=1, max_value=4),
    st.none() | st.integers(min_value=1, max_value=900),
    st.none() | st.sampled_from(BREAKAGES),
    st.booleans(),
)


def config_text(base: str, write: Write) -> str:
    text = base.replace("parallel_clones = 1\n", f"parallel_clones = {write.parallel}\n")
    if write.cap_cents is not None:
        text = text.replace("[limits]\n", f"[limits]\ndaily_cost_usd = {write.cap_cents / 100}\n")
    if write.broken is not None:
        key = write.broken.split(" = ")[0]
        kept = [line for line in text.splitlines() if not line.startswith(f"{key} = ")]
        text = "\n".join([write.broken, *kept]) + "\n"
    return text


def problem_of(home: Paths, text: str) -> str:
    """What serve says of `text` ("" if it loads)."""
    try:
        parse_config(text, home.config_file)
    except ConfigError as error:
        return str(error)
    return ""


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writes=st.lists(WRITES, min_size=1, max_size=6))
def test_whatever_configs_are_written_serve_applies_the_last_valid_one(
    writes: list[Write],
) -> None:
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        home, _ = make_serve_home(root, parallel=1)
        base = home.config_file.read_text(encoding="utf-8")
        scripts = root / "scripts.json"
        write_scripts(scripts, ScriptsFile(default=Script(play=Play.HANG)))
        serve = ServeThread(local_node(home), FAST, FakeLauncher(root / "fake-launch", scripts))
        serve.start()
        try:
            valid = base  # serve was given the file's config
            for write in writes:
                text = config_text(base, write)
                problem = problem_of(home, text)
                assert bool(problem) == (write.broken is not None), problem
                if write.in_place:
                    with open(home.config_file, "w", encoding="utf-8") as handle:
                        handle.write(text)
                else:
                    fresh = home.config_file.with_name("config.new")
                    fresh.write_text(text, encoding="utf-8")
                    os.replace(fresh, home.config_file)
                valid = text if not problem else valid

                def taken_up(valid: str = valid, problem: str = problem) -> bool:
                    served = served_config(home)
                    return served is not None and (served.text, served.error) == (valid, problem)

                wait_until(taken_up, "serve to take the write up", APPLIED_WITHIN_S)
            served = served_config(home)
            assert served is not None and served.text == valid
            last = next((w for w in reversed(writes) if w.broken is None), None)
            applied = parse_config(valid, home.config_file)
            assert applied.parallel_clones == (last.parallel if last else 1)
        finally:
            serve.stop()
