"""Engine sessions carried from clone to clone on one pull request: the files a run folder
keeps (node/sessions.py), the run program's part (run/sessions.py) and serve's
(serve/sessions.py). The real engines resume them in tests/run/test_program.py and the engine
suites; a whole chain of clones through serve is in tests/cli/test_clone_e2e.py."""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from shadowclone import files
from shadowclone.config.paths import Paths
from shadowclone.errors import MalformedFile
from shadowclone.node import schemas
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Record, Request, SavedSession, State
from shadowclone.node.sessions import MANIFEST, copy_session, read_session, write_session
from shadowclone.node.target import Target
from shadowclone.plugin.manager import load_registry
from shadowclone.plugin.types import EngineTask
from shadowclone.run.github.models import Issue, Repository, User
from shadowclone.run.identity import EngineIdentity
from shadowclone.run.plan import Mode, Plan
from shadowclone.run.sessions import Sessions
from shadowclone.serve import sessions as serve_sessions
from shadowclone_testing.scripted import transcript_name

SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
SESSION = "scripted-0123456789ab"

part = st.text(alphabet="abcXYZ019_-.", min_size=1, max_size=12).filter(
    lambda p: not p.startswith(".")
)
names = st.lists(part, min_size=1, max_size=4).map("/".join)


@given(
    contents=st.lists(st.tuples(names, st.binary(max_size=300)), max_size=5),
    session_id=st.from_regex(schemas.SESSION_ID, fullmatch=True),
)
def test_a_kept_session_reads_back_as_written(
    tmp_path_factory: pytest.TempPathFactory,
    contents: list[tuple[str, bytes]],
    session_id: str,
) -> None:
    folder = tmp_path_factory.mktemp("run") / "session"
    session = SavedSession("claude", "claude-api-key", session_id, tuple(n for n, _ in contents))
    write_session(folder, session, [data for _, data in contents])
    assert read_session(folder) == (session, [data for _, data in contents])
    # Written again, it replaces the first, whole.
    write_session(folder, attrs.evolve(session, names=()), [])
    assert read_session(folder) == (attrs.evolve(session, names=()), [])
    assert sorted(p.name for p in folder.parent.iterdir()) == ["session"]


@pytest.mark.parametrize(
    "name", ["../secrets.toml", "/etc/passwd", "a/../../b", "..", "a//b", "", "a/./b", "a b"]
)
def test_a_name_outside_the_state_folder_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="not a plain path"):
        SavedSession("claude", "claude-api-key", SESSION, (name,))
    manifest = {"engine": "claude", "login": "x", "session_id": SESSION, "names": [name], "v": 1}
    (tmp_path / MANIFEST).write_bytes(schemas.dumps(manifest))
    (tmp_path / "file-0").write_text("x")
    with pytest.raises(MalformedFile):
        read_session(tmp_path)


def test_a_session_file_that_is_a_link_or_missing_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "session"
    write_session(folder, SavedSession("claude", "l", SESSION, ("a", "b")), [b"1", b"2"])
    (folder / "file-1").unlink()
    with pytest.raises(MalformedFile, match="file-1 of the session is missing"):
        read_session(folder)
    (tmp_path / "secret").write_text("the owner's secret")
    (folder / "file-1").symlink_to(tmp_path / "secret")
    with pytest.raises(MalformedFile, match="symbolic link"):
        read_session(folder)
    folder.rename(tmp_path / "real")
    folder.symlink_to(tmp_path / "real")
    with pytest.raises(MalformedFile):
        copy_session(folder, tmp_path / "given", "c-1")


