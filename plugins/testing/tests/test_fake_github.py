"""The fake GitHub over real HTTP: REST through PyGithub and by hand, tokens, visibility, the
request log, a restart on the same folder, and git clone and push with the real `git`."""

from __future__ import annotations

import base64
import http.client
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import github
import github.Auth
import pytest
from shadowclone_testing.fakes.github import FakeGitHub


@attrs.frozen
class World:
    """A fake GitHub with an owner, a collaborator, a stranger and one private repository."""

    gh: FakeGitHub
    owner: str
    mate: str
    stranger: str
    repo: str = "octo/app"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with FakeGitHub(tmp_path / "github") as gh:
        owner = gh.add_user("octo", name="Octo Cat", email="octo@example.com")
        mate = gh.add_user("mate")
        stranger = gh.add_user("stranger")
        gh.create_repo("octo/app", files={"app.py": "print('app')\n", "README.md": "# app\n"})
        gh.grant("octo/app", "mate", "write")
        yield World(gh, owner, mate, stranger)


def client(world: World, token: str, gh: FakeGitHub | None = None) -> github.Github:
    # PyGithub spaces requests out for GitHub's rate limits; the fake has none.
    return github.Github(
        base_url=(gh or world.gh).api_url,
        auth=github.Auth.Token(token),
        seconds_between_requests=None,
        seconds_between_writes=None,
    )


def request(
    gh: FakeGitHub,
    method: str,
    path: str,
    *,
    token: str | None = None,
    body: object = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any, dict[str, str]]:
    """One plain HTTP request: status, decoded JSON (or text) body, headers."""
    connection = http.client.HTTPConnection("127.0.0.1", gh.port, timeout=30)
    try:
        all_headers = dict(headers or {})
        if token is not None:
            all_headers["Authorization"] = f"token {token}"
        if body is not None:  # as GitHub's clients send it
            all_headers.setdefault("Content-Type", "application/json")
        connection.request(
            method,
            path,
            body=None if body is None else json.dumps(body),
            headers=all_headers,
        )
        response = connection.getresponse()
        raw = response.read()
        content_type = response.getheader("Content-Type", "")
        payload = json.loads(raw) if "json" in content_type else raw.decode()
        return response.status, payload, dict(response.getheaders())
    finally:
        connection.close()


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The real git, with no global config and never a password prompt."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "Tester",
        "GIT_AUTHOR_EMAIL": "tester@example.com",
        "GIT_COMMITTER_NAME": "Tester",
        "GIT_COMMITTER_EMAIL": "tester@example.com",
    }
    result = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed:\n{result.stderr}")
    return result


def authed_url(gh: FakeGitHub, repo: str, token: str) -> str:
    return gh.clone_url(repo).replace("http://", f"http://x-access-token:{token}@")


def clone(world: World, token: str, dest: Path) -> Path:
    git(dest.parent, "clone", "--quiet", authed_url(world.gh, world.repo, token), dest.name)
    return dest


def commit(checkout: Path, file: str, content: str) -> str:
    (checkout / file).write_text(content)
    git(checkout, "add", file)
    git(checkout, "commit", "--quiet", "-m", f"change {file}")
    return git(checkout, "rev-parse", "HEAD").stdout.strip()


# ----------------------------------------------------------------------------- REST


def test_pygithub_reads_user_repository_and_permissions(world: World) -> None:
    gh = client(world, world.owner)
    me = gh.get_user()
    assert (me.login, me.name, me.email) == ("octo", "Octo Cat", "octo@example.com")

    repo = gh.get_repo(world.repo)
    assert repo.full_name == "octo/app"
    assert repo.private is True
    assert repo.visibility == "private"
    assert repo.default_branch == "main"
    assert repo.permissions.admin is True
    assert repo.permissions.push is True
    assert repo.get_collaborator_permission("mate") == "write"
    assert repo.get_collaborator_permission("stranger") == "none"
    assert repo.get_branch("main").protected is False
    world.gh.protect_branch(world.repo, "main")
    assert repo.get_branch("main").protected is True

    mate_view = client(world, world.mate).get_repo(world.repo)
    assert (mate_view.permissions.admin, mate_view.permissions.push) == (False, True)


