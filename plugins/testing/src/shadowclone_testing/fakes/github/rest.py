"""The REST calls shadowclone makes, answered with GitHub's payload shapes.

Payloads carry the fields PyGithub reads (and the `url` it completes lazy objects from); every
URL in them is built from the address the client used, so one server serves clients on loopback
and in containers alike.

The request (`call`), path matching (`routing`) and the routes of issues and pulls
(`issues`, `pulls`, `checks`) live in modules of their own; the payloads stay here, where the
tests swap one to see it in every answer.
"""

from __future__ import annotations

import base64
import urllib.parse
import zlib

from shadowclone_testing.fakes.github import git
from shadowclone_testing.fakes.github.call import API_PREFIX, DOCS, Call, Json, error_body
from shadowclone_testing.fakes.github.model import ApiError, Comment, Issue, Repo, owner_of
from shadowclone_testing.fakes.github.routing import Handler, Reply, Route

__all__ = [
    "API_PREFIX",
    "DOCS",
    "Call",
    "Handler",
    "Json",
    "Reply",
    "Route",
    "error_body",
]

SIGNED_UP = "2008-04-10T00:00:00Z"
"""When every user of the fake signed up: it keeps no such date."""


# ----------------------------------------------------------------------------- payloads


def user_json(call: Call, login: str) -> Json:
    """GitHub's `simple-user`."""
    user = call.store.state.users.get(login)
    kind = "User" if user is not None else "Organization"
    api = f"{call.api}/users/{login}"
    return {
        "login": login,
        "id": user.id if user else zlib.crc32(login.encode()),
        "node_id": f"U_{login}",
        "type": kind,
        "site_admin": False,
        "name": user.name if user else None,
        "email": user.email if user else None,
        "avatar_url": f"{call.web}/avatars/{login}",
        "gravatar_id": "",
        "url": api,
        "html_url": f"{call.web}/{login}",
        "followers_url": f"{api}/followers",
        "following_url": f"{api}/following{{/other_user}}",
        "gists_url": f"{api}/gists{{/gist_id}}",
        "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{api}/subscriptions",
        "organizations_url": f"{api}/orgs",
        "repos_url": f"{api}/repos",
        "events_url": f"{api}/events{{/privacy}}",
        "received_events_url": f"{api}/received_events",
    }


def public_user_json(call: Call, login: str) -> Json:
    """GitHub's `public-user`, as `/user` and `/users/{login}` answer."""
    return {
        **user_json(call, login),
        "bio": None,
        "blog": None,
        "company": None,
        "hireable": None,
        "location": None,
        "followers": 0,
        "following": 0,
        "public_gists": 0,
        "public_repos": sum(1 for r in call.store.state.repos.values() if r.owner == login),
        "created_at": SIGNED_UP,
        "updated_at": SIGNED_UP,
        "user_view_type": "public",
    }


def author_json(call: Call, login: str) -> Json | None:
    """The author of an issue, comment or review: `null` once the account is deleted."""
    return None if call.store.is_deleted(login) else user_json(call, login)


GHOST = "ghost"
"""The account GitHub shows in a deleted one's place."""


def pull_author_json(call: Call, login: str) -> Json:
    """The author of a pull request: GitHub's description makes it a `simple-user`, never
    null, so a deleted account's pull request shows GitHub's `ghost` account instead."""
    if not call.store.is_deleted(login):
        return user_json(call, login)
    return {**user_json(call, GHOST), "id": 10137, "node_id": "MDQ6VXNlcjEwMTM3", "type": "User"}