@given(link_at=st.integers(min_value=0, max_value=2))
def test_nothing_is_read_or_written_through_a_link_in_the_state_folder(
    tmp_path_factory: pytest.TempPathFactory, link_at: int
) -> None:
    """The engine writes its state folder: a link at any depth of a session file's path
    (made to reach the secrets, say) is never followed, either way."""
    root = tmp_path_factory.mktemp("state")
    outside = tmp_path_factory.mktemp("outside")
    (outside / "c").write_text("outside")
    parts = ["a", "b", "c"]
    real = root.joinpath(*parts[:link_at])
    real.mkdir(parents=True, exist_ok=True)
    (real / parts[link_at]).symlink_to(outside / "c" if link_at == 2 else outside)
    with pytest.raises(MalformedFile):
        files.read_beneath(root, "a/b/c", 1000)
    with pytest.raises(MalformedFile):
        files.write_beneath(root, "a/b/c", b"planted")
    assert (outside / "c").read_text() == "outside"
    assert sorted(os.listdir(outside)) == ["c"]


# ---------------------------------------------------------------- the run program's part


def request(number: int = 2, engine: str = "scripted", login: str = "no-login") -> Request:
    return Request(
        id="251205-120000-aaaa",
        target=Target("owner", "app", number),
        engine=engine,
        login=login,
        launcher="fake",
        image="unused",
        github_url="http://github.test",
        github_api_url="http://github.test/api/v3",
    )


def plan(mode: Mode = Mode.CONTINUE, stranger: str | None = None) -> Plan:
    repository = Repository("owner/app", True, "private", "main", "admin", "http://x/app.git")
    issue = Issue("owner/app", 2, "Feature", "", "owner", "open", "http://x", True)
    return Plan(mode, repository, issue, User("owner", None, None), None, "f", stranger)


def task(tmp_path: Path, name: str) -> EngineTask:
    state = tmp_path / f"state-{name}"
    state.mkdir()
    return EngineTask(
        workspace=tmp_path / f"workspace-{name}",
        prompt="",
        ask_command=(),
        env={},
        state_dir=state,
    )


def sessions_of(folder: RunFolder, asked: Request) -> Sessions:
    return Sessions(
        folder, asked, load_registry(), EngineIdentity(), lambda t: t.replace(SECRET, "***")
    )


def test_the_working_session_is_kept_redacted_and_given_back(tmp_path: Path) -> None:
    earlier = RunFolder(tmp_path / "earlier")
    earlier.path.mkdir()
    first = task(tmp_path, "first")
    transcript = first.state_dir / transcript_name(SESSION)
    transcript.parent.mkdir()
    transcript.write_text(f"owner/app#1: the task\nthe engine printed {SECRET}\n")
    said = sessions_of(earlier, request()).keep(plan(Mode.ISSUE), first, SESSION)
    assert said.endswith("is kept for the next clone on the pull request")
    _, [content] = read_session(earlier.saved_session_dir)
    assert SECRET.encode() not in content and b"the engine printed ***" in content

    later = RunFolder(tmp_path / "later")
    later.path.mkdir()
    copy_session(earlier.saved_session_dir, later.given_session_dir, "251205-110000-bbbb")
    carrier = sessions_of(later, request())
    given_session = carrier.given(plan())
    assert given_session is not None and given_session[0].clone_id == "251205-110000-bbbb"
    second = task(tmp_path, "second")
    resumed = carrier.restore(second, given_session)
    assert resumed.resume == SESSION
    assert (second.state_dir / transcript_name(SESSION)).read_bytes() == content


@pytest.mark.parametrize(
    ("mode", "stranger", "engine", "login"),
    [
        (Mode.REVIEW, None, "scripted", "no-login"),
        (Mode.ISSUE, None, "scripted", "no-login"),
        (Mode.CONTINUE, "mallory", "scripted", "no-login"),
        (Mode.CONTINUE, None, "scripted", "another-login"),
        (Mode.CONTINUE, None, "claude", "claude-api-key"),
    ],
)
def test_a_session_is_given_only_to_the_owners_pull_request_on_the_same_engine_and_login(
    tmp_path: Path, mode: Mode, stranger: str | None, engine: str, login: str
) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.path.mkdir()
    saved = SavedSession("scripted", "no-login", SESSION, ("scripted/x.txt",), clone_id="c")
    write_session(folder.given_session_dir, saved, [b"earlier\n"])
    assert (
        sessions_of(folder, request(engine=engine, login=login)).given(plan(mode, stranger)) is None
    )
    assert sessions_of(folder, request()).given(plan()) is not None


