"""How soon the owner hears of a question, and how soon an answer from the dashboard reaches
the clone, each against a floor measured in the same run.

Run: `python bench/notify_latency.py [--runs 10] [--quick]`

serve runs in this process with the fake launcher (clones are local processes playing the ask
script), a webhook notifier pointed at a local receiver, and the dashboard on loopback.
For each run a clone asks a question; the figures:
- question -> notification: from the question line's time to the webhook's POST arriving;
  floor: from the same line to serve's record showing the clone waiting (serve noticing it);
- dashboard answer -> clone: from the owner's POST to the dashboard's answer endpoint to the
  clone's answer line; floor: the same through `node.answer` as the CLI calls it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx2
from shadowclone.config import HOME_VARIABLE, default_paths, init_config, load_config, set_value
from shadowclone.dashboard.keys import load_token
from shadowclone.dashboard.server import make_server
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ProgressKind, SetupRecord, State
from shadowclone.node.setups import write_setup
from shadowclone.plugin.node import LocalNode
from shadowclone.serve.loop import serve_clones
from shadowclone_fake_launch.scripts import (
    SCRIPTS_VARIABLE,
    Play,
    Script,
    ScriptsFile,
    write_scripts,
)
from shadowclone_testing.timing import record

WAIT_S = 30.0


def wait(check: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.002)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="two runs: it works, roughly")
    args = parser.parse_args(argv)
    runs = 2 if args.quick else args.runs
    arrivals: list[float] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            arrivals.append(time.time())
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="bench-notify-") as temp:
        root = Path(temp)
        root.chmod(0o711)  # the fake launcher run as root gives the engine a user of its own
        paths = default_paths({HOME_VARIABLE: str(root / "home")})
        os.environ[HOME_VARIABLE] = str(root / "home")
        init_config(paths)
        port = receiver.server_address[1]
        for key, value in (
            ("providers.scripted.login", '"no-login"'),
            ("engine", '"scripted"'),
            ("launcher", '"fake"'),
            ("daily_clones", "1000"),
            ("notify.use", '["webhook"]'),
            ("notify.events", '["question"]'),
            ("notify.webhook.url", json.dumps(f"http://127.0.0.1:{port}/hook")),
        ):
            set_value(paths, key, value)
        write_setup(
            paths,
            SetupRecord(repo="acme/app", config_version=1, engine="scripted", login="no-login"),
        )
        scripts = root / "scripts.json"
        write_scripts(scripts, ScriptsFile(default=Script(play=Play.ASK)))
        os.environ[SCRIPTS_VARIABLE] = str(scripts)
        config, resolved = load_config(paths)
        node = LocalNode(config, resolved)
        token, _ = load_token(resolved)
        dashboard = make_server(config, resolved, "127.0.0.1", 0)
        threading.Thread(target=dashboard.run, daemon=True).start()
        wait(lambda: dashboard.started, "the dashboard")
        dashboard_port = dashboard.servers[0].sockets[0].getsockname()[1]
        stop, ready = threading.Event(), threading.Event()
        serve = threading.Thread(
            target=serve_clones,
            args=(config, resolved),
            kwargs={"stop_event": stop, "ready": ready},
            daemon=True,
        )
        serve.start()
        ready.wait(WAIT_S)
        noticed: list[float] = []
        told: list[float] = []
        by_dashboard: list[float] = []
        by_node: list[float] = []
        client = httpx2.Client(
            base_url=f"http://127.0.0.1:{dashboard_port}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=WAIT_S,
        )
        try:
            for number in range(1, 2 * runs + 1):
                clone_id = node.start(f"acme/app#{number}").id
                folder = RunFolder(resolved.clones_dir / clone_id)

                def asked(folder: RunFolder = folder) -> float | None:
                    lines, _, _ = folder.progress()
                    found = [ln for ln in lines if ln.kind is ProgressKind.QUESTION]
                    return found[0].at.timestamp() if found else None

                wait(asked, "the question")
                at = asked()
                assert at is not None
                before = len(arrivals)

                def waiting(folder: RunFolder = folder) -> bool:
                    record = folder.record()
                    return record is not None and record.state is State.WAITING

                wait(waiting, "serve to see the clone waiting")
                noticed.append(time.time() - at)

                def arrived(before: int = before) -> bool:
                    return len(arrivals) > before

                wait(arrived, "the notification")
                told.append(arrivals[before] - at)
                began = datetime.now(UTC).timestamp()
                if number % 2:
                    answered = client.post(
                        f"/clones/{clone_id}/answer", data={"question_id": "q1", "choice": "left"}
                    )
                    assert answered.status_code == 200, answered.text
                else:
                    node.answer(clone_id, "q1", "left")

                def answer_at(folder: RunFolder = folder) -> float | None:
                    lines, _, _ = folder.progress()
                    found = [ln for ln in lines if ln.kind is ProgressKind.ANSWER]
                    return found[0].at.timestamp() if found else None

                wait(answer_at, "the answer to reach the clone")
                took = (answer_at() or 0.0) - began
                (by_dashboard if number % 2 else by_node).append(took)

                def ended(clone_id: str = clone_id) -> bool:
                    return not node.get(clone_id).state.active

                wait(ended, "the clone to end")
        finally:
            client.close()
            stop.set()
            serve.join(WAIT_S)
            dashboard.should_exit = True
            receiver.shutdown()

    def shown(name: str, times: list[float]) -> float:
        median = statistics.median(times)
        print(f"{name:<46} median {median * 1000:6.1f} ms  (n={len(times)})")
        return median

    print(f"notifications and answers, fake launcher, {runs} runs each")
    floor = shown("question -> serve's record says waiting", noticed)
    heard = shown("question -> webhook notification received", told)
    node_floor = shown("answer by node.answer (the CLI) -> clone", by_node)
    dashboard_time = shown("answer in the dashboard -> clone", by_dashboard)
    record("question -> notification", heard, floor=floor, floor_is="serve noticing it")
    record(
        "dashboard answer -> clone", dashboard_time, floor=node_floor, floor_is="the CLI's answer"
    )
    print(
        f"ratio: notification {heard / floor:.2f}x serve's noticing; "
        f"dashboard answer {dashboard_time / node_floor:.2f}x the CLI's"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
