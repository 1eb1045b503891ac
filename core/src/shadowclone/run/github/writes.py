"""What a clone writes to GitHub: its pull request, comments, one review of event COMMENT
with inline comments, and replies in review threads. Writes are spaced by the wire."""

from __future__ import annotations

from shadowclone.run.github.models import Comment, InlineComment, PullRequest, link_issue
from shadowclone.run.github.wire import Answer, Wire, repo_path


class WriteCalls:
    """The writes (a part of `GithubClient`)."""

    wire: Wire

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
        return pull_request_of(full_name, pull)

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
        return pull_request_of(full_name, pull)

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


def pull_request_of(full_name: str, pull: Answer) -> PullRequest:
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
