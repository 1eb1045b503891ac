"""The bare repositories behind the fake GitHub, and git's smart HTTP through `git http-backend`."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

import attrs

PROTECTED_ENV = "FAKE_GITHUB_PROTECTED_BRANCHES"

# The server names the protected branches in the environment of each push, so the hook needs no
# state of its own and protection changes take effect at once. Its stderr reaches the pusher.
PRE_RECEIVE_HOOK = f"""#!/bin/sh
status=0
while read -r old new ref; do
    for branch in ${PROTECTED_ENV}; do
        if [ "$ref" = "refs/heads/$branch" ]; then
            echo "error: GH006: Protected branch update failed for $ref." >&2
            status=1
        fi
    done
done
exit $status
"""


class GitError(Exception):
    """A git command that failed where it should not have; carries git's stderr."""


def _clean_env() -> dict[str, str]:
    # A GIT_DIR or GIT_INDEX_FILE inherited from a caller (a hook, a test) would point our git
    # commands at the wrong repository.
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


def git(
    repo: Path,
    *args: str,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    strip: bool = True,
) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo), *args],
        input=input,
        capture_output=True,
        env={**_clean_env(), **(env or {})},
        check=False,
    )
    if result.returncode != 0:
        raise GitError(f"git {' '.join(args)}: {result.stderr.decode(errors='replace').strip()}")
    output = result.stdout.decode()
    return output.strip() if strip else output


def init_bare(path: Path, default_branch: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    git(path.parent, "init", "--quiet", "--bare", f"--initial-branch={default_branch}", path.name)
    install_hook(path)


def clone_bare(source: Path, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    git(path.parent, "clone", "--quiet", "--bare", str(source), path.name)
    install_hook(path)


def install_hook(path: Path) -> None:
    hook = path / "hooks" / "pre-receive"
    hook.write_text(PRE_RECEIVE_HOOK, encoding="utf-8")
    hook.chmod(0o755)


def rev_parse(repo: Path, ref: str) -> str | None:
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except GitError:
        return None


def tree_entry(repo: Path, ref: str, path: str) -> tuple[str, str, int] | None:
    """(type, object id, size) of `path` at `ref`: `blob` or `tree`; None if there is none."""
    try:
        line = git(repo, "ls-tree", "--long", ref, "--", path.rstrip("/"))
    except GitError:
        return None
    if not line or "\n" in line:
        return None
    meta, _, _name = line.partition("\t")
    _mode, kind, oid, size = meta.split()
    return kind, oid, int(size) if size.isdigit() else 0


def tree_list(repo: Path, ref: str, path: str) -> list[tuple[str, str, int, str]]:
    """The entries of the folder `path` at `ref`: (type, object id, size, name)."""
    output = git(repo, "ls-tree", "--long", f"{ref}:{path}" if path else ref)
    entries = []
    for line in output.splitlines():
        meta, _, name = line.partition("\t")
        _mode, kind, oid, size = meta.split()
        entries.append((kind, oid, int(size) if size.isdigit() else 0, name))
    return entries


def read_blob(repo: Path, oid: str) -> bytes:
    return subprocess.run(
        ["git", "-C", str(repo), "cat-file", "blob", oid],
        capture_output=True,
        env=_clean_env(),
        check=True,
    ).stdout


@attrs.frozen
class CommitInfo:
    """What GitHub's commit payloads tell of one commit."""

    tree: str
    parents: tuple[str, ...]
    author: tuple[str, str, str]
    """Name, email and ISO 8601 date; `committer` likewise."""
    committer: tuple[str, str, str]
    message: str


def commit_info(repo: Path, sha: str) -> CommitInfo:
    fields = git(
        repo, "show", "-s", "--format=%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B", sha
    )
    tree, parents, an, ae, ad, cn, ce, cd, message = fields.split("\0", 8)
    return CommitInfo(tree, tuple(parents.split()), (an, ae, ad), (cn, ce, cd), message)


def commits_between(repo: Path, base: str, head: str) -> int:
    return int(git(repo, "rev-list", "--count", f"{base}..{head}"))


def read_file(repo: Path, ref: str, file: str) -> str | None:
    try:
        return git(repo, "show", f"{ref}:{file}", strip=False)
    except GitError:
        return None


def commit_files(
    repo: Path,
    branch: str,
    files: Mapping[str, str],
    *,
    message: str,
    author_name: str,
    author_email: str,
    start: str | None = None,
) -> str:
    """Commit `files` onto `branch` (created at `start` if missing) without a work tree or hooks,
    so the admin API can write to protected branches as GitHub's web editor would."""
    current = rev_parse(repo, f"refs/heads/{branch}")
    parent = current or (rev_parse(repo, start) if start else None)
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "GIT_INDEX_FILE": str(Path(tmp) / "index"),
            "GIT_AUTHOR_NAME": author_name,
            "GIT_AUTHOR_EMAIL": author_email,
            "GIT_COMMITTER_NAME": author_name,
            "GIT_COMMITTER_EMAIL": author_email,
        }
        if parent:
            git(repo, "read-tree", parent, env=env)
        for file, content in files.items():
            blob = git(repo, "hash-object", "-w", "--stdin", input=content.encode(), env=env)
            git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{file}", env=env)
        tree = git(repo, "write-tree", env=env)
        parents = ["-p", parent] if parent else []
        sha = git(repo, "commit-tree", tree, *parents, "-m", message, env=env)
    # The old value makes a concurrent push fail this update rather than be overwritten.
    git(repo, "update-ref", f"refs/heads/{branch}", sha, current or "0" * 40)
    return sha


@attrs.frozen
class Reply:
    """An HTTP reply, whole: the server sends it only after logging the request."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


def http_backend(
    project_root: Path,
    *,
    method: str,
    path_info: str,
    query: str,
    headers: Mapping[str, str],
    body: bytes,
    remote_user: str | None,
    protected_branches: list[str],
) -> Reply:
    """Run one smart-HTTP request through `git http-backend` as a CGI script."""
    env = {
        **_clean_env(),
        "GIT_PROJECT_ROOT": str(project_root),
        "GIT_HTTP_EXPORT_ALL": "1",
        "REQUEST_METHOD": method,
        "PATH_INFO": path_info,
        "QUERY_STRING": query,
        "CONTENT_TYPE": headers.get("Content-Type", ""),
        "CONTENT_LENGTH": str(len(body)),
        "REMOTE_ADDR": "127.0.0.1",
        PROTECTED_ENV: " ".join(protected_branches),
    }
    if remote_user:
        # http-backend enables receive-pack only for an authenticated user.
        env["REMOTE_USER"] = remote_user
    if "Git-Protocol" in headers:
        env["GIT_PROTOCOL"] = headers["Git-Protocol"]
    if "Content-Encoding" in headers:
        env["HTTP_CONTENT_ENCODING"] = headers["Content-Encoding"]
    result = subprocess.run(
        ["git", "http-backend"], input=body, capture_output=True, env=env, check=False
    )
    head, _, payload = result.stdout.partition(b"\r\n\r\n")
    status = 200
    cgi_headers: list[tuple[str, str]] = []
    for line in head.decode("latin-1").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.split()[0])
        elif name:
            cgi_headers.append((name.strip(), value.strip()))
    if result.returncode != 0 and not result.stdout:
        message = result.stderr.decode(errors="replace").strip() or "git http-backend failed"
        return Reply(500, (("Content-Type", "text/plain"),), message.encode())
    return Reply(status, tuple(cgi_headers), payload)
