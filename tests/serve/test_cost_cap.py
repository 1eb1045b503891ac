"""`[limits] daily_cost_usd` under owners starting clones at the same time: serve launches a
queued clone only while the clones of the last 24 hours have cost less than the cap, so
however the starts interleave, exactly the clones that fit under the cap run (one at a time,
each costing what its engine reports), and the rest wait with the reason said."""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from pathlib import Path

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st
from shadowclone.config import set_value
from shadowclone.errors import Refused
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import State
from shadowclone.plugin.node import local_node
from shadowclone_fake_launch.launcher import FakeLauncher
from shadowclone_fake_launch.scripts import Play, Script, ScriptsFile, write_scripts
from shadowclone_testing.serving import FAST, ServeThread, make_serve_home, starts, wait_until

CENTS = st.integers(min_value=10, max_value=300)


def expected_launches(cost: float, cap: float, owners: int) -> int:
    """Clones launched one after another while what they spent (summed as serve sums it) is
    under the cap."""
    spent, launched = 0.0, 0
    while launched < owners and spent < cap:
        spent += cost
        launched += 1
    return launched


@settings(max_examples=8, deadline=None)
@given(cost_cents=CENTS, cap_cents=CENTS, owners=st.integers(min_value=2, max_value=6))
def test_concurrent_starts_run_exactly_the_clones_the_daily_cost_cap_allows(
    cost_cents: int, cap_cents: int, owners: int
) -> None:
    cost, cap = cost_cents / 100, cap_cents / 100
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        paths, _ = make_serve_home(root, parallel=1)
        set_value(paths, "limits.daily_cost_usd", str(cap))
        scripts = root / "scripts.json"
        write_scripts(
            scripts,
            ScriptsFile(
                default=Script(play=Play.FINISH, steps=1, delay_s=0.01, cost_usd=cost),
                start_log=str(root / "starts.jsonl"),
            ),
        )
        launcher = FakeLauncher(root / "fake-launch", scripts)
        ids: list[str] = []
        lock = threading.Lock()

        def owner(number: int) -> None:
            view = local_node(paths).start(f"acme/app#{number}")
            with lock:
                ids.append(view.id)

        workers = [threading.Thread(target=owner, args=(n,)) for n in range(1, owners + 1)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        node = local_node(paths)
        serve = ServeThread(node, attrs.evolve(FAST, status_poll_s=0.05), launcher)
        serve.start()
        want = expected_launches(cost, cap, owners)
        try:

            def settled() -> bool:
                views = [node.get(clone_id) for clone_id in ids]
                ended = [v for v in views if not v.state.active]
                held = [v for v in views if v.waiting_for.startswith("the daily cost")]
                return len(ended) == want and len(held) == owners - want

            wait_until(settled, f"{want} clones done and {owners - want} held by the cap", 60)
            time.sleep(0.3)  # serve passes its queue again: nothing more starts
            launched = starts(root / "starts.jsonl")
            assert len(launched) == want, (cost, cap, launched)
            for clone_id in set(ids) - set(launched):
                record = RunFolder(paths.clones_dir / clone_id).record()
                assert record is not None and record.state is State.QUEUED
        finally:
            serve.stop()
            for clone_id in ids:
                with contextlib.suppress(Refused):  # ended already
                    node.stop(clone_id)
