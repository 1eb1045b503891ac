"""Where the workspace's clone starts from before GitHub has named the repository, and how
it is shared with the engine."""

from __future__ import annotations

import os
import stat
import tempfile
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shadowclone.contract import (
    ENGINE_USER_VARIABLE,
    RUN_FOLDER_VARIABLE,
    SECRETS_VARIABLE,
    SHARED_GROUP_VARIABLE,
    SHARED_UMASK,
)
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Request
from shadowclone.node.target import Target
from shadowclone.run.cloning import clone_url_for
from shadowclone.run.github import GithubClient
from shadowclone.run.headstart import HeadStart
from shadowclone.run.identity import engine_identity
from shadowclone.run.plan import resolve
from shadowclone.run.workspace import clone, prepare
from shadowclone_testing.fakes.github import FakeGitHub

NAME = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)
HOST = st.from_regex(
    r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z]{2,6}){0,2}(:[1-9][0-9]{0,4})?", fullmatch=True
)


@given(
    scheme=st.sampled_from(["http", "https"]),
    host=HOST,
    prefix=st.sampled_from(["", "/", "/github", "/github/"]),
    owner=NAME,
    repo=NAME,
)
def test_an_http_github_gives_the_repository_under_its_own_host(
    scheme: str, host: str, prefix: str, owner: str, repo: str
) -> None:
    url = f"{scheme}://{host}{prefix}"
    guess = clone_url_for(url, f"{owner}/{repo}")
    assert guess is not None
    parts = urllib.parse.urlsplit(guess)
    assert (parts.scheme, parts.netloc) == (scheme, host)  # the token goes nowhere else
    assert parts.path == f"{prefix.rstrip('/')}/{owner}/{repo}.git"


@given(
    url=st.one_of(
        st.sampled_from(
            [
                "",
                "/srv/git",
                "file:///srv/git",
                "ssh://github.com",
                "git://github.com",
                "ext::sh -c touch% /tmp/x",
                "-u",
                "http://",
                "https:///path",
                "github.com",
            ]
        ),
        st.text(max_size=30).filter(lambda text: not text.startswith(("http://", "https://"))),
        st.text(max_size=30).map(lambda text: f" https://github.com{text}"),
        st.text(min_size=1, max_size=30)
        .filter(lambda text: any(not char.isprintable() or char.isspace() for char in text))
        .map(lambda text: f"https://github.com/{text}"),
    )
)
def test_anything_but_an_http_github_gives_no_guess(url: str) -> None:
    """git would take a path, another transport or an option: the clone waits for GitHub's
    own address instead."""
    assert clone_url_for(url, "owner/app") is None


ENGINE_USER, SHARED_GROUP = "4242:4242", 4243
FILES = st.dictionaries(
    st.from_regex(r"[a-z]{1,6}(/[a-z]{1,6}){0,3}\.txt", fullmatch=True),
    st.text(max_size=40),
    min_size=1,
    max_size=6,
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeGitHub, str]]:
    """A fake GitHub and its owner's token."""
    with FakeGitHub(tmp_path_factory.mktemp("github")) as github:
        yield github, github.add_user("owner", name="The Owner")


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


@pytest.mark.skipif(
    os.geteuid() != 0, reason="a workspace shared with another group needs root (CI is root)"
)
@pytest.mark.parametrize("head_start", [True, False], ids=["head-start", "run-program"])
@settings(max_examples=8, deadline=None)
@given(files=FILES)
def test_the_workspace_is_shared_with_the_engine_as_it_is_made(
    served: tuple[FakeGitHub, str], head_start: bool, files: dict[str, str]
) -> None:
    """No walk over the work tree after the clone: its folder is shared before git runs, and
    what git makes there (any tree, its own files too) is shared as it is made."""
    github, token = served
    repo = f"owner/r{len(github.state.repos)}"
    github.create_repo(repo, files=files)
    number = github.create_issue(repo, author="owner", title="Share it")
    with tempfile.TemporaryDirectory() as temp:
        run = Path(temp) / "run"
        run.mkdir()
        run.chmod(0o755)
        secrets = Path(temp) / "secrets.toml"
        secrets.write_text(f'github_token = "{token}"\n')
        target = Target("owner", repo.removeprefix("owner/"), number)
        RunFolder(run).write_request(
            Request(
                id="clone-1",
                target=target,
                engine="claude",
                login="claude-api-key",
                launcher="fake",
                image="unused",
                github_url=github.url,
                github_api_url=github.api_url,
            )
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
            if head_start:
                head = HeadStart.begin(environ)
                assert head is not None
                try:
                    workspace = head.prepared.result(timeout=60)
                finally:
                    head.close()
                assert workspace is not None
            else:
                identity = engine_identity(environ)
                with GithubClient(token, api_url=github.api_url) as client:
                    plan = resolve(client, target)
                path = run / "workspace"
                clone(path, plan.repository.clone_url, token, identity)
                workspace = prepare(path, plan, token, run / "private", identity)
        finally:
            os.umask(umask)
        assert_shared(workspace.path)
        for name, text in files.items():
            assert (workspace.path / name).read_bytes() == text.encode()
