"""One engine session for each pull request: the run program's part (node/sessions.py).

A clone whose work became a pull request keeps its engine's working session in its run
folder; serve gives it to the next clone on that pull request, whose engine resumes it when
that clone continues the owner's pull request with the same engine and login, so the engine
remembers the work. The engine names its session's files (`KeepsSessions`); the run program
reads and writes them in the engine's state folder without following a link (the engine
writes there), redacts them on their way out, and never keeps a session that worked from a
stranger's words or on a stranger's head.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import attrs

from shadowclone import files
from shadowclone.errors import MalformedFile
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Request, SavedSession
from shadowclone.node.sessions import MAX_SESSION_BYTES, read_session, write_session
from shadowclone.plugin.manager import Registry
from shadowclone.plugin.types import EngineTask, KeepsSessions
from shadowclone.run.identity import EngineIdentity
from shadowclone.run.plan import Mode, Plan

log = logging.getLogger(__name__)

Given = tuple[SavedSession, list[bytes]]


@attrs.define
class Sessions:
    folder: RunFolder
    request: Request
    registry: Registry
    identity: EngineIdentity
    redact: Callable[[str], str]

    def _engine(self) -> KeepsSessions | None:
        engine = self.registry.engine(self.request.engine).factory()
        return engine if isinstance(engine, KeepsSessions) else None

    def given(self, plan: Plan) -> Given | None:
        """The session serve gave this clone, if its engine goes on with it: on the owner's pull
        request, with the engine and login that saved it."""
        if plan.mode is not Mode.CONTINUE or plan.stranger is not None:
            return None
        try:
            session, contents = read_session(self.folder.given_session_dir)
        except FileNotFoundError:
            return None
        except MalformedFile as error:
            log.warning("the session given to this clone is not used: %s", error)
            return None
        if (session.engine, session.login) != (self.request.engine, self.request.login):
            return None
        return (session, contents) if self._engine() is not None else None

    def restore(self, task: EngineTask, given: Given) -> EngineTask:
        """Put the given session's files where the engine resumes them; the task resumes it."""
        engine = self._engine()
        assert engine is not None
        session, contents = given
        for name, data in zip(session.names, contents, strict=True):
            place = engine.session_place(task, session.session_id, name)
            files.write_beneath(task.state_dir, place, data)
        self.identity.share(task.state_dir)  # the engine appends to them
        return attrs.evolve(task, resume=session.session_id)

    def keep(self, plan: Plan, task: EngineTask, session_id: str) -> str:
        """Keep the working session for the next clone on the pull request; returns what
        happened, in a few words."""
        engine = self._engine()
        if engine is None or plan.mode is Mode.REVIEW or plan.stranger is not None:
            return ""
        try:
            names = tuple(engine.session_files(task, session_id))
            if not names:
                return "the engine left no session to keep"
            session = SavedSession(self.request.engine, self.request.login, session_id, names)
            left = MAX_SESSION_BYTES
            contents: list[bytes] = []
            for name in names:
                data = self.identity.read(task.state_dir, name, left)
                left -= len(data)
                contents.append(self._redacted(data))
            write_session(self.folder.saved_session_dir, session, contents)
        except (MalformedFile, ValueError, OSError) as error:
            log.warning("the engine's session is not kept: %s", error)
            return f"the engine's session is not kept: {error}"
        return f"the engine's session {session_id} is kept for the next clone on the pull request"

    def _redacted(self, data: bytes) -> bytes:
        return self.redact(data.decode("utf-8", "surrogateescape")).encode(
            "utf-8", "surrogateescape"
        )
