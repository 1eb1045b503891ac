"""The owner's messages to a scripted session, kept apart from its playing: what waits, what
was heard, and whether the session is closing, which is what the script waits on."""

from __future__ import annotations

import asyncio


class Inbox:
    """The messages not handled yet and the count of those that were, so that a message sent a
    little before a `wait_for_message` is not missed."""

    def __init__(self) -> None:
        self.waiting: list[str] = []
        self.closing = False
        self.heard = 0
        """Messages handled so far."""
        self.heard_before_wait = 0
        """`heard` when the last `wait_for_message` ended."""
        self._wake = asyncio.Event()

    def put(self, message: str) -> None:
        self.waiting.append(message)
        self._wake.set()

    def close(self) -> None:
        self.closing = True
        self._wake.set()

    def take(self) -> str | None:
        """The next waiting message, counted as heard; None when none waits."""
        if not self.waiting:
            return None
        message = self.waiting.pop(0)
        self.heard += 1
        return message

    async def wait(self, timeout_s: float | None) -> bool:
        """Wait until a message waits or the session is closing; False if `timeout_s` passed."""
        try:
            async with asyncio.timeout(timeout_s):
                while not self.waiting and not self.closing:
                    self._wake.clear()
                    await self._wake.wait()
        except TimeoutError:
            return False
        return True