def repo_json(call: Call, repo: Repo) -> Json:
    """GitHub's `full-repository` (a superset of the `repository` pull requests hold)."""
    api = f"{call.api}/repos/{repo.full_name}"
    host = urllib.parse.urlsplit(call.web).netloc
    data: Json = {
        "id": repo.id,
        "node_id": f"R_{repo.id}",
        "name": repo.name,
        "full_name": repo.full_name,
        "owner": user_json(call, repo.owner),
        "private": repo.private,
        "visibility": "private" if repo.private else "public",
        "fork": repo.fork_of is not None,
        "default_branch": repo.default_branch,
        "description": None,
        "archived": False,
        "disabled": False,
        "created_at": repo.created_at,
        "updated_at": repo.created_at,
        "url": f"{call.api}/repos/{repo.full_name}",
        "html_url": f"{call.web}/{repo.full_name}",
        "clone_url": f"{call.web}/{repo.full_name}.git",
        "git_url": f"git://{host}/{repo.full_name}.git",
        "ssh_url": f"git@{host}:{repo.full_name}.git",
        "svn_url": f"{call.web}/{repo.full_name}",
        "homepage": None,
        "language": None,
        "license": None,
        "mirror_url": None,
        "pushed_at": repo.created_at,
        "size": 0,
        "forks": 0,
        "forks_count": 0,
        "stargazers_count": 0,
        "watchers": 0,
        "watchers_count": 0,
        "network_count": 0,
        "subscribers_count": 0,
        "open_issues": _open_issues(repo),
        "open_issues_count": _open_issues(repo),
        "has_issues": True,
        "has_projects": False,
        "has_wiki": False,
        "has_pages": False,
        "has_downloads": False,
        "has_discussions": False,
        **{f"{name}_url": f"{api}/{path}" for name, path in _REPO_URLS},
    }
    if call.viewer is not None:
        permission = repo.permission(call.viewer)
        data["permissions"] = {
            "admin": permission == "admin",
            "maintain": permission == "admin",
            "push": permission in ("admin", "write"),
            "triage": permission in ("admin", "write"),
            "pull": permission != "none",
        }
    return data


_REPO_URLS = (
    ("archive", "{archive_format}{/ref}"),
    ("assignees", "assignees{/user}"),
    ("blobs", "git/blobs{/sha}"),
    ("branches", "branches{/branch}"),
    ("collaborators", "collaborators{/collaborator}"),
    ("comments", "comments{/number}"),
    ("commits", "commits{/sha}"),
    ("compare", "compare/{base}...{head}"),
    ("contents", "contents/{+path}"),
    ("contributors", "contributors"),
    ("deployments", "deployments"),
    ("downloads", "downloads"),
    ("events", "events"),
    ("forks", "forks"),
    ("git_commits", "git/commits{/sha}"),
    ("git_refs", "git/refs{/sha}"),
    ("git_tags", "git/tags{/sha}"),
    ("hooks", "hooks"),
    ("issue_comment", "issues/comments{/number}"),
    ("issue_events", "issues/events{/number}"),
    ("issues", "issues{/number}"),
    ("keys", "keys{/key_id}"),
    ("labels", "labels{/name}"),
    ("languages", "languages"),
    ("merges", "merges"),
    ("milestones", "milestones{/number}"),
    ("notifications", "notifications{?since,all,participating}"),
    ("pulls", "pulls{/number}"),
    ("releases", "releases{/id}"),
    ("stargazers", "stargazers"),
    ("statuses", "statuses/{sha}"),
    ("subscribers", "subscribers"),
    ("subscription", "subscription"),
    ("tags", "tags"),
    ("teams", "teams"),
    ("trees", "git/trees{/sha}"),
)
"""The URL templates of GitHub's repository payloads, below the repository's API URL."""


def _open_issues(repo: Repo) -> int:
    return sum(1 for issue in repo.issues.values() if issue.state == "open")


def _kind(issue: Issue) -> str:
    return "pull" if issue.is_pull_request else "issues"


def issue_json(call: Call, repo: Repo, issue: Issue) -> Json:
    api = f"{call.api}/repos/{repo.full_name}"
    data: Json = {
        "id": issue.id,
        "node_id": f"I_{issue.id}",
        "number": issue.number,
        "title": issue.title,
        "body": issue.body,
        "user": author_json(call, issue.author),
        "state": issue.state,
        "locked": False,
        "labels": [],
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "comments": len(issue.comments),
        "created_at": issue.created_at,
        "updated_at": issue.updated_at,
        "closed_at": None,
        "author_association": association(repo, issue.author),
        "url": f"{api}/issues/{issue.number}",
        "repository_url": api,
        "comments_url": f"{api}/issues/{issue.number}/comments",
        "labels_url": f"{api}/issues/{issue.number}/labels{{/name}}",
        "events_url": f"{api}/issues/{issue.number}/events",
        "html_url": f"{call.web}/{repo.full_name}/{_kind(issue)}/{issue.number}",
    }
    if issue.is_pull_request:
        html = f"{call.web}/{repo.full_name}/pull/{issue.number}"
        data["pull_request"] = {
            "url": f"{api}/pulls/{issue.number}",
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "merged_at": None,
        }
    return data


