"""A Codex session's turns: messages steered into the running turn, or starting the next.

A message from the owner while a tool runs (a shell command, an open question through the ask
tool) interrupts the turn and starts the next one with the message: Codex shows a steered
message to the model only once the running tool ends, which for a long command or a question
may take many minutes. Otherwise a message during a turn is appended to that turn with
`turn/steer`, naming the turn it expects; when the turn has just ended (Codex answers "no
active turn to steer") or cannot take input now, the message waits and starts the next turn as
soon as the running one completes. A steered message Codex accepted but never showed as a user
message of its turn is sent again in the next turn. So no message is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shadowclone.plugin import EngineTask, Outcome, ProcessTree, Refused

from shadowclone_codex.connection import CodexConnection
from shadowclone_codex.instructions import project_instructions
from shadowclone_codex.notifications import NotificationNormalizer, turn_error
from shadowclone_codex.rpc import EngineGone, RpcError
from shadowclone_codex.turns import Turns, end_commands, text_input

log = logging.getLogger(__name__)

RPC_TIMEOUT_S = 60.0
"""Bound on `turn/start` and `turn/steer`, which Codex answers at once."""
OVERLOADED = -32001
OVERLOADED_RETRIES = 5
INTERRUPT_WAIT_S = 1.0
"""How long `stop()` gives Codex to interrupt the turn itself before signals end it."""


class CodexSession(CodexConnection):
    """One running `codex app-server` process with one thread (the `EngineSession` protocol)."""

    def __init__(self, process: asyncio.subprocess.Process, tree: ProcessTree) -> None:
        super().__init__(process, tree)
        self._normalizer = NotificationNormalizer()
        self._lock = asyncio.Lock()
        """Held while deciding between steering and starting a turn, until Codex answered."""
        self._turns = Turns()
        self._closing = False
        self._last_error = ""
        """The last error Codex reported that it does not retry."""
        self._turn_failure = ""
        """Why the last turn failed, or "" when it completed."""
        self._flushes: set[asyncio.Task[None]] = set()

    # ---- the EngineSession protocol

    async def send(self, message: str) -> None:
        async with self._lock:
            if self._done.done() or self._closing or self._stopping or self._start_error:
                raise Refused("the Codex session takes no more messages: it is ending")
            running = self._turns.running
            if running is not None and self._turns.in_tool:
                # Steered input waits for the running tool: a shell command (Codex gives it
                # seconds before it looks again), an open question (up to half an hour).
                # Interrupt, and the message starts the next turn as soon as Codex says the
                # turn is over.
                self._pending.append(message)
                await self._interrupt(running)
            elif running is not None:
                await self._steer(running, message)
            else:
                # Messages still waiting for a turn go first, in the order they came.
                waiting, self._pending = self._pending, []
                try:
                    await self._start_turn_for_sender([*waiting, message])
                except Refused:
                    self._pending[:0] = waiting
                    raise
        await self._until_taken(message)

    async def close(self) -> None:
        async with self._lock:
            self._closing = True
            await self._flush()

    async def stop(self) -> None:
        if self._done.done():
            return
        if self._thread_id is not None and self._turns.running is not None:
            # Codex ends the turn's commands itself; the signals below make sure of it.
            with contextlib.suppress(RpcError, EngineGone, TimeoutError):
                await self._rpc.request(
                    "turn/interrupt",
                    {"threadId": self._thread_id, "turnId": self._turns.running},
                    timeout=INTERRUPT_WAIT_S,
                )
        await self._end()

    # ---- opening the session

    async def begin(self, task: EngineTask) -> None:
        """The handshake, the thread in the workspace, the ask server, the first turn. A failure
        ends the process; the session then finishes FAILED with what went wrong."""
        await self.initialize()
        await self.open_thread(task, task.workspace)
        await self.first_turn(task)

    async def first_turn(self, task: EngineTask) -> None:
        """The first turn, in the workspace, with the repository's instructions."""
        if self._start_error:
            return
        async with self._starting():
            # A resumed thread has the repository's instructions in its history already.
            instructions = None if task.resume else project_instructions(task.workspace)
            async with self._lock:
                await self._start_turn(
                    [instructions, task.prompt] if instructions else [task.prompt],
                    cwd=task.workspace,
                )

    # ---- turns

    async def _start_turn(self, messages: Sequence[str], cwd: Path | None = None) -> None:
        """Start a turn with `messages` (the lock is held); `cwd` moves the thread there, for
        this turn and the next."""
        assert self._thread_id is not None
        params: dict[str, Any] = {
            "threadId": self._thread_id,
            "input": text_input(messages),
            "clientUserMessageId": self._turns.message_id(),
        }
        if cwd is not None:
            params["cwd"] = str(cwd)
        for attempt in itertools.count(1):
            try:
                result = await self._rpc.request("turn/start", params, timeout=RPC_TIMEOUT_S)
                break
            except RpcError as error:
                if error.code != OVERLOADED or attempt >= OVERLOADED_RETRIES:
                    raise
                await asyncio.sleep(0.2 * attempt)
        turn_id = str(result["turn"]["id"])
        self._turns.started(turn_id)
        log.info("codex turn %s started with %d messages", turn_id, len(messages))

    async def _start_turn_for_sender(self, messages: Sequence[str]) -> None:
        try:
            await self._start_turn(messages)
        except (RpcError, TimeoutError, KeyError, TypeError) as error:
            raise Refused(f"Codex did not start a turn with the message: {error}") from error
        except EngineGone as error:
            raise Refused(f"the Codex session ended before it took the message: {error}") from error

    async def _interrupt(self, turn_id: str) -> None:
        """Ask Codex to end `turn_id` now (the lock is held); its `turn/completed` then starts
        the next turn with the waiting messages."""
        assert self._thread_id is not None
        if not self._turns.interrupting(turn_id):
            return
        try:
            await self._rpc.request(
                "turn/interrupt",
                {"threadId": self._thread_id, "turnId": turn_id},
                timeout=RPC_TIMEOUT_S,
            )
            log.info("interrupted codex turn %s for a message", turn_id)
        except (RpcError, TimeoutError) as error:
            # The turn ended meanwhile: its completion (or this flush) starts the next one.
            log.info("codex did not interrupt turn %s (%s)", turn_id, error)
            await self._flush()
        except EngineGone as error:
            raise Refused(f"the Codex session ended before it took the message: {error}") from error

    async def _steer(self, turn_id: str, message: str) -> None:
        """Append `message` to the running turn, or keep it for the next (the lock is held)."""
        assert self._thread_id is not None
        client_id = self._turns.message_id()
        # Known before the answer: Codex may show the message before it answers.
        self._turns.steering(client_id, turn_id, message)
        try:
            await self._rpc.request(
                "turn/steer",
                {
                    "threadId": self._thread_id,
                    "expectedTurnId": turn_id,
                    "input": text_input([message]),
                    "clientUserMessageId": client_id,
                },
                timeout=RPC_TIMEOUT_S,
            )
            log.info("steered codex turn %s", turn_id)
            return
        except (RpcError, TimeoutError) as error:
            # "no active turn to steer", "expected active turn id ... but found ...", a turn
            # that takes no input (compaction, review): the message starts the next turn.
            log.info("codex did not take the message into turn %s (%s)", turn_id, error)
        except EngineGone as error:
            self._turns.not_steered(client_id)
            raise Refused(f"the Codex session ended before it took the message: {error}") from error
        if self._turns.not_steered(client_id):
            self._pending.append(message)
        await self._flush()

    async def _flush(self) -> None:
        """Between turns (the lock is held): start the next turn with the waiting messages, or
        end the session once it is closing."""
        if self._turns.running is not None or self._done.done():
            return
        if self._pending:
            messages, self._pending = self._pending, []
            try:
                await self._start_turn(messages)
            except (RpcError, TimeoutError, KeyError, TypeError) as error:
                self._pending[:0] = messages
                self._turn_failure = f"Codex did not start a turn with waiting messages: {error}"
                log.error("%s", self._turn_failure)
            except EngineGone:
                log.warning("codex ended before %d waiting messages", len(messages))
            return
        if self._closing and not self._input_closed:
            self._close_input()

    def _schedule_flush(self) -> None:
        async def flush() -> None:
            async with self._lock:
                await self._flush()

        task = asyncio.create_task(flush(), name="codex-flush")
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    # ---- reading

    def _on_notification(self, method: str, params: Mapping[str, Any]) -> None:
        if method == "turn/started":
            self._turns.started(str((params.get("turn") or {}).get("id")))
        elif method in ("item/started", "item/completed"):
            self._turns.item(method, params.get("item") or {})
        elif method == "error":
            self._on_error(params)
        for event in self._normalizer.events(method, params):
            self._events.put_nowait(event)
        if method == "turn/completed":
            self._on_turn_completed(params)

    def _on_error(self, params: Mapping[str, Any]) -> None:
        error = turn_error(params)
        if params.get("willRetry"):
            log.info("codex retries after an error: %s", error)
        else:
            self._last_error = error
            log.warning("codex reported an error: %s", error)

    def _on_turn_completed(self, params: Mapping[str, Any]) -> None:
        turn = params.get("turn") or {}
        turn_id = str(turn.get("id"))
        status = turn.get("status")
        commands, unseen = self._turns.completed(turn_id)
        end_commands(self._tree, self.pid, commands)
        if status == "failed":
            self._turn_failure = turn_error(params) or self._last_error or "the turn failed"
            log.warning("codex turn %s failed: %s", turn_id, self._turn_failure)
        elif status == "completed":
            self._turn_failure = ""
        if unseen:
            log.warning("codex ended turn %s before %d steered messages", turn_id, len(unseen))
            self._pending[:0] = unseen
        self._schedule_flush()

    # ---- the end

    def _outcome(self, returncode: int) -> tuple[Outcome, str]:
        if self._stopping:
            return Outcome.STOPPED, ""
        if self._start_error:
            return Outcome.FAILED, self._with_tail(
                f"Codex could not open the session: {self._start_error}"
            )
        running = self._turns.running is not None
        if self._input_closed and not running and (returncode == 0 or self._ended_after_close):
            if self._turn_failure:
                return Outcome.FAILED, self._with_tail(
                    f"Codex's last turn failed: {self._turn_failure}"
                )
            return Outcome.DONE, ""
        return Outcome.FAILED, self._failure(returncode, running, self._last_error)
