"""`shadowclone serve` killed with SIGKILL at moments hypothesis picks, while clones
run and messages arrive, and started again. Every clone must end recorded, none may run twice,
and every inbox line must reach its clone exactly once."""

from __future__ import annotations

import signal
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ProgressKind, State
from shadowclone.plugin.node import local_node
from shadowclone_fake_launch.launcher import FakeLauncher, default_state_dir
from shadowclone_testing.serving import (
    ServeProcess,
    make_serve_home,
    remove_all,
    starts,
    wait_state,
)

CLONES = 3
PARALLEL = 2

# Each kill: seconds to let serve run first, then how many messages to send just before it.
KILLS = st.lists(
    st.tuples(st.floats(min_value=0.0, max_value=1.0), st.integers(min_value=0, max_value=4)),
    min_size=1,
    max_size=3,
)


@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
@given(kills=KILLS, messages_while_down=st.integers(min_value=0, max_value=2))
def test_serve_killed_at_any_moment_loses_nothing_and_doubles_nothing(
    kills: list[tuple[float, int]], messages_while_down: int
) -> None:
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        paths, env = make_serve_home(root, PARALLEL)
        node = local_node(paths)
        ids = [node.start(f"acme/app#{n}").id for n in range(1, CLONES + 1)]
        launcher = FakeLauncher(default_state_dir(env))
        sent = 0

        def send(count: int) -> None:
            nonlocal sent
            for _ in range(count):
                clone_id = ids[sent % CLONES]
                node.send(clone_id, f"message {sent}")
                sent += 1

        process = ServeProcess.start(paths, "--stop-grace", "5", env=env)
        try:
            for delay, messages in kills:
                process.wait_serving()
                time.sleep(delay)
                send(messages)
                assert process.end(signal.SIGKILL) == -signal.SIGKILL
                send(messages_while_down)
                process = ServeProcess.start(paths, "--stop-grace", "5", env=env)
            process.wait_serving()
            for clone_id in ids:
                node.send(clone_id, "bye")
            records = [wait_state(paths, clone_id, State.DONE, State.FAILED) for clone_id in ids]
        finally:
            process.end()
            leftover = launcher.running()
            remove_all(launcher)

        assert [r.state for r in records] == [State.DONE] * CLONES, process.output
        assert sorted(starts(root / "starts.jsonl")) == sorted(ids), "a clone ran twice"
        assert leftover == [], "a clone was left with its launcher"
        assert not any(paths.active_dir.iterdir())
        for clone_id in ids:
            folder = RunFolder(paths.clones_dir / clone_id)
            inbox, _, _ = folder.inbox()
            delivered, _, _ = folder.deliveries()
            assert [line.id for line in delivered] == [line.id for line in inbox]
            progress, _, _ = folder.progress()
            echoed = [line.text for line in progress if line.kind is ProgressKind.MESSAGE]
            assert echoed == [line.text for line in inbox]