def pull_json(call: Call, repo: Repo, issue: Issue) -> Json:
    assert issue.pull is not None
    pull = issue.pull
    api = f"{call.api}/repos/{repo.full_name}"
    head_repo = call.store.state.repo(pull.head_repo)
    head_sha = call.store.branch_sha(pull.head_repo, pull.head_ref) or git.rev_parse(
        call.store.repo_path(repo.full_name), f"refs/pull/{issue.number}/head"
    )
    base_sha = call.store.branch_sha(repo.full_name, pull.base_ref)
    head_owner = owner_of(pull.head_repo)
    bare = call.store.repo_path(repo.full_name)
    head_ref = f"refs/pull/{issue.number}/head"
    html = f"{call.web}/{repo.full_name}/pull/{issue.number}"
    links = {
        "self": f"{api}/pulls/{issue.number}",
        "html": html,
        "issue": f"{api}/issues/{issue.number}",
        "comments": f"{api}/issues/{issue.number}/comments",
        "review_comments": f"{api}/pulls/{issue.number}/comments",
        "review_comment": f"{api}/pulls/comments{{/number}}",
        "commits": f"{api}/pulls/{issue.number}/commits",
        "statuses": f"{api}/statuses/{head_sha or '0' * 40}",
    }
    return {
        "id": issue.id,
        "node_id": f"PR_{issue.id}",
        "number": issue.number,
        "title": issue.title,
        "body": issue.body,
        "user": pull_author_json(call, issue.author),
        "state": issue.state,
        "draft": pull.draft,
        "labels": [],
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "auto_merge": None,
        "merged_by": None,
        "merge_commit_sha": None,
        "mergeable_state": "unknown",
        "active_lock_reason": None,
        "review_comments": len(issue.review_comments),
        "commits": git.commits_between(bare, f"refs/heads/{pull.base_ref}", head_ref)
        if base_sha and head_sha
        else 0,
        "additions": 0,
        "deletions": 0,
        "changed_files": 0,
        "locked": False,
        "merged": False,
        "mergeable": None,
        "merged_at": None,
        "closed_at": None,
        "created_at": issue.created_at,
        "updated_at": issue.updated_at,
        "author_association": association(repo, issue.author),
        "maintainer_can_modify": False,
        "comments": len(issue.comments),
        "url": f"{api}/pulls/{issue.number}",
        "issue_url": f"{api}/issues/{issue.number}",
        "comments_url": f"{api}/issues/{issue.number}/comments",
        "html_url": html,
        "diff_url": f"{html}.diff",
        "patch_url": f"{html}.patch",
        "commits_url": links["commits"],
        "review_comments_url": links["review_comments"],
        "review_comment_url": links["review_comment"],
        "statuses_url": links["statuses"],
        "_links": {name: {"href": href} for name, href in links.items()},
        "head": {
            "label": f"{head_owner}:{pull.head_ref}",
            "ref": pull.head_ref,
            "sha": head_sha or "0" * 40,
            "user": user_json(call, head_owner),
            "repo": repo_json(call, head_repo) if head_repo else None,
        },
        "base": {
            "label": f"{repo.owner}:{pull.base_ref}",
            "ref": pull.base_ref,
            "sha": base_sha or "0" * 40,
            "user": user_json(call, repo.owner),
            "repo": repo_json(call, repo),
        },
    }


