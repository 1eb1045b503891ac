"""The entry point's head start (run/headstart.py): it reads only plain first-launch requests,
what it reads is the request the run program parses, and what nobody takes is ended."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shadowclone.contract import ENGINE_USER_VARIABLE, SHARED_GROUP_VARIABLE, SHARED_UMASK
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Handoff, Request, Resume, RunMode, dumps
from shadowclone.node.target import Target
from shadowclone.plugin.contract import RUN_FOLDER_VARIABLE, SECRETS_VARIABLE
from shadowclone.plugin.types import NetworkMode
from shadowclone.run.github import GithubClient
from shadowclone.run.headstart import HeadStart, _plain_request
from shadowclone.run.identity import EngineIdentity, engine_identity
from shadowclone.run.plan import resolve
from shadowclone.run.workspace import Workspace, clone, prepare
from shadowclone_testing.fakes.github import FakeGitHub

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)
NAMES = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)
TARGETS = st.builds(
    Target, NAMES, NAMES, st.integers(1, 10**9), st.sampled_from([None, "issue", "pull"])
)


def request_for(target: Target, **changes: Any) -> Request:
    fields: dict[str, Any] = {
        "id": "clone-1",
        "target": target,
        "engine": "claude",
        "login": "claude-api-key",
        "launcher": "fake",
        "image": "unused",
        "github_url": "http://127.0.0.1:9",
        "github_api_url": "http://127.0.0.1:9/api/v3",
    }
    return Request(**{**fields, **changes})


@given(JSON)
def test_any_json_is_a_plain_request_or_none(value: object) -> None:
    read = _plain_request(value)
    if read is not None:
        (owner, repo, number, kind), github_url, api_url = read
        assert isinstance(owner, str) and isinstance(repo, str) and type(number) is int
        assert kind is None or isinstance(kind, str)
        assert isinstance(github_url, str) and isinstance(api_url, str)


@given(TARGETS, st.text(), st.text())
def test_what_it_reads_is_the_request_the_run_program_parses(
    target: Target, github_url: str, api_url: str
) -> None:
    request = request_for(target, github_url=github_url, github_api_url=api_url)
    raw = json.loads(dumps(request))
    assert _plain_request(raw) == (
        (target.owner, target.repo, target.number, target.kind),
        github_url,
        api_url,
    )
    assert _plain_request({**raw, "mode": RunMode.CHECK.value}) is None


@pytest.fixture
def folder(tmp_path: Path) -> RunFolder:
    folder = RunFolder(tmp_path / "run")
    folder.path.mkdir()
    folder.write_request(request_for(Target("owner", "app", 1)))
    return folder


@pytest.fixture
def environ(tmp_path: Path, folder: RunFolder) -> dict[str, str]:
    secrets = tmp_path / "secrets.toml"
    secrets.write_text('github_token = "ghp_headstart"\n')
    return {
        key: value
        for key, value in {
            **os.environ,
            RUN_FOLDER_VARIABLE: str(folder.path),
            SECRETS_VARIABLE: str(secrets),
        }.items()
        if not key.startswith("SHADOWCLONE_ENGINE") and not key.startswith("SHADOWCLONE_SHARED")
    }


@pytest.fixture
def silent_github() -> Iterator[str]:
    """An address that takes connections and never answers: git and the reads wait on it."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_a_relaunch_a_check_and_unreadable_files_get_no_head_start(
    tmp_path: Path, folder: RunFolder, environ: dict[str, str]
) -> None:
    secrets = Path(environ[SECRETS_VARIABLE])
    folder.write_handoff(Handoff(NetworkMode.MODEL_ONLY, Resume.ENGINE))
    assert HeadStart.begin(environ) is None
    folder.handoff_file.unlink()

    folder.write_request(request_for(Target("owner", "app", 1), mode=RunMode.CHECK))
    assert HeadStart.begin(environ) is None

    for bad in (b"", b"{", b"\xff\xfe", b"[]", b'{"target": "owner/app#1"}'):
        folder.request_file.write_bytes(bad)
        assert HeadStart.begin(environ) is None
    folder.request_file.unlink()
    os.mkfifo(folder.request_file)  # never opened for reading: it would wait for a writer
    assert HeadStart.begin(environ) is None
    folder.request_file.unlink()

    folder.write_request(request_for(Target("owner", "app", 1), github_url="/srv/git"))
    for text in ('github_token = ""\n', "github_token = 1\n", "not toml\n", 'other = "x"\n'):
        secrets.write_text(text)
        assert HeadStart.begin(environ) is None
    secrets.unlink()
    assert HeadStart.begin(environ) is None


