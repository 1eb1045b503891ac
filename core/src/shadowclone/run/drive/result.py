"""How the engine's work ended, and the callables that start its next turn: shared by the
supervisor and its parts."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs

from shadowclone.plugin.types import Outcome

FollowUp = Callable[[], str]
"""What the reviews between turns give the engine next: called as it is sent."""


@attrs.frozen
class EngineResult:
    """How the engine's work ended, for the run program's next steps and final report."""

    outcome: Outcome
    detail: str = ""
    """Why it ended so, for anything but done; for a failure, the engine's last output."""
    last_text: str = ""
    """The model's last words, the heart of the report."""
    taken: tuple[str, ...] = ()
    """Ids of the owner's messages the engine took, in order."""
    capped: str = ""
    """The cap that ended the work (the owner chose to finish, or did not answer), if one did."""


TurnStart = Callable[[], Awaitable[EngineResult | None]]
"""What starts the engine's next turn (sends it a message or the failing checks)."""
