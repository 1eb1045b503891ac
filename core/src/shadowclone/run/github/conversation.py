"""The conversation of an issue or a pull request as a clone reads it: comments, reviews,
review threads (GraphQL: REST does not say which threads are resolved or outdated), check runs,
their annotations and the tail of a failing job's log."""

from __future__ import annotations

from shadowclone.errors import BadInput
from shadowclone.run.github.models import (
    Annotation,
    CheckRun,
    IssueComment,
    Review,
    ReviewThread,
    ThreadComment,
)
from shadowclone.run.github.wire import Answer, Wire, repo_path, segment


class ConversationCalls:
    """The reads of a conversation (a part of `GithubClient`)."""

    wire: Wire

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
            f"{self.wire.api_url}{repo_path(full_name)}/actions/jobs/{job_id}/logs",
            max_bytes=max_bytes,
            tail=True,
        )
        return data.decode("utf-8", errors="replace")

    def download(self, url: str, max_bytes: int) -> bytes | None:
        """A file pasted into an issue or a comment (GitHub keeps them on its own host); None
        when it is larger than `max_bytes`."""
        data, cut = self.wire.download(f"download {url}", url, max_bytes=max_bytes)
        return None if cut else data


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