def test_no_session_is_kept_of_a_review_or_a_strangers_issue(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.path.mkdir()
    first = task(tmp_path, "first")
    (first.state_dir / "scripted").mkdir()
    (first.state_dir / transcript_name(SESSION)).write_text("x\n")
    carrier = sessions_of(folder, request())
    assert carrier.keep(plan(Mode.REVIEW), first, SESSION) == ""
    assert carrier.keep(plan(Mode.ISSUE, "mallory"), first, SESSION) == ""
    assert not folder.saved_session_dir.exists()


# ---------------------------------------------------------------- serve's part


def paths(tmp_path: Path) -> Paths:
    return Paths(tmp_path / "config.toml", tmp_path / "secrets.toml", tmp_path / "clones", tmp_path)


def clone(home: Paths, clone_id: str, asked: Request, kept: bool) -> RunFolder:
    folder = RunFolder(home.clones_dir / clone_id)
    folder.path.mkdir(parents=True)
    folder.write_request(attrs.evolve(asked, id=clone_id))
    if kept:
        saved = SavedSession(asked.engine, asked.login, SESSION, ("scripted/x.txt",))
        write_session(folder.saved_session_dir, saved, [b"earlier\n"])
    return folder


def ended(pr_url: str | None) -> Record:
    return Record(id="x", state=State.DONE, pr_url=pr_url)


def test_serve_gives_the_next_clone_on_the_pull_request_the_last_kept_session(
    tmp_path: Path,
) -> None:
    home = paths(tmp_path)
    on_issue = request(number=1)
    first = clone(home, "251205-100000-aaaa", on_issue, kept=True)
    serve_sessions.remember(home, first, on_issue, ended("http://github.test/Owner/APP/pull/2"))
    second = clone(home, "251205-110000-aaaa", request(), kept=False)
    assert serve_sessions.give(home, second, request()) == first.id
    assert read_session(second.given_session_dir)[0].clone_id == first.id
    # Another engine or login, the clone itself, or the earlier clone removed: none given.
    other = clone(home, "251205-120000-aaaa", request(login="another"), kept=False)
    assert serve_sessions.give(home, other, request(login="another")) is None
    assert not other.given_session_dir.exists()
    assert serve_sessions.give(home, first, request()) is None
    files.remove(first.saved_session_dir / MANIFEST)
    assert (
        serve_sessions.give(home, clone(home, "251205-130000-aaaa", request(), False), request())
        is None
    )


@pytest.mark.parametrize(
    "pr_url",
    [
        None,
        "http://github.test/owner/other/pull/2",
        "http://elsewhere.test/owner/app/pull/2",
        "http://github.test/owner/app/issues/2",
        "javascript:alert(1)",
        "",
    ],
)
def test_serve_points_only_at_a_pull_request_of_the_clones_own_repository(
    tmp_path: Path, pr_url: str | None
) -> None:
    home = paths(tmp_path)
    first = clone(home, "251205-100000-aaaa", request(number=1), kept=True)
    serve_sessions.remember(home, first, request(number=1), ended(pr_url))
    assert not home.sessions_dir.exists() or not os.listdir(home.sessions_dir)


def test_a_clone_that_kept_nothing_leaves_the_pointer_as_it_was(tmp_path: Path) -> None:
    home = paths(tmp_path)
    first = clone(home, "251205-100000-aaaa", request(), kept=True)
    serve_sessions.remember(home, first, request(), ended("http://github.test/owner/app/pull/2"))
    second = clone(home, "251205-110000-aaaa", request(), kept=False)
    serve_sessions.remember(home, second, request(), ended("http://github.test/owner/app/pull/2"))
    third = clone(home, "251205-120000-aaaa", request(), kept=False)
    assert serve_sessions.give(home, third, request()) == first.id