def test_what_nobody_takes_is_ended(
    folder: RunFolder, environ: dict[str, str], silent_github: str
) -> None:
    """A head start whose clone and reads wait on a GitHub that never answers: closing it kills
    git and the helper it started, and closes the reads' client."""
    folder.write_request(
        request_for(
            Target("owner", "app", 1),
            github_url=silent_github,
            github_api_url=f"{silent_github}/api/v3",
        )
    )
    head = HeadStart.begin(environ)
    assert head is not None and head.guess == f"{silent_github}/owner/app.git"
    cloning = head.cloning
    assert cloning is not None and cloning.poll() is None
    assert head.workspace == folder.path / "workspace"
    deadline = time.monotonic() + 10
    while not psutil.Process(cloning.pid).children() and time.monotonic() < deadline:
        time.sleep(0.01)  # until git started its HTTP helper, which holds the pipes too
    git = psutil.Process(cloning.pid)
    helpers = git.children(recursive=True)
    assert helpers
    head.close()
    assert not [process for process in (git, *helpers) if running(process)]
    assert head.take_client() is None  # closed
    assert head.cloned.exception(timeout=10) is not None  # git was killed


def test_a_head_start_closed_before_its_reads_end_prepares_nothing(
    tmp_path: Path, folder: RunFolder, environ: dict[str, str]
) -> None:
    with FakeGitHub(tmp_path / "github") as github:
        token = github.add_user("owner", name="The Owner")
        github.create_repo("owner/app", files={"README.md": "# app\n"})
        number = github.create_issue("owner/app", author="owner", title="Late")
        Path(environ[SECRETS_VARIABLE]).write_text(f'github_token = "{token}"\n')
        folder.write_request(
            request_for(
                Target("owner", "app", number),
                github_url=github.url,
                github_api_url=github.api_url,
            )
        )
        github.latency_s = 0.5
        head = HeadStart.begin(environ)
        assert head is not None
        head.close()
        assert head.prepared.result(timeout=30) is None
    assert not (folder.path / "private").exists()


def running(process: psutil.Process, wait_s: float = 5.0) -> bool:
    """Whether `process` still runs after `wait_s` (killed, it is gone or a zombie soon)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            return False
        time.sleep(0.01)
    return True


def test_it_is_taken_only_for_what_it_read(folder: RunFolder, environ: dict[str, str]) -> None:
    folder.write_request(request_for(Target("owner", "app", 1), github_url="/srv/git"))
    head = HeadStart.begin(environ)
    assert head is not None and head.guess is None and head.cloning is None
    try:
        same = (Target("owner", "app", 1), "http://127.0.0.1:9/api/v3", "ghp_headstart", None)
        places = (folder.path / "workspace", folder.path / "private")
        identity = EngineIdentity()
        assert head.identity == identity
        assert head.matches(*same, places, identity)
        assert not head.matches(Target("owner", "app", 2), *same[1:], places, identity)
        assert not head.matches(same[0], "http://127.0.0.1:9/api", *same[2:], places, identity)
        assert not head.matches(*same[:2], "ghp_other", None, places, identity)
        guessed = "http://127.0.0.1:9/owner/app.git"
        assert not head.matches(*same[:3], guessed, places, identity)
        assert not head.matches(*same, (folder.path / "elsewhere", places[1]), identity)
        assert not head.matches(*same, (places[0], folder.path / "elsewhere"), identity)
        assert not head.matches(*same, places, EngineIdentity(4242, 4242, 4243, "setpriv"))
    finally:
        head.close()


ENGINE_USER, SHARED_GROUP = "4242:4242", 4243
FILES = st.dictionaries(
    st.from_regex(r"[a-z]{1,6}(/[a-z]{1,6}){0,3}\.txt", fullmatch=True),
    st.text(max_size=40),
    min_size=1,
    max_size=6,
)
AS_ROOT = pytest.mark.skipif(
    os.geteuid() != 0, reason="a workspace shared with another group needs root (CI is root)"
)
BOTH_WAYS = pytest.mark.parametrize("head_start", [True, False], ids=["head-start", "run-program"])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeGitHub, str]]:
    """A fake GitHub and its owner's token."""
    with FakeGitHub(tmp_path_factory.mktemp("github")) as github:
        yield github, github.add_user("owner", name="The Owner")


