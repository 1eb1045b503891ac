"""The handoffs between launches: the work handed to a launch with another network, or the
session a long usage limit ended kept for the launch at its reset, and a later launch taking
up what the earlier one handed on.

Apart from the phases themselves (run/targeting.py, working.py, saving.py) because a handoff
ends one launch and begins the next: what crosses is written to `carry.json` and
`handoff.json`, and read back into `Known` before the phase goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import attrs

from shadowclone.node.schemas import Handoff, Resume, Step
from shadowclone.plugin.types import NetworkMode, Outcome
from shadowclone.run.access import UsageLimits
from shadowclone.run.carry import Carry, ReviewLine, read_carry, write_carry
from shadowclone.run.drive import EngineResult
from shadowclone.run.prompt import RESUME_PROMPT
from shadowclone.run.review.findings import FindingsTool
from shadowclone.run.reviewing import Reviewing
from shadowclone.run.state import Basics, Known
from shadowclone.run.targeting import Targeting
from shadowclone.run.working import Parked, Working

log = logging.getLogger("shadowclone.run.program")
"""The run program's own log, under one name."""

Finish = Callable[[EngineResult, list[ReviewLine]], Awaitable[int]]
"""Saves the work and writes the final line; returns the exit code."""


class Handoffs:
    """Hands the work on to the next launch, and takes it up in that launch."""

    def __init__(
        self,
        basics: Basics,
        known: Known,
        targeting: Targeting,
        working: Working,
        reviewing: Reviewing,
        findings: FindingsTool,
        limits: UsageLimits,
        finish: Finish,
    ) -> None:
        self.basics = basics
        self.known = known
        self.targeting = targeting
        self.working = working
        self.reviewing = reviewing
        self.findings = findings
        self.limits = limits
        self.finish = finish

    def take(self) -> Handoff | None:
        """The phase this launch is for, if an earlier launch handed its work on."""
        folder = self.basics.folder
        handoff = folder.handoff()
        if handoff is not None:
            folder.handoff_file.unlink()
        return handoff

    async def go_on(self, handoff: Handoff) -> int:
        """Take up the work an earlier launch handed on; returns the exit code."""
        basics, known = self.basics, self.known
        carry = read_carry(basics.folder)
        known.plan = carry.plan
        known.conversation = carry.conversation
        known.workspace = basics.workspace_for(carry.base_ref)
        if handoff.resume is Resume.SESSION:
            return await self._resume_session(handoff, carry)
        if handoff.resume is Resume.ENGINE:
            known.network = NetworkMode.MODEL_ONLY
            basics.progress.note(Step.ENGINE, "launched again with no network but the model's API")
            result, reviews = await self.working.work(self.targeting.prompt())
            return self.save_next(carry, result, reviews)
        basics.progress.note(Step.SAVE, "launched again with the network on, to save the work")
        self.targeting.connect()
        result = carry.result or EngineResult(Outcome.FAILED, "the review phase left no result")
        self.findings.findings = list(carry.findings)
        return await self.finish(result, list(carry.reviews))

    def save_next(self, carry: Carry, result: EngineResult, reviews: list[ReviewLine]) -> int:
        """Hand the engine's work to a launch with the network on, which saves it."""
        findings = tuple(self.findings.findings)
        write_carry(
            self.basics.folder,
            attrs.evolve(
                carry, result=result, reviews=tuple(reviews), findings=findings, session=None
            ),
            self.basics.redact,
        )
        self.basics.folder.write_handoff(Handoff(NetworkMode.OPEN, Resume.SAVE))
        self.basics.progress.note(Step.REVIEW, "the work is done; it is saved with the network on")
        return 0

    async def _resume_session(self, handoff: Handoff, carry: Carry) -> int:
        """Launched again for the working session a long usage limit ended: at the reset, or
        at once for the owner's resume or stop (then it only saves the work)."""
        basics, known = self.basics, self.known
        kept = carry.session
        if kept is None:
            result = EngineResult(Outcome.FAILED, "launched to resume a session it was not given")
            basics.progress.error(Step.ENGINE, result.detail)
            return await self.finish(result, [])
        known.network = handoff.network
        self.reviewing.fixes = kept.fixes
        self.reviewing.lines = list(carry.reviews)
        self.findings.findings = list(carry.findings)
        known.open_threads = list(carry.open_threads)
        if basics.folder.stop_marker() is not None:
            basics.stop.set()  # before the watcher says so: a stop never starts the engine
        basics.progress.note(
            Step.ENGINE, "launched again to resume the engine's session, which a usage limit ended"
        )
        if known.network is NetworkMode.OPEN:
            self.targeting.reopen_reads()
        if handoff.not_before is not None and not basics.stop.is_set():
            # Launched before the reset with no word from the owner: wait here.
            await self.limits.until_reset(handoff.not_before, handoff.at)
        result, reviews = await self.working.work(RESUME_PROMPT, kept)
        if known.network is not NetworkMode.OPEN:
            return self.save_next(carry, result, reviews)
        return await self.finish(result, reviews)

    def carry_on(self) -> None:
        """Hand the work to a launch with no network but the model's API."""
        known = self.known
        assert known.plan is not None and known.workspace is not None
        carry = Carry(known.plan, known.workspace.base_ref, conversation=known.conversation)
        write_carry(self.basics.folder, carry, self.basics.redact)
        self.basics.folder.write_handoff(Handoff(NetworkMode.MODEL_ONLY, Resume.ENGINE))

    def park(self, parked: Parked) -> None:
        """Keep the working session for the launch that resumes it at the reset: what that
        launch needs goes to `carry.json`, then `handoff.json` names the reset."""
        known = self.known
        assert known.plan is not None and known.workspace is not None
        kept = self.working.keep(parked)
        carry = Carry(
            known.plan,
            known.workspace.base_ref,
            reviews=tuple(self.reviewing.lines),
            findings=tuple(self.findings.findings),
            conversation=known.conversation,
            session=kept,
            open_threads=tuple(known.open_threads),
        )
        write_carry(self.basics.folder, carry, self.basics.redact)
        handoff = Handoff(known.network, Resume.SESSION, self.limits.scheduled_at, parked.reset)
        self.basics.folder.write_handoff(handoff)
        log.info("the clone exits; it is launched again at %s", parked.reset.isoformat())
