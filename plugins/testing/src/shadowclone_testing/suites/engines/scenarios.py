"""The whole scenario suite every engine passes, made of its groups."""

from __future__ import annotations

from shadowclone_testing.suites.engines.ask import AskScenarios
from shadowclone_testing.suites.engines.messages import MessageScenarios
from shadowclone_testing.suites.engines.stop import StopScenarios
from shadowclone_testing.suites.engines.turns import TurnScenarios


# The groups in reverse: pytest runs a base's tests first, so the turns come first as before.
class EngineScenarios(StopScenarios, AskScenarios, MessageScenarios, TurnScenarios):
    """The scenario suite. Subclass it as `Test<Engine>` and implement the abstract methods."""
