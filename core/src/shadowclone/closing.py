"""`async with` for objects that have an async `close()`: the model proxy and the file watches.

One base, so each such object states only what closing it does, and entering and leaving a
block is the same everywhere."""

from __future__ import annotations

import abc
from types import TracebackType
from typing import Self


class AsyncClosing(abc.ABC):
    """An object that `async with` closes on leaving; `__aenter__` may be overridden to start
    what `close` ends."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    @abc.abstractmethod
    async def close(self) -> None:
        """Release what the object holds; an exception in the block does not change it."""