def test_issues_and_pull_requests_share_numbers(world: World) -> None:
    gh = world.gh
    issue_number = gh.create_issue(world.repo, author="octo", title="Greet", body="Say hi.")
    pull_number = gh.create_pull_request(
        world.repo,
        author="mate",
        branch="mate/greet",
        title="Greet everyone",
        body="Closes #1",
        files={"greet.py": "print('hi')\n"},
    )
    assert (issue_number, pull_number) == (1, 2)

    repo = client(world, world.owner).get_repo(world.repo)
    issue = repo.get_issue(issue_number)
    assert (issue.title, issue.body, issue.user.login) == ("Greet", "Say hi.", "octo")
    assert issue.pull_request is None
    assert repo.get_issue(pull_number).pull_request is not None

    pull = repo.get_pull(pull_number)
    assert pull.head.ref == "mate/greet"
    assert pull.head.repo.full_name == "octo/app"
    assert pull.head.sha == gh.branch_sha(world.repo, "mate/greet")
    assert pull.base.ref == "main"
    assert pull.user.login == "mate"
    assert pull.state == "open"
    assert pull.html_url == f"{gh.url}/octo/app/pull/2"
    assert gh.read_file(world.repo, "mate/greet", "greet.py") == "print('hi')\n"

    with pytest.raises(github.UnknownObjectException):
        repo.get_pull(issue_number)


def test_open_find_update_and_comment_on_a_pull_request(world: World, tmp_path: Path) -> None:
    checkout = clone(world, world.owner, tmp_path / "app")
    git(checkout, "checkout", "--quiet", "-b", "feature")
    commit(checkout, "feature.txt", "new\n")
    git(checkout, "push", "--quiet", "origin", "feature")

    repo = client(world, world.owner).get_repo(world.repo)
    created = repo.create_pull(base="main", head="feature", title="Feature", body="Closes #9")
    assert created.number == 1
    assert created.head.ref == "feature"

    with pytest.raises(github.GithubException) as refused:
        repo.create_pull(base="main", head="octo:feature", title="Again", body="")
    assert refused.value.status == 422
    assert "A pull request already exists for octo:feature." in json.dumps(refused.value.data)

    assert [p.number for p in repo.get_pulls(state="open", head="octo:feature")] == [1]
    assert list(repo.get_pulls(state="open", head="octo:other")) == []
    assert list(repo.get_pulls(state="open", head="someone:feature")) == []

    created.edit(body="Closes #9\n\nDone.")
    assert repo.get_pull(1).body == "Closes #9\n\nDone."
    assert world.gh.issue(world.repo, 1).body == "Closes #9\n\nDone."

    repo.get_issue(1).create_comment("Report: all good")
    assert [(c.author, c.body) for c in world.gh.comments(world.repo, 1)] == [
        ("octo", "Report: all good")
    ]
    assert [c.body for c in repo.get_issue(1).get_comments()] == ["Report: all good"]

    created.edit(state="closed")
    assert list(repo.get_pulls(state="open", head="octo:feature")) == []
    assert [p.number for p in repo.get_pulls(state="closed")] == [1]


def test_a_pull_request_needs_commits_and_an_existing_head(world: World) -> None:
    status, body, _ = request(
        world.gh,
        "POST",
        "/api/v3/repos/octo/app/pulls",
        token=world.owner,
        body={"title": "Nothing", "head": "main", "base": "main"},
    )
    assert status == 422
    assert body["errors"][0]["message"] == "No commits between main and octo:main"
    status, body, _ = request(
        world.gh,
        "POST",
        "/api/v3/repos/octo/app/pulls",
        token=world.owner,
        body={"title": "Nothing", "head": "missing", "base": "main"},
    )
    assert status == 422
    assert body["errors"] == [{"resource": "PullRequest", "field": "head", "code": "invalid"}]
    assert world.gh.pull_requests(world.repo) == []