def prepared(served: tuple[FakeGitHub, str], files: dict[str, str], head_start: bool) -> Path:
    """A repository of `files` on the fake GitHub, cloned and prepared for an issue with an
    isolated engine identity, by the head start or by the run program's own steps; the work
    tree is checked against `files` and returned (in a folder the caller removes)."""
    github, token = served
    repo = f"r{len(github.state.repos)}"
    github.create_repo(f"owner/{repo}", files=files)
    target = Target("owner", repo, github.create_issue(f"owner/{repo}", author="owner", title="X"))
    run = Path(tempfile.mkdtemp()) / "run"
    run.mkdir()
    secrets = run.parent / "secrets.toml"
    secrets.write_text(f'github_token = "{token}"\n')
    RunFolder(run).write_request(
        request_for(target, github_url=github.url, github_api_url=github.api_url)
    )
    environ = {
        **os.environ,
        RUN_FOLDER_VARIABLE: str(run),
        SECRETS_VARIABLE: str(secrets),
        ENGINE_USER_VARIABLE: ENGINE_USER,
        SHARED_GROUP_VARIABLE: str(SHARED_GROUP),
    }
    umask = os.umask(SHARED_UMASK)  # as the run program sets it (the head start too)
    try:
        workspace: Workspace | None
        if head_start:
            head = HeadStart.begin(environ)
            assert head is not None
            try:
                workspace = head.prepared.result(timeout=60)
            finally:
                head.close()
        else:
            identity = engine_identity(environ)
            with GithubClient(token, api_url=github.api_url) as client:
                plan = resolve(client, target)
            clone(run / "workspace", plan.repository.clone_url, token, identity)
            workspace = prepare(run / "workspace", plan, token, run / "private", identity)
    finally:
        os.umask(umask)
    assert workspace is not None and workspace.path == run / "workspace"
    for name, text in files.items():
        assert (workspace.path / name).read_bytes() == text.encode()
    return workspace.path


def assert_shared(workspace: Path) -> None:
    """What the engine may need to change it can: every entry the run program made is in the
    shared group with at least the owner's rights, and every folder passes the group on."""
    for root, dirs, names in os.walk(workspace):
        for entry in (Path(root), *(Path(root) / name for name in (*dirs, *names))):
            info = entry.lstat()
            if stat.S_ISLNK(info.st_mode):
                continue
            mode = stat.S_IMODE(info.st_mode)
            assert info.st_gid == SHARED_GROUP, f"{entry}: group {info.st_gid}"
            owner, group = mode >> 6 & 7, mode >> 3 & 7
            assert group & owner == owner, f"{entry}: mode {mode:o}"
            if stat.S_ISDIR(info.st_mode):
                assert mode & stat.S_ISGID, f"{entry}: mode {mode:o}"


@AS_ROOT
@BOTH_WAYS
@settings(max_examples=8, deadline=None)
@given(files=FILES)
def test_the_workspace_is_shared_with_the_engine_as_it_is_made(
    served: tuple[FakeGitHub, str], head_start: bool, files: dict[str, str]
) -> None:
    """No walk over the work tree after the clone: its folder is shared before git runs, and
    what git makes there (any tree, its own files too) is shared as it is made."""
    workspace = prepared(served, files, head_start)
    try:
        assert_shared(workspace)
    finally:
        shutil.rmtree(workspace.parent.parent)


@AS_ROOT
@BOTH_WAYS
def test_a_large_checkout_runs_on_every_cpu_and_stays_shared(
    served: tuple[FakeGitHub, str], head_start: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From 100 files on git checks out in worker processes (one per CPU); what they write is
    complete and shared too."""
    trace = Path(tempfile.mkdtemp()) / "trace.json"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))  # git's own account of its children
    files = {f"src/m{n % 7}/f{n}.txt": f"{n}\n" for n in range(150)}
    workspace = prepared(served, files, head_start)
    try:
        assert_shared(workspace)
        if (os.cpu_count() or 1) > 1:  # one CPU: git checks out alone, as it should
            assert "checkout--worker" in trace.read_text()
    finally:
        shutil.rmtree(workspace.parent.parent)
        shutil.rmtree(trace.parent)