def comment_json(call: Call, repo: Repo, issue: Issue, comment: Comment) -> Json:
    api = f"{call.api}/repos/{repo.full_name}"
    return {
        "id": comment.id,
        "node_id": f"IC_{comment.id}",
        "body": comment.body,
        "user": author_json(call, comment.author),
        "created_at": comment.created_at,
        "updated_at": comment.updated,
        "author_association": association(repo, comment.author),
        "url": f"{api}/issues/comments/{comment.id}",
        "issue_url": f"{api}/issues/{issue.number}",
        "html_url": (
            f"{call.web}/{repo.full_name}/{_kind(issue)}/{issue.number}#issuecomment-{comment.id}"
        ),
    }


def association(repo: Repo, login: str) -> str:
    if login == repo.owner:
        return "OWNER"
    return "COLLABORATOR" if login in repo.collaborators else "NONE"


class Router:
    """The REST calls the fake answers, matched in order."""

    def __init__(self) -> None:
        self.routes = tuple(
            Route.of(method, pattern, handler) for method, pattern, handler in _table()
        )

    def handle(self, call: Call, method: str, path: str) -> Reply:
        """Answer one REST request; `path` is below the API prefix, without the query."""
        for route in self.routes:
            match = route.regex.match(path)
            if match is not None and route.method == method:
                args = {k: urllib.parse.unquote(v) for k, v in match.groupdict().items()}
                return route.handler(call, **args)
        raise ApiError(404, "Not Found")


def get_authenticated_user(call: Call) -> Reply:
    return 200, public_user_json(call, call.signed_in())


def get_user(call: Call, login: str) -> Reply:
    return 200, public_user_json(call, call.user(login).login)


def get_repo(call: Call, owner: str, name: str) -> Reply:
    return 200, repo_json(call, call.repo(owner, name))


def get_permission(call: Call, owner: str, name: str, login: str) -> Reply:
    repo = call.repo(owner, name)
    permission = repo.permission(call.user(login).login)
    return 200, {
        "permission": permission,
        "role_name": permission,
        "user": {**user_json(call, login), "role_name": permission},
    }


def get_branch(call: Call, owner: str, name: str, branch: str) -> Reply:
    repo = call.repo(owner, name)
    sha = call.store.branch_sha(repo.full_name, branch)
    if sha is None:
        raise ApiError(404, "Branch not found")
    api = f"{call.api}/repos/{repo.full_name}"
    return 200, {
        "name": branch,
        "commit": commit_json(call, repo, sha),
        "_links": {
            "self": f"{api}/branches/{branch}",
            "html": f"{call.web}/{repo.full_name}/tree/{branch}",
        },
        "protected": branch in repo.protected_branches,
        "protection": {"enabled": branch in repo.protected_branches},
        "protection_url": f"{api}/branches/{branch}/protection",
    }


def commit_json(call: Call, repo: Repo, sha: str) -> Json:
    """GitHub's `commit`, without its stats and files."""
    info = git.commit_info(call.store.repo_path(repo.full_name), sha)
    api = f"{call.api}/repos/{repo.full_name}"

    def person(who: tuple[str, str, str]) -> Json:
        return {"name": who[0], "email": who[1], "date": who[2]}

    def account(who: tuple[str, str, str]) -> Json | None:
        """The user with the commit's email, as GitHub links them; None for a stranger."""
        users = call.store.state.users.values()
        login = next((u.login for u in users if u.email.lower() == who[1].lower()), None)
        return user_json(call, login) if login is not None else None

    return {
        "sha": sha,
        "node_id": f"C_{sha}",
        "url": f"{api}/commits/{sha}",
        "html_url": f"{call.web}/{repo.full_name}/commit/{sha}",
        "comments_url": f"{api}/commits/{sha}/comments",
        "commit": {
            "url": f"{api}/git/commits/{sha}",
            "author": person(info.author),
            "committer": person(info.committer),
            "message": info.message,
            "comment_count": 0,
            "tree": {"sha": info.tree, "url": f"{api}/git/trees/{info.tree}"},
        },
        "author": account(info.author),
        "committer": account(info.committer),
        "parents": [
            {
                "sha": p,
                "url": f"{api}/commits/{p}",
                "html_url": f"{call.web}/{repo.full_name}/commit/{p}",
            }
            for p in info.parents
        ],
    }