def test_a_strangers_pull_request_comes_from_a_fork(world: World, tmp_path: Path) -> None:
    gh = world.gh
    gh.set_visibility(world.repo, private=False)
    number = gh.create_pull_request(
        world.repo,
        author="stranger",
        branch="patch-1",
        title="Drive-by",
        files={"tests.sh": "touch pwned\n"},
        fork=True,
    )
    pull = client(world, world.owner).get_repo(world.repo).get_pull(number)
    assert pull.head.repo.full_name == "stranger/app"
    assert pull.head.label == "stranger:patch-1"
    assert gh.branch_sha(world.repo, "patch-1") is None

    # The base repository serves the fork's commits as pull/N/head, kept up to date on push.
    checkout = clone(world, world.owner, tmp_path / "app")
    git(checkout, "fetch", "--quiet", "origin", f"pull/{number}/head")
    assert git(checkout, "show", "FETCH_HEAD:tests.sh").stdout == "touch pwned\n"

    fork = tmp_path / "fork"
    git(tmp_path, "clone", "--quiet", authed_url(gh, "stranger/app", world.stranger), "fork")
    git(fork, "checkout", "--quiet", "patch-1")
    pushed = commit(fork, "more.txt", "more\n")
    git(fork, "push", "--quiet", "origin", "patch-1")
    git(checkout, "fetch", "--quiet", "origin", f"pull/{number}/head")
    assert git(checkout, "rev-parse", "FETCH_HEAD").stdout.strip() == pushed


def test_errors_come_as_github_sends_them(world: World) -> None:
    gh = world.gh
    status, body, _ = request(gh, "GET", "/api/v3/repos/octo/missing", token=world.owner)
    assert status == 404
    assert body["message"] == "Not Found"

    status, body, _ = request(gh, "GET", "/api/v3/repos/octo/app", token="ghp_wrong")
    assert (status, body["message"]) == (401, "Bad credentials")

    status, body, _ = request(gh, "GET", "/api/v3/user")
    assert (status, body["message"]) == (401, "Requires authentication")

    gh.create_issue(world.repo, author="octo", title="Issue")
    status, body, _ = request(
        gh, "POST", "/api/v3/repos/octo/app/issues/1/comments", body={"body": "hi"}
    )
    assert status == 401  # anonymous writes are refused even where reads are not

    gh.grant(world.repo, "stranger", "read")
    number = gh.create_pull_request(world.repo, author="mate", branch="b", title="PR")
    status, body, _ = request(
        gh,
        "PATCH",
        f"/api/v3/repos/octo/app/pulls/{number}",
        token=world.stranger,
        body={"body": "mine now"},
    )
    assert status == 403
    assert gh.issue(world.repo, number).body == ""

    with pytest.raises(github.BadCredentialsException):
        client(world, "ghp_wrong").get_repo(world.repo)


def test_visibility_decides_who_sees_a_repository(world: World) -> None:
    gh = world.gh
    gh.create_issue(world.repo, author="octo", title="Secret plans")
    for token in (world.stranger, None):
        status, _, _ = request(gh, "GET", "/api/v3/repos/octo/app/issues/1", token=token)
        assert status == 404

    gh.set_visibility(world.repo, private=False)
    status, body, _ = request(gh, "GET", "/api/v3/repos/octo/app", token=world.stranger)
    assert status == 200
    assert (body["private"], body["visibility"]) == (False, "public")
    assert body["permissions"]["pull"] is True
    assert body["permissions"]["push"] is False
    status, body, _ = request(gh, "GET", "/api/v3/repos/octo/app")
    assert status == 200
    assert "permissions" not in body


def test_urls_follow_the_address_the_client_used(world: World) -> None:
    status, body, _ = request(
        world.gh,
        "GET",
        "/api/v3/repos/octo/app",
        token=world.owner,
        headers={"Host": f"host.docker.internal:{world.gh.port}"},
    )
    assert status == 200
    base = f"http://host.docker.internal:{world.gh.port}"
    assert body["url"] == f"{base}/api/v3/repos/octo/app"
    assert body["clone_url"] == f"{base}/octo/app.git"


