"""The scenarios of an engine whose session a later clone goes on with (`KeepsSessions`)."""

from __future__ import annotations

from shadowclone import files
from shadowclone.plugin.types import KeepsSessions, Outcome

from shadowclone_testing.fakes.models import Shell, Text
from shadowclone_testing.suites.engines.harness import Harness, git_workspace
from shadowclone_testing.suites.engines.scenarios import EngineScenarios
from shadowclone_testing.suites.engines.watch import Watch


class SessionScenarios(EngineScenarios):
    """The scenarios of an engine whose session a later clone goes on with (`KeepsSessions`):
    add this to the test class's bases. The run program copies the files the engine names
    into another clone's state folder, where the engine says, and resumes the session there,
    in another workspace."""

    def keeps_sessions(self, harness: Harness) -> KeepsSessions:
        engine = harness.engine
        assert isinstance(engine, KeepsSessions), f"{type(engine).__name__} keeps no session"
        return engine

    async def test_a_session_goes_on_in_another_state_folder_and_workspace(
        self, harness: Harness
    ) -> None:
        engine = self.keeps_sessions(harness)
        harness.server.add(Shell("echo remembered-output"), Text("First part done."))
        watch = await harness.launch("Do the first part.")
        await watch.turn_ended()
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE
        session_id = watch.session.session_id
        assert session_id, "the session has no id to resume"
        names = engine.session_files(harness.task(""), session_id)
        assert names, "the engine named no file of its session"

        later = harness.task(
            "Do the second part.",
            workspace=git_workspace(harness.workspace.parent / "later-workspace"),
            state_dir=harness.workspace.parent / "later-state",
            resume=session_id,
        )
        later.state_dir.mkdir()
        for name in names:
            files.relative_parts(name)  # a plain path inside the state folder
            data = (harness.state_dir / name).read_bytes()
            files.write_beneath(
                later.state_dir, engine.session_place(later, session_id, name), data
            )
        before = len(harness.server.model_requests())
        harness.server.add(Text("Second part done."))
        resumed = Watch(await harness.engine.launch(later))
        harness.watches.append(resumed)
        await resumed.turn_ended()

        first = harness.server.model_requests()[before]
        assert first.last_user_text() == "Do the second part."
        assert first.contains("Do the first part.") and first.contains("remembered-output")
        assert resumed.session.session_id == session_id
        assert "Second part done." in resumed.texts()
