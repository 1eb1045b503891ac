"""A stand-in for `codex app-server` that plays one race at a chosen moment, for the driver's
steering tests: the real CLI decides a steer in microseconds and cannot be made to lose the race
on cue. It speaks the same JSON-RPC lines (shapes from data/codex-0.171.0.jsonl) and writes every
line it receives to the file named by SCRIPTED_LOG.

Scenarios (SCRIPTED_SCENARIO):
- `error-then-end`: a steer is refused with "no active turn to steer", then the turn ends.
- `end-then-error`: the turn ends, then the steer in flight is refused.
- `steer-unseen`: a steer is accepted, but the turn ends without the message in it.
- `ask-the-driver`: during the first turn it asks the driver for approvals and an unknown method.
- `thread-refused`: `thread/start` fails, as when a required MCP server does not start.
- `sub-agent`: during the first turn a sub-agent's thread runs a turn of its own.
- `linger`: the first turn ends at once, and the server does not exit when its input closes.

Every turn after the first ends at once, with the messages it was given as its user message.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

SCENARIO = os.environ.get("SCRIPTED_SCENARIO", "")
LOG = os.environ["SCRIPTED_LOG"]
THREAD = "thread-1"


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def notify(method: str, params: dict[str, Any]) -> None:
    send({"method": method, "params": params})


def turn(turn_id: str, status: str) -> dict[str, Any]:
    return {"id": turn_id, "items": [], "status": status, "error": None}


def start_turn(turn_id: str) -> None:
    notify("turn/started", {"threadId": THREAD, "turn": turn(turn_id, "inProgress")})


def end_turn(turn_id: str) -> None:
    notify("turn/completed", {"threadId": THREAD, "turn": turn(turn_id, "completed")})


def user_message(turn_id: str, params: dict[str, Any]) -> None:
    item = {
        "type": "userMessage",
        "id": f"item-{turn_id}",
        "clientId": params.get("clientUserMessageId"),
        "content": params["input"],
    }
    for method in ("item/started", "item/completed"):
        notify(method, {"threadId": THREAD, "turnId": turn_id, "item": item})


def main() -> None:
    turns = 0
    with open(LOG, "a") as log:
        for line in sys.stdin:
            log.write(line)
            log.flush()
            message = json.loads(line)
            method, request_id = message.get("method"), message.get("id")
            params = message.get("params") or {}
            if method == "initialize":
                send({"id": request_id, "result": {"userAgent": "scripted", "codexHome": "."}})
            elif method == "thread/start":
                if SCENARIO == "thread-refused":
                    error = {"code": -32603, "message": "required MCP servers failed to start"}
                    send({"id": request_id, "error": error})
                    continue
                send({"id": request_id, "result": {"thread": {"id": THREAD}}})
                notify(
                    "mcpServer/startupStatus/updated",
                    {"name": "shadowclone_ask", "status": "ready"},
                )
            elif method == "turn/start":
                turns += 1
                turn_id = f"turn-{turns}"
                send({"id": request_id, "result": {"turn": turn(turn_id, "inProgress")}})
                start_turn(turn_id)
                user_message(turn_id, params)
                if SCENARIO == "ask-the-driver" and turns == 1:
                    approval = {"threadId": THREAD, "turnId": turn_id, "itemId": "call-1"}
                    send(
                        {
                            "id": 0,
                            "method": "item/commandExecution/requestApproval",
                            "params": approval,
                        }
                    )
                    send({"id": 1, "method": "item/tool/call", "params": approval})
                if SCENARIO == "sub-agent" and turns == 1:
                    other = {"threadId": "thread-2", "turn": turn("turn-of-2", "inProgress")}
                    notify("turn/started", other)
                    notify(
                        "thread/tokenUsage/updated",
                        {
                            "threadId": "thread-2",
                            "tokenUsage": {
                                "total": {"inputTokens": 500, "outputTokens": 50},
                                "last": {"inputTokens": 500, "outputTokens": 50},
                            },
                        },
                    )
                    notify("turn/completed", {**other, "turn": turn("turn-of-2", "completed")})
                if turns > 1 or SCENARIO == "linger":
                    end_turn(turn_id)
            elif method == "turn/steer":
                refusal = {"code": -32600, "message": "no active turn to steer"}
                if SCENARIO in ("error-then-end", "sub-agent"):
                    send({"id": request_id, "error": refusal})
                    end_turn(params["expectedTurnId"])
                elif SCENARIO == "end-then-error":
                    end_turn(params["expectedTurnId"])
                    send({"id": request_id, "error": refusal})
                elif SCENARIO == "steer-unseen":
                    send({"id": request_id, "result": {"turnId": params["expectedTurnId"]}})
                    end_turn(params["expectedTurnId"])
            elif method == "turn/interrupt":
                send({"id": request_id, "result": {}})
                notify(
                    "turn/completed",
                    {"threadId": THREAD, "turn": turn(params["turnId"], "interrupted")},
                )
            elif method is None and request_id == 1 and SCENARIO == "ask-the-driver":
                # The driver answered the last of the requests above: the turn can end.
                end_turn("turn-1")
    if SCENARIO == "linger":
        time.sleep(600)


if __name__ == "__main__":
    main()