def test_the_request_log_names_method_path_and_user(world: World) -> None:
    gh = world.gh
    gh.create_issue(world.repo, author="octo", title="Issue")
    reader = client(world, world.mate).get_repo(world.repo)
    reader.get_issue(1).title  # noqa: B018  (reading the field fetches the issue)
    request(gh, "GET", "/api/v3/user", token="ghp_wrong")
    assert [(r.method, r.path, r.user, r.status) for r in gh.requests()] == [
        ("GET", "/api/v3/repos/octo/app", "mate", 200),
        ("GET", "/api/v3/repos/octo/app/issues/1", "mate", 200),
        ("GET", "/api/v3/user", None, 401),
    ]
    assert not any(r.is_write for r in gh.requests())

    reader.get_issue(1).create_comment("hello")
    assert [r.method for r in gh.requests() if r.is_write] == ["POST"]


def test_state_survives_a_restart(world: World, tmp_path: Path) -> None:
    gh = world.gh
    gh.create_issue(world.repo, author="octo", title="Remember me")
    number = gh.create_pull_request(world.repo, author="mate", branch="work", title="Work")
    gh.add_comment(world.repo, number, author="octo", body="Looks good")
    gh.protect_branch(world.repo, "main")
    gh.stop()

    with FakeGitHub(gh.state_dir) as again:
        repo = client(world, world.mate, again).get_repo(world.repo)
        assert repo.private is True
        assert repo.get_issue(1).title == "Remember me"
        assert repo.get_pull(number).head.ref == "work"
        assert [c.body for c in repo.get_issue(number).get_comments()] == ["Looks good"]
        assert repo.get_branch("main").protected is True
        assert again.create_issue(world.repo, author="octo", title="Next") == number + 1
        checkout = tmp_path / "again"
        git(tmp_path, "clone", "--quiet", authed_url(again, world.repo, world.mate), "again")
        assert (checkout / "app.py").read_text() == "print('app')\n"


# ----------------------------------------------------------------------------- git


def test_clone_and_push_over_http(world: World, tmp_path: Path) -> None:
    checkout = clone(world, world.mate, tmp_path / "app")
    assert (checkout / "app.py").read_text() == "print('app')\n"
    git(checkout, "checkout", "--quiet", "-b", "mate/change")
    sha = commit(checkout, "change.txt", "changed\n")
    git(checkout, "push", "--quiet", "origin", "mate/change")
    assert world.gh.branch_sha(world.repo, "mate/change") == sha
    assert world.gh.read_file(world.repo, "mate/change", "change.txt") == "changed\n"

    logged = [(r.method, r.path.partition("?")[0], r.user) for r in world.gh.requests()]
    assert ("POST", "/octo/app.git/git-receive-pack", "mate") in logged
    assert [r.is_write for r in world.gh.requests() if r.user].count(True) == 1


def test_git_asks_for_basic_auth_and_refuses_a_wrong_token(world: World, tmp_path: Path) -> None:
    status, _, headers = request(world.gh, "GET", "/octo/app.git/info/refs?service=git-upload-pack")
    assert status == 401
    assert headers["WWW-Authenticate"].startswith("Basic")

    wrong = git(tmp_path, "clone", authed_url(world.gh, world.repo, "ghp_wrong"), "x", check=False)
    assert wrong.returncode != 0
    assert "Authentication failed" in wrong.stderr

    basic = base64.b64encode(f"anyone:{world.owner}".encode()).decode()
    status, body, _ = request(
        world.gh,
        "GET",
        "/octo/app.git/info/refs?service=git-upload-pack",
        headers={"Authorization": f"Basic {basic}"},
    )
    assert status == 200
    assert "refs/heads/main" in body


