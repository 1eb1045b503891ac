"""The GitHub calls a clone and setup make, answered as small frozen value objects.

A thin typed layer pointed at `[github] api_url`, so github.com, GitHub Enterprise and the fake
GitHub are reached alike (wire.py carries the requests). A full object client costs the run
program a third of its memory and a tenth of a second of its start for the calls a clone makes.
"""

from __future__ import annotations

import base64
import urllib.parse

from shadowclone.errors import BadInput, ShadowcloneError
from shadowclone.run.github.models import (
    Annotation,
    CheckRun,
    Comment,
    ContentEntry,
    InlineComment,
    Issue,
    IssueComment,
    Permission,
    PullRequest,
    Repository,
    Review,
    ReviewThread,
    ThreadComment,
    User,
    link_issue,
)
from shadowclone.run.github.wire import (
    SECONDS_BETWEEN_WRITES,
    Answer,
    Waited,
    Wire,
    repo_path,
    segment,
    shape_error,
)


class GithubClient:
    """The calls a clone needs, with a token, against one GitHub API."""

    def __init__(
        self,
        token: str,
        *,
        api_url: str = "https://api.github.com",
        timeout: float = 30.0,
        seconds_between_writes: float = SECONDS_BETWEEN_WRITES,
        waited: Waited | None = None,
    ) -> None:
        self.wire = Wire(
            token,
            api_url=api_url,
            timeout=timeout,
            seconds_between_writes=seconds_between_writes,
            waited=waited,
        )
        self.api_url = self.wire.api_url

    def close(self) -> None:
        self.wire.close()

    def __enter__(self) -> GithubClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------------- reads

    def token_user(self) -> User:
        user = self.wire.call("read the token's user", "GET", "/user")
        return User(
            login=user.text("login"),
            name=user.text_or_none("name"),
            email=user.text_or_none("email"),
        )

    def repository(self, full_name: str) -> Repository:
        repo = self.wire.call(f"read the repository {full_name}", "GET", repo_path(full_name))
        permissions = repo.part_or_none("permissions")
        permission: Permission = "none"
        if permissions is not None:
            if permissions.flag("admin"):
                permission = "admin"
            elif permissions.flag("push"):
                permission = "write"
            elif permissions.flag("pull"):
                permission = "read"
        private = repo.flag("private")
        return Repository(
            full_name=repo.text("full_name"),
            private=private,
            visibility=repo.text_or_none("visibility") or ("private" if private else "public"),
            default_branch=repo.text("default_branch"),
            permission=permission,
            clone_url=repo.text("clone_url"),
        )

    def issue(self, full_name: str, number: int) -> Issue:
        issue = self.wire.call(
            f"read issue {full_name}#{number}", "GET", f"{repo_path(full_name)}/issues/{number}"
        )
        return Issue(
            repository=full_name,
            number=issue.number("number"),
            title=issue.text("title"),
            body=issue.text_or_none("body") or "",
            author=issue.author(),
            state=issue.text("state"),
            html_url=issue.text("html_url"),
            is_pull_request=issue.part_or_none("pull_request") is not None,
        )

    def contents(
        self, full_name: str, path: str, ref: str | None = None
    ) -> bytes | list[ContentEntry] | None:
        """A file's bytes or a folder's entries at `ref` (the default branch when None), or
        None when the repository has nothing at `path`."""
        what = f"read {path} in {full_name}"
        route = f"{repo_path(full_name)}/contents/{urllib.parse.quote(path, safe='/')}"
        try:
            data = self.wire.call_raw(what, "GET", route, params={"ref": ref} if ref else None)
        except BadInput:
            return None
        if isinstance(data, list):
            entries = [Answer(item, what) for item in data if isinstance(item, dict)]
            return [
                ContentEntry(entry.text("path"), entry.text("type"), entry.number("size"))
                for entry in entries
            ]
        if not isinstance(data, dict):
            raise shape_error(what, "file or folder")
        answer = Answer(data, what)
        if answer.text("type") != "file":
            return None
        try:
            return base64.b64decode(answer.text("content"), validate=False)
        except ValueError:
            raise shape_error(what, "base64 'content'") from None

    def can_push(self, full_name: str, login: str) -> bool:
        """Whether `login` may push to the repository; anyone GitHub will not say so of, no."""
        path = f"{repo_path(full_name)}/collaborators/{segment(login)}/permission"
        try:
            answer = self.wire.call(f"read {login}'s permission in {full_name}", "GET", path)
            permission = answer.text("permission")
        except ShadowcloneError:
            return False
        return permission in ("admin", "maintain", "write")

    def pull_request(self, full_name: str, number: int) -> PullRequest:
        pull = self.wire.call(
            f"read pull request {full_name}#{number}",
            "GET",
            f"{repo_path(full_name)}/pulls/{number}",
        )
        return _pull_request(full_name, pull)

    def find_open_pull_request(
        self, full_name: str, head_branch: str, *, head_owner: str | None = None
    ) -> PullRequest | None:
        """The open pull request from `head_branch` (in `head_owner`'s repository, by default
        the repository's owner), or None."""
        owner = head_owner or full_name.partition("/")[0]
        what = f"look for a pull request from {owner}:{head_branch} in {full_name}"
        found = self.wire.call_raw(
            what,
            "GET",
            f"{repo_path(full_name)}/pulls",
            params={"state": "open", "head": f"{owner}:{head_branch}", "per_page": "1"},
        )
        if not isinstance(found, list) or not all(isinstance(pull, dict) for pull in found):
            raise shape_error(what, "a list of pull requests")
        return _pull_request(full_name, Answer(found[0], what)) if found else None

    # ------------------------------------------------------------------------- the conversation

    def issue_comments(self, full_name: str, number: int) -> tuple[list[IssueComment], bool]:
        """Every comment of an issue or a pull request's conversation, oldest first; True
        beside them when there were more than a clone reads."""
        found, cut = self.wire.pages(
            f"read the comments of {full_name}#{number}",
            f"{repo_path(full_name)}/issues/{number}/comments",
        )
        return [
            IssueComment(
                id=item.number("id"),
                author=item.author(),
                body=item.text_or_none("body") or "",
                created_at=item.time("created_at"),
                updated_at=item.time("updated_at"),
                html_url=item.text("html_url"),
            )
            for item in found
        ], cut

    def reviews(self, full_name: str, number: int) -> list[Review]:
        found, _ = self.wire.pages(
            f"read the reviews of {full_name}#{number}",
            f"{repo_path(full_name)}/pulls/{number}/reviews",
        )
        return [
            Review(
                id=item.number("id"),
                author=item.author(),
                state=item.text("state"),
                body=item.text_or_none("body") or "",
                submitted_at=None
                if item.data.get("submitted_at") is None
                else item.time("submitted_at"),
                html_url=item.text("html_url"),
            )
            for item in found
        ]

    def review_threads(self, full_name: str, number: int) -> list[ReviewThread]:
        """Every review thread of a pull request with its comments (the first 100 of each:
        a longer thread is marked cut), through every page of threads."""
        owner, _, name = full_name.partition("/")
        what = f"read the review threads of {full_name}#{number}"
        threads: list[ReviewThread] = []
        after: str | None = None
        for _ in range(100):
            data = self.wire.graphql(
                what,
                THREADS_QUERY,
                {"owner": owner, "name": name, "number": number, "after": after},
            )
            repository = data.part_or_none("repository")
            pull = repository.part_or_none("pullRequest") if repository is not None else None
            if pull is None:
                raise BadInput(f"GitHub cannot {what}: there is no such pull request")
            page = pull.part("reviewThreads")
            threads.extend(_thread(node) for node in page.parts("nodes"))
            info = page.part("pageInfo")
            if not info.flag("hasNextPage"):
                break
            after = info.text("endCursor")
        return threads

    def check_runs(self, full_name: str, sha: str) -> list[CheckRun]:
        found, _ = self.wire.pages(
            f"read the checks of {sha[:12]} in {full_name}",
            f"{repo_path(full_name)}/commits/{segment(sha)}/check-runs",
            key="check_runs",
        )
        runs = []
        for item in found:
            output = item.part("output")
            app = item.part_or_none("app")
            runs.append(
                CheckRun(
                    id=item.number("id"),
                    name=item.text("name"),
                    status=item.text("status"),
                    conclusion=item.text_or_none("conclusion"),
                    title=output.text_or_none("title") or "",
                    summary=output.text_or_none("summary") or "",
                    text=output.text_or_none("text") or "",
                    app=(app.text_or_none("slug") or "") if app is not None else "",
                    html_url=item.text_or_none("html_url") or "",
                    completed_at=None
                    if item.data.get("completed_at") is None
                    else item.time("completed_at"),
                )
            )
        return runs

    def annotations(self, full_name: str, check_run_id: int) -> list[Annotation]:
        found, _ = self.wire.pages(
            f"read the annotations of check run {check_run_id} in {full_name}",
            f"{repo_path(full_name)}/check-runs/{check_run_id}/annotations",
        )
        return [
            Annotation(
                path=item.text("path"),
                start_line=item.number("start_line"),
                end_line=item.number("end_line"),
                level=item.text_or_none("annotation_level") or "notice",
                message=item.text_or_none("message") or "",
                title=item.text_or_none("title") or "",
            )
            for item in found
        ]

    def job_log_tail(self, full_name: str, job_id: int, max_bytes: int) -> str:
        """The last `max_bytes` of a GitHub Actions job's log (GitHub redirects to it)."""
        data, _ = self.wire.download(
            f"read the log of job {job_id} in {full_name}",
            f"{self.api_url}{repo_path(full_name)}/actions/jobs/{job_id}/logs",
            max_bytes=max_bytes,
            tail=True,
        )
        return data.decode("utf-8", errors="replace")

    def download(self, url: str, max_bytes: int) -> bytes | None:
        """A file pasted into an issue or a comment (GitHub keeps them on its own host); None
        when it is larger than `max_bytes`."""
        data, cut = self.wire.download(f"download {url}", url, max_bytes=max_bytes)
        return None if cut else data

    # ------------------------------------------------------------------------- writes

    def open_pull_request(
        self,
        full_name: str,
        *,
        title: str,
        body: str,
        head: str,
        base: str,
        closes: int | None = None,
        draft: bool = False,
    ) -> PullRequest:
        """Open a pull request from branch `head` into `base`; with `closes`, its body links
        that issue so merging closes it."""
        if closes is not None:
            body = link_issue(body, closes)
        pull = self.wire.call(
            f"open a pull request from {head} into {base} in {full_name}",
            "POST",
            f"{repo_path(full_name)}/pulls",
            body={"title": title, "body": body, "head": head, "base": base, "draft": draft},
        )
        return _pull_request(full_name, pull)

    def update_pull_request_body(
        self, full_name: str, number: int, body: str, *, closes: int | None = None
    ) -> PullRequest:
        if closes is not None:
            body = link_issue(body, closes)
        pull = self.wire.call(
            f"update pull request {full_name}#{number}",
            "PATCH",
            f"{repo_path(full_name)}/pulls/{number}",
            body={"body": body},
        )
        return _pull_request(full_name, pull)

    def comment(self, full_name: str, number: int, body: str) -> Comment:
        """Comment on an issue or pull request."""
        comment = self.wire.call(
            f"comment on {full_name}#{number}",
            "POST",
            f"{repo_path(full_name)}/issues/{number}/comments",
            body={"body": body},
        )
        return Comment(
            id=comment.number("id"),
            author=comment.author(),
            body=comment.text("body"),
            html_url=comment.text("html_url"),
        )

    def create_review(
        self,
        full_name: str,
        number: int,
        *,
        commit_id: str,
        body: str,
        comments: tuple[InlineComment, ...] = (),
    ) -> str:
        """Post one review of event COMMENT (never an approval or a request for changes) with
        its inline comments; GitHub refuses the whole review if one comment is off the diff.
        Returns the review's address."""
        review = self.wire.call(
            f"post a review on {full_name}#{number}",
            "POST",
            f"{repo_path(full_name)}/pulls/{number}/reviews",
            body={
                "commit_id": commit_id,
                "body": body,
                "event": "COMMENT",
                "comments": [_inline(comment) for comment in comments],
            },
        )
        return review.text("html_url")

    def reply_in_thread(self, full_name: str, number: int, comment_id: int, body: str) -> str:
        """Reply in the review thread of comment `comment_id`; returns the reply's address."""
        reply = self.wire.call(
            f"reply in a review thread of {full_name}#{number}",
            "POST",
            f"{repo_path(full_name)}/pulls/{number}/comments/{comment_id}/replies",
            body={"body": body},
        )
        return reply.text("html_url")