def get_contents(call: Call, owner: str, name: str, path: str) -> Reply:
    """A file (its content in base64) or a folder (its entries), at `ref` or the default
    branch."""
    repo = call.repo(owner, name)
    bare = call.store.repo_path(repo.full_name)
    ref = call.query.get("ref") or repo.default_branch
    path = path.strip("/")
    found = git.tree_entry(bare, ref, path)
    if found is None:
        raise ApiError(404, "Not Found")
    kind, oid, size = found
    api = f"{call.api}/repos/{repo.full_name}/contents"

    def entry(kind: str, oid: str, size: int, entry_path: str) -> Json:
        blob_or_tree = "trees" if kind == "tree" else "blobs"
        git_url = f"{call.api}/repos/{repo.full_name}/git/{blob_or_tree}/{oid}"
        html = (
            f"{call.web}/{repo.full_name}/{'tree' if kind == 'tree' else 'blob'}/{ref}/{entry_path}"
        )
        raw = f"{call.web}/{repo.full_name}/raw/{ref}/{entry_path}" if kind != "tree" else None
        return {
            "git_url": git_url,
            "html_url": html,
            "download_url": raw,
            "_links": {"self": f"{api}/{entry_path}?ref={ref}", "git": git_url, "html": html},
            "type": "dir" if kind == "tree" else "file",
            "name": entry_path.rsplit("/", 1)[-1],
            "path": entry_path,
            "sha": oid,
            "size": size,
            "url": f"{api}/{entry_path}?ref={ref}",
        }

    if kind == "tree":
        listed = git.tree_list(bare, ref, path)
        return 200, [entry(k, o, s, f"{path}/{n}") for k, o, s, n in listed]
    content = base64.b64encode(git.read_blob(bare, oid)).decode()
    return 200, {**entry(kind, oid, size, path), "encoding": "base64", "content": content}


def _table() -> tuple[tuple[str, str, Handler], ...]:
    # Here, not at the top: those modules build on this one's Call and payloads.
    from shadowclone_testing.fakes.github import checks, issues, pulls

    return (
        ("GET", "/user", get_authenticated_user),
        ("GET", "/users/{login}", get_user),
        ("GET", "/repos/{owner}/{name}", get_repo),
        ("GET", "/repos/{owner}/{name}/collaborators/{login}/permission", get_permission),
        ("GET", "/repos/{owner}/{name}/branches/{branch+}", get_branch),
        ("GET", "/repos/{owner}/{name}/contents/{path+}", get_contents),
        ("GET", "/repos/{owner}/{name}/issues/{number}", issues.get_issue),
        ("GET", "/repos/{owner}/{name}/issues/{number}/comments", issues.list_comments),
        ("POST", "/repos/{owner}/{name}/issues/{number}/comments", issues.create_comment),
        ("GET", "/repos/{owner}/{name}/pulls/{number}", issues.get_pull),
        ("GET", "/repos/{owner}/{name}/pulls", issues.list_pulls),
        ("POST", "/repos/{owner}/{name}/pulls", issues.create_pull),
        ("PATCH", "/repos/{owner}/{name}/pulls/{number}", issues.update_pull),
        ("GET", "/repos/{owner}/{name}/pulls/{number}/reviews", pulls.list_reviews),
        ("POST", "/repos/{owner}/{name}/pulls/{number}/reviews", pulls.create_review),
        ("GET", "/repos/{owner}/{name}/pulls/{number}/comments", pulls.list_review_comments),
        (
            "POST",
            "/repos/{owner}/{name}/pulls/{number}/comments/{comment_id}/replies",
            pulls.create_reply,
        ),
        ("GET", "/repos/{owner}/{name}/commits/{ref+}/check-runs", checks.list_for_ref),
        ("GET", "/repos/{owner}/{name}/check-runs/{run_id}", checks.get_check_run),
        ("GET", "/repos/{owner}/{name}/check-runs/{run_id}/annotations", checks.list_annotations),
        ("GET", "/repos/{owner}/{name}/actions/jobs/{job_id}/logs", checks.job_logs),
    )