def test_a_private_repository_is_hidden_from_strangers(world: World, tmp_path: Path) -> None:
    hidden = git(
        tmp_path, "clone", authed_url(world.gh, world.repo, world.stranger), "x", check=False
    )
    assert hidden.returncode != 0
    assert "not found" in hidden.stderr.lower()

    world.gh.set_visibility(world.repo, private=False)
    git(tmp_path, "clone", "--quiet", world.gh.clone_url(world.repo), "anonymous")
    assert (tmp_path / "anonymous" / "app.py").exists()


def test_a_push_to_a_protected_branch_is_refused(world: World, tmp_path: Path) -> None:
    world.gh.protect_branch(world.repo, "main")
    before = world.gh.branch_sha(world.repo, "main")
    checkout = clone(world, world.owner, tmp_path / "app")
    commit(checkout, "app.py", "print('changed')\n")

    refused = git(checkout, "push", "origin", "main", check=False)
    assert refused.returncode != 0
    assert "Protected branch update failed for refs/heads/main" in refused.stderr
    assert world.gh.branch_sha(world.repo, "main") == before

    git(checkout, "push", "--quiet", "origin", "HEAD:refs/heads/side")  # other branches are open
    world.gh.protect_branch(world.repo, "main", protected=False)
    git(checkout, "push", "--quiet", "origin", "main")
    assert world.gh.branch_sha(world.repo, "main") != before


@pytest.mark.parametrize("how", ["deny push", "read only"])
def test_a_push_without_the_right_is_refused(world: World, tmp_path: Path, how: str) -> None:
    if how == "deny push":
        world.gh.deny_push(world.repo, "mate")
    else:
        world.gh.grant(world.repo, "mate", "read")
    checkout = clone(world, world.mate, tmp_path / "app")
    git(checkout, "checkout", "--quiet", "-b", "mate/try")
    commit(checkout, "try.txt", "try\n")

    refused = git(checkout, "push", "origin", "mate/try", check=False)
    assert refused.returncode != 0
    assert "Permission to octo/app.git denied to mate." in refused.stderr
    assert world.gh.branch_sha(world.repo, "mate/try") is None


def test_a_large_push_arrives_whole(world: World, tmp_path: Path) -> None:
    # Above http.postBuffer (1 MiB) git sends the pack with chunked transfer encoding.
    checkout = clone(world, world.owner, tmp_path / "app")
    blob = os.urandom(1536 * 1024)
    (checkout / "blob.bin").write_bytes(blob)
    git(checkout, "add", "blob.bin")
    git(checkout, "commit", "--quiet", "-m", "big")
    git(checkout, "push", "--quiet", "origin", "HEAD:refs/heads/big")
    assert (
        world.gh.branch_sha(world.repo, "big") == git(checkout, "rev-parse", "HEAD").stdout.strip()
    )

    again = clone(world, world.owner, tmp_path / "again")
    git(again, "checkout", "--quiet", "big")
    assert (again / "blob.bin").read_bytes() == blob


def test_owner_and_repository_names_are_case_insensitive_as_on_github(
    world: World, tmp_path: Path
) -> None:
    """GitHub finds `octo/app` under any letter case and answers with its own spelling."""
    repo = client(world, world.mate).get_repo("OCTO/App")
    assert repo.full_name == "octo/app"
    issue = world.gh.create_issue("Octo/APP", author="mate", title="case")
    assert client(world, world.mate).get_repo("octo/APP").get_issue(issue).title == "case"

    checkout = tmp_path / "app"
    url = authed_url(world.gh, "OcTo/ApP", world.mate)
    git(tmp_path, "clone", "--quiet", url, checkout.name)
    git(checkout, "checkout", "--quiet", "-b", "mate/case")
    sha = commit(checkout, "case.txt", "any case\n")
    git(checkout, "push", "--quiet", "origin", "mate/case")
    assert world.gh.branch_sha("octo/app", "mate/case") == sha

    pull = repo.create_pull(title="case", body="", head="OCTO:mate/case", base="main")
    assert pull.head.ref == "mate/case"
    assert [p.number for p in repo.get_pulls(head="Octo:mate/case")] == [pull.number]
    with pytest.raises(ValueError, match="exists already"):
        world.gh.create_repo("Octo/App")