def _pull_request(full_name: str, pull: Answer) -> PullRequest:
    head, base = pull.part("head"), pull.part("base")
    head_repo = head.part_or_none("repo")
    return PullRequest(
        repository=full_name,
        number=pull.number("number"),
        title=pull.text("title"),
        body=pull.text_or_none("body") or "",
        author=pull.author(),
        state=pull.text("state"),
        html_url=pull.text("html_url"),
        head_branch=head.text("ref"),
        head_repo=head_repo.text("full_name") if head_repo is not None else None,
        head_sha=head.text("sha"),
        base_branch=base.text("ref"),
    )


def _inline(comment: InlineComment) -> dict[str, object]:
    inline: dict[str, object] = {
        "path": comment.path,
        "line": comment.line,
        "side": comment.side,
        "body": comment.body,
    }
    if comment.start_line is not None and comment.start_line < comment.line:
        inline["start_line"] = comment.start_line
        inline["start_side"] = comment.side
    return inline


def _thread(node: Answer) -> ReviewThread:
    comments = node.part("comments")
    return ReviewThread(
        id=node.text("id"),
        path=node.text("path"),
        line=node.number_or_none("line"),
        start_line=node.number_or_none("startLine"),
        resolved=node.flag("isResolved"),
        outdated=node.flag("isOutdated"),
        comments=tuple(
            ThreadComment(
                id=item.number("databaseId"),
                author=item.author("author"),
                body=item.text_or_none("body") or "",
                created_at=item.time("createdAt"),
                updated_at=item.time("updatedAt"),
                url=item.text_or_none("url") or "",
            )
            for item in comments.parts("nodes")
        ),
        comments_cut=comments.part("pageInfo").flag("hasNextPage"),
    )


THREADS_QUERY = """
query($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100, after: $after) {
        pageInfo { hasNextPage endCursor }
        nodes {
          id isResolved isOutdated path line startLine
          comments(first: 100) {
            pageInfo { hasNextPage endCursor }
            nodes { databaseId body createdAt updatedAt url author { login } }
          }
        }
      }
    }
  }
}
"""
