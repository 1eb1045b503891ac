"""The fake GitHub's state and what tests and the demo do to it: users, tokens, repositories
(bare git repositories under `state_dir/repos`), issues, pull requests, comments, and the log of
the requests the HTTP layer (server.py) answered. Kept in `state_dir` across restarts."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Mapping
from pathlib import Path

from shadowclone_testing.fakes.github import git
from shadowclone_testing.fakes.github.model import (
    Comment,
    Issue,
    LoggedRequest,
    Permission,
    PullFields,
    Repo,
    State,
    User,
    dump_request,
    load_request,
    load_state,
    now,
    save_state,
)


class GitHubStore:
    """The state of a fake GitHub in `state_dir`; every change is saved at once."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.lock = threading.RLock()
        self._log_lock = threading.Lock()
        state_dir.mkdir(parents=True, exist_ok=True)
        self.state: State = load_state(self._state_file)

    # ------------------------------------------------------------------------- admin: setup

    def add_user(
        self,
        login: str,
        *,
        name: str | None = None,
        email: str | None = None,
        token: str | None = None,
    ) -> str:
        """Create a user and return a token that signs in as them."""
        with self.lock:
            if login in self.state.users:
                raise ValueError(f"user {login} exists already")
            self.state.users[login] = User(
                login=login,
                name=name if name is not None else login.title(),
                email=email if email is not None else f"{login}@users.noreply.example",
                id=self.state.next_id(),
            )
            return self.add_token(login, token)

    def add_token(self, login: str, token: str | None = None) -> str:
        """Another token for an existing user; by default shaped like a GitHub token."""
        with self.lock:
            self.user(login)
            token = token or f"ghp_{secrets.token_hex(18)}"
            self.state.tokens[token] = login
            self._save()
            return token

    def create_repo(
        self,
        full_name: str,
        *,
        files: Mapping[str, str] | None = None,
        private: bool = True,
        default_branch: str = "main",
        from_bare: Path | None = None,
    ) -> None:
        """A repository whose default branch holds `files` (a README if none are given), or a
        copy of the bare repository `from_bare` (a large one made once for the tests). An owner
        that is no user is an organization: only collaborators get access."""
        owner, name = _split(full_name)
        with self.lock:
            if self.state.repo(full_name) is not None:
                raise ValueError(f"repository {full_name} exists already")
            path = self.repo_path(full_name)
            if from_bare is not None:
                git.clone_bare(from_bare, path)
            else:
                git.init_bare(path, default_branch)
                readme = {"README.md": f"# {name}\n"}
                author = self.state.users.get(owner)
                chosen = readme if files is None else files
                _first_commit(path, default_branch, chosen, owner, author)
            self.state.repos[full_name] = Repo(
                owner=owner,
                name=name,
                id=self.state.next_id(),
                private=private,
                default_branch=default_branch,
                created_at=now(),
            )
            self._save()

    def set_visibility(self, full_name: str, *, private: bool) -> None:
        with self.lock:
            self._repo(full_name).private = private
            self._save()

    def grant(self, full_name: str, login: str, permission: Permission) -> None:
        """Make `login` a collaborator with `permission`; "none" removes them."""
        with self.lock:
            repo = self._repo(full_name)
            self.user(login)
            if permission == "none":
                repo.collaborators.pop(login, None)
            else:
                repo.collaborators[login] = permission
            self._save()

    def protect_branch(self, full_name: str, branch: str, *, protected: bool = True) -> None:
        """A protected branch refuses every push; the REST branch shows `protected`."""
        with self.lock:
            branches = self._repo(full_name).protected_branches
            if protected and branch not in branches:
                branches.append(branch)
            if not protected and branch in branches:
                branches.remove(branch)
            self._save()

    def deny_push(self, full_name: str, login: str, *, denied: bool = True) -> None:
        """Refuse `login`'s git pushes to this repository whatever their permission."""
        with self.lock:
            denied_logins = self._repo(full_name).push_denied
            if denied and login not in denied_logins:
                denied_logins.append(login)
            if not denied and login in denied_logins:
                denied_logins.remove(login)
            self._save()

    def create_issue(self, full_name: str, *, author: str, title: str, body: str = "") -> int:
        with self.lock:
            return self._new_issue(full_name, author=author, title=title, body=body).number

    def commit(
        self,
        full_name: str,
        branch: str,
        files: Mapping[str, str],
        *,
        author: str,
        message: str = "Change files",
        start: str | None = None,
    ) -> str:
        """Commit `files` on `branch` as `author` (a new branch starts at `start`, by default
        the default branch), as GitHub's web editor would: no hook, protection or permission
        applies. Returns the commit's sha."""
        with self.lock:
            user = self.user(author)
            sha = git.commit_files(
                self.repo_path(full_name),
                branch,
                files,
                message=message,
                author_name=user.name,
                author_email=user.email,
                start=f"refs/heads/{start or self._repo(full_name).default_branch}",
            )
            self._pushed(full_name)
            return sha

    # ------------------------------------------------------------------------- admin: reading

    def user(self, login: str) -> User:
        with self.lock:
            if login not in self.state.users:
                raise KeyError(f"no user {login}")
            return self.state.users[login]

    def issue(self, full_name: str, number: int) -> Issue:
        """An issue or pull request, comments included."""
        with self.lock:
            issue = self._repo(full_name).issues.get(number)
            if issue is None:
                raise KeyError(f"no issue or pull request #{number} in {full_name}")
            return issue

    def comments(self, full_name: str, number: int) -> tuple[Comment, ...]:
        return self.issue(full_name, number).comments

    def repo_path(self, full_name: str) -> Path:
        """The bare repository behind `full_name` (in any letter case)."""
        repo = self.state.repo(full_name)
        return self.state_dir / "repos" / f"{repo.full_name if repo else full_name}.git"

    def branch_sha(self, full_name: str, branch: str) -> str | None:
        return git.rev_parse(self.repo_path(full_name), f"refs/heads/{branch}")

    def read_file(self, full_name: str, ref: str, file: str) -> str | None:
        """A file's content at a branch or commit, or None where it does not exist."""
        return git.read_file(self.repo_path(full_name), ref, file)

    def requests(self) -> list[LoggedRequest]:
        """Every request received since the state folder was made, oldest first."""
        with self._log_lock:
            if not self._request_log.exists():
                return []
            lines = self._request_log.read_text(encoding="utf-8").splitlines()
        return [load_request(line) for line in lines if line]

    # ------------------------------------------------------------------------- actions

    # ------------------------------------------------------------------------- internals

    @property
    def _state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def _request_log(self) -> Path:
        return self.state_dir / "requests.jsonl"

    def _save(self) -> None:
        save_state(self._state_file, self.state)

    def _repo(self, full_name: str) -> Repo:
        repo = self.state.repo(full_name)
        if repo is None:
            raise KeyError(f"no repository {full_name}")
        return repo

    def _new_issue(
        self,
        full_name: str,
        *,
        author: str,
        title: str,
        body: str,
        pull: PullFields | None = None,
    ) -> Issue:
        repo = self._repo(full_name)
        self.user(author)
        created = now()
        issue = Issue(
            number=max(repo.issues, default=0) + 1,
            id=self.state.next_id(),
            title=title,
            body=body,
            author=author,
            created_at=created,
            updated_at=created,
            pull=pull,
        )
        repo.issues[issue.number] = issue
        self._save()
        return issue

    def _sync_pull_ref(self, repo: Repo, issue: Issue) -> None:
        """Point `refs/pull/N/head` at the head branch, as GitHub does after every push, so a
        pull request from a fork can be fetched from the base repository."""
        assert issue.pull is not None
        path = self.repo_path(repo.full_name)
        ref = f"refs/pull/{issue.number}/head"
        source = f"refs/heads/{issue.pull.head_ref}"
        if issue.pull.head_repo.lower() == repo.full_name.lower():
            sha = git.rev_parse(path, source)
            if sha is not None:
                git.git(path, "update-ref", ref, sha)
        elif self.branch_sha(issue.pull.head_repo, issue.pull.head_ref) is not None:
            head_path = self.repo_path(issue.pull.head_repo)
            git.git(path, "fetch", "--quiet", "--no-tags", str(head_path), f"+{source}:{ref}")

    def _pushed(self, full_name: str) -> None:
        with self.lock:
            for repo in self.state.repos.values():
                for issue in repo.issues.values():
                    if issue.pull is not None and issue.pull.head_repo.lower() == full_name.lower():
                        self._sync_pull_ref(repo, issue)

    def _record(self, request: LoggedRequest) -> None:
        with self._log_lock, self._request_log.open("a", encoding="utf-8") as f:
            f.write(dump_request(request) + "\n")

    def _login_for(self, token: str) -> str | None:
        with self.lock:
            return self.state.tokens.get(token)


def _split(full_name: str) -> tuple[str, str]:
    owner, _, name = full_name.partition("/")
    if not owner or not name or "/" in name:
        raise ValueError(f"{full_name!r} is not owner/name")
    return owner, name


def _first_commit(
    path: Path, branch: str, files: Mapping[str, str], owner: str, author: User | None
) -> None:
    git.commit_files(
        path,
        branch,
        files,
        message="Initial commit",
        author_name=author.name if author else owner,
        author_email=author.email if author else f"{owner}@users.noreply.example",
    )
