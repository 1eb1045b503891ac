"""Progress lines from inside the clone: redaction, question ids, open questions."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ChosenBy, ProgressKind, Step
from shadowclone.plugin.types import Outcome
from shadowclone.redact import MARKER, Redactor
from shadowclone.run.credentials import CredentialWatch, credential_values
from shadowclone.run.identity import EngineIdentity
from shadowclone.run.progress import OpenQuestions, ProgressWriter


def hide_secret(text: str) -> str:
    return text.replace("hunter2", "***")


def test_every_string_of_every_line_passes_redaction(sc_folder: RunFolder) -> None:
    progress = ProgressWriter(sc_folder, hide_secret)
    progress.note(Step.WORKSPACE, "cloned with hunter2")
    progress.text("the password is hunter2")
    progress.tool("Bash", "echo hunter2")
    progress.message("use hunter2")
    progress.error(Step.SAVE, "push failed for hunter2")
    asked = progress.question("hunter2 or not?", ["hunter2", "other"], "hunter2", 60)
    progress.answer(asked.id, "hunter2")
    progress.final(Outcome.DONE, "https://example.test/pr/1", "report: hunter2")
    raw = sc_folder.progress_file.read_text()
    assert "hunter2" not in raw
    lines, problems, _ = sc_folder.progress()
    assert problems == []
    assert [line.kind for line in lines] == [
        ProgressKind.NOTE,
        ProgressKind.TEXT,
        ProgressKind.TOOL,
        ProgressKind.MESSAGE,
        ProgressKind.ERROR,
        ProgressKind.QUESTION,
        ProgressKind.ANSWER,
        ProgressKind.FINAL,
    ]
    assert lines[2].text == "Bash: echo ***"
    question = lines[5].question
    assert question is not None
    assert (question.text, question.options, question.recommended) == (
        "*** or not?",
        ("***", "other"),
        "***",
    )
    final = lines[-1]
    assert final.final
    assert (final.outcome, final.pr_url, final.report) == (
        Outcome.DONE,
        "https://example.test/pr/1",
        "report: ***",
    )


def texts(folder: RunFolder) -> list[str]:
    lines, problems, _ = folder.progress()
    assert problems == []
    return [line.text for line in lines]


def test_a_line_that_only_begins_a_secret_is_written_as_it_is(sc_folder: RunFolder) -> None:
    """A tool named `Bash` where a secret is `Bashful99`: held back for the next line, which
    shows it is no secret, then written unchanged; a line that goes on with it hides both."""
    progress = ProgressWriter(sc_folder, Redactor(["Bashful99", "Therapy-2026"]))
    progress.tool("Bash")
    assert texts(sc_folder) == []  # held: the next line may go on with the secret
    progress.text("The")
    progress.text("The end")
    progress.text("split: Bashf")
    progress.text("ul99 there")
    asked = progress.question("go on?", ["yes", "no"], "yes", 60)
    progress.answer(asked.id, "yes")
    progress.final(Outcome.DONE, None, "said Bash and The")
    assert texts(sc_folder) == [
        "Bash",
        "The",
        "The end",
        f"split: {MARKER}",
        f"{MARKER} there",
        "go on?",
        "yes",
        "clone done",
    ]


def test_a_held_line_is_written_when_nothing_follows(sc_folder: RunFolder) -> None:
    progress = ProgressWriter(sc_folder, Redactor(["Bashful99"]))
    progress.tool("Bash")
    deadline = time.monotonic() + 30
    while not texts(sc_folder) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert texts(sc_folder) == ["Bash"]
    progress.text("ful99")  # too late to hide the first part, never too late for the rest
    assert texts(sc_folder) == ["Bash", MARKER]


def test_credentials_written_after_the_start_are_learned(
    sc_folder: RunFolder, tmp_path: Path
) -> None:
    redactor = Redactor(["first-secret-1"])
    watch = CredentialWatch(redactor, EngineIdentity())
    progress = ProgressWriter(sc_folder, redactor, watch=watch.check)
    state = tmp_path / "state"
    (state / "claude").mkdir(parents=True)
    watch.engines(state, ["claude/.credentials.json", "absent.json"])
    watch.own(tmp_path / "login.json")
    progress.text("before: renewed-token-A1 and renewed-token-B2")
    login = {"claudeAiOauth": {"accessToken": "renewed-token-A1", "scopes": ["user:inference"]}}
    (state / "claude" / ".credentials.json").write_text(json.dumps(login))
    (tmp_path / "login.json").write_text(json.dumps({"tokens": {"x": "renewed-token-B2"}}))
    progress.text("after: renewed-token-A1 and renewed-token-B2 for user:inference")
    assert texts(sc_folder) == [
        "before: renewed-token-A1 and renewed-token-B2",
        f"after: {MARKER} and {MARKER} for user:inference",
    ]


def test_credential_values_are_the_strings_under_credential_keys() -> None:
    codex = {
        "OPENAI_API_KEY": None,
        "auth_mode": "chatgpt-plan-mode",
        "tokens": {"id_token": "eyJid", "refresh_token": "rt-1", "account_id": "acct-12345678"},
        "last_refresh": "2026-12-06T04:00:00Z",
    }
    assert sorted(credential_values(json.dumps(codex))) == ["acct-12345678", "eyJid", "rt-1"]
    assert credential_values("  a-raw-token-in-a-file\n") == ["a-raw-token-in-a-file"]


def test_usage_lines_carry_the_numbers(sc_folder: RunFolder) -> None:
    ProgressWriter(sc_folder, str).usage(1200, 300, 0.0125)
    [line], _, _ = sc_folder.progress()
    assert line.usage is not None
    assert (line.usage.input_tokens, line.usage.output_tokens, line.usage.cost_usd) == (
        1200,
        300,
        0.0125,
    )


def test_question_ids_are_unique_across_writers_of_one_folder(sc_folder: RunFolder) -> None:
    first, second = ProgressWriter(sc_folder, str), ProgressWriter(sc_folder, str)
    ids = [
        writer.question("which?", ["a", "b"], "a", 60).id
        for writer in (first, second, first, second)
    ]
    assert ids == ["q1", "q2", "q3", "q4"]


def test_open_questions_follow_questions_and_answers(sc_folder: RunFolder) -> None:
    progress = ProgressWriter(sc_folder, str)
    questions = OpenQuestions(sc_folder)
    assert not questions.refresh()
    assert questions.current() == []
    one = progress.question("one?", ["a", "b"], "a", 60)
    two = progress.question("two?", ["a", "b"], "b", 60)
    assert questions.refresh()
    assert [q.id for q in questions.current()] == [one.id, two.id]
    progress.answer(one.id, "b", ChosenBy.OWNER)
    progress.text("unrelated")
    assert questions.refresh()
    assert [q.id for q in questions.current()] == [two.id]
    assert not questions.refresh()
    progress.answer(two.id, "b", ChosenBy.TIMEOUT)
    questions.refresh()
    assert questions.current() == []


def test_a_question_past_its_wait_limit_no_longer_counts_as_open(sc_folder: RunFolder) -> None:
    progress = ProgressWriter(sc_folder, str)
    progress.question("one?", ["a", "b"], "a", timeout_s=60)
    questions = OpenQuestions(sc_folder, grace_s=30)
    questions.refresh()
    assert len(questions.current()) == 1
    later = datetime.now(UTC) + timedelta(seconds=91)
    assert questions.current(later) == []
