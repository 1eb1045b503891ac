"""Reviews of a pull request in the fake GitHub: reviews and review comments placed on the
diff with GitHub's refusals, replies, threads resolved or outdated."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import attrs

from shadowclone_testing.fakes.github import diff, git
from shadowclone_testing.fakes.github.conversation import ConversationStore
from shadowclone_testing.fakes.github.model import (
    ApiError,
    Issue,
    Repo,
    Review,
    ReviewComment,
    ReviewState,
    Side,
    now,
)

ReviewEvent = Literal["APPROVE", "REQUEST_CHANGES", "COMMENT"]
EVENT_STATES: dict[str | None, ReviewState] = {
    "APPROVE": "APPROVED",
    "REQUEST_CHANGES": "CHANGES_REQUESTED",
    "COMMENT": "COMMENTED",
    None: "PENDING",
}


@attrs.frozen
class DraftComment:
    """One comment of a review being submitted, as `POST .../reviews` takes it."""

    path: str
    body: str
    line: int | None = None
    side: Side = "RIGHT"
    start_line: int | None = None
    start_side: Side | None = None
    position: int | None = None


def _unprocessable(message: str) -> ApiError:
    """GitHub's refusal of a review: errors as plain strings."""
    return ApiError(422, "Unprocessable Entity", (message,))


class ReviewStore(ConversationStore):
    """The admin and write side of reviews and review threads."""

    def head_sha(self, full_name: str, number: int) -> str:
        """The commit the pull request's head is at now."""
        sha = git.rev_parse(self.repo_path(full_name), f"refs/pull/{number}/head")
        if sha is None:
            raise KeyError(f"#{number} in {full_name} has no head")
        return sha

    def add_review(
        self,
        full_name: str,
        number: int,
        *,
        author: str,
        state: ReviewState = "COMMENTED",
        body: str = "",
        commit_id: str | None = None,
        submitted_at: str | None = None,
    ) -> int:
        """A review as it stands, with none of the REST API's refusals; returns its id."""
        with self.lock:
            self.user(author)
            review = Review(
                id=self.state.next_id(),
                author=author,
                state=state,
                body=body,
                commit_id=commit_id or self.head_sha(full_name, number),
                submitted_at=None if state == "PENDING" else submitted_at or now(),
            )
            self._update_pull(full_name, number, reviews=(review,))
            return review.id

    def add_review_comment(
        self,
        full_name: str,
        number: int,
        *,
        author: str,
        path: str,
        line: int,
        body: str,
        side: Side = "RIGHT",
        start_line: int | None = None,
        in_reply_to: int | None = None,
        created_at: str | None = None,
    ) -> int:
        """A comment on a line of the diff (or a reply in a thread), in a review of its own as
        GitHub makes for a single comment; returns its id. The line must be in the diff."""
        with self.lock:
            created = created_at or now()
            review_id = self.add_review(
                full_name, number, author=author, state="COMMENTED", submitted_at=created
            )
            if in_reply_to is not None:
                return self.reply(
                    full_name,
                    number,
                    in_reply_to,
                    author=author,
                    body=body,
                    review_id=review_id,
                    created_at=created,
                ).id
            draft = DraftComment(path=path, body=body, line=line, side=side, start_line=start_line)
            try:
                (comment,) = self._place(full_name, number, [draft], author, review_id, created)
            except ApiError as e:
                raise ValueError(f"{path}:{line} ({side}) is not in the diff of #{number}") from e
            self._update_pull(full_name, number, review_comments=(comment,))
            return comment.id

    def submit_review(
        self,
        full_name: str,
        number: int,
        *,
        author: str,
        body: str,
        event: str | None,
        commit_id: str | None,
        comments: Sequence[DraftComment],
    ) -> tuple[Review, list[ReviewComment]]:
        """What `POST .../pulls/N/reviews` does, refusing as GitHub does before creating
        anything."""
        with self.lock:
            issue = self.issue(full_name, number)
            if event is not None and event not in EVENT_STATES:
                raise _unprocessable(f"Invalid event: {event}")
            if event in ("APPROVE", "REQUEST_CHANGES") and author == issue.author:
                verb = "approve" if event == "APPROVE" else "request changes on"
                raise _unprocessable(f"Can not {verb} your own pull request")
            if event in ("REQUEST_CHANGES", "COMMENT") and not body and not comments:
                raise _unprocessable(
                    f"Review Body can't be blank when using {event} and no comments"
                )
            if any(r.state == "PENDING" and r.author == author for r in issue.reviews):
                raise _unprocessable("User can only have one pending review per pull request")
            review_id = self.state.next_id()
            created = now()
            placed = self._place(full_name, number, comments, author, review_id, created)
            state = EVENT_STATES[event]
            review = Review(
                id=review_id,
                author=author,
                state=state,
                body=body,
                commit_id=commit_id or self.head_sha(full_name, number),
                submitted_at=None if state == "PENDING" else created,
            )
            self._update_pull(full_name, number, reviews=(review,), review_comments=tuple(placed))
            return review, placed

    def reply(
        self,
        full_name: str,
        number: int,
        comment_id: int,
        *,
        author: str,
        body: str,
        review_id: int | None = None,
        created_at: str | None = None,
    ) -> ReviewComment:
        """A reply in the thread of `comment_id`; a reply to a reply joins the thread's root,
        as GitHub allows replies to top-level comments only."""
        with self.lock:
            issue = self.issue(full_name, number)
            target = next((c for c in issue.review_comments if c.id == comment_id), None)
            if target is None:
                raise ApiError(404, "Not Found")
            root_id = target.in_reply_to or target.id
            root = next(c for c in issue.review_comments if c.id == root_id)
            if review_id is None:
                review_id = self.add_review(full_name, number, author=author)
            created = created_at or now()
            comment = attrs.evolve(
                root,
                id=self.state.next_id(),
                review_id=review_id,
                author=author,
                body=body,
                created_at=created,
                updated_at=created,
                in_reply_to=root.id,
                resolved=False,
                outdated=False,
            )
            self._update_pull(full_name, number, review_comments=(comment,))
            return comment

    def resolve_thread(self, root_comment_id: int, resolved: bool = True) -> None:
        self._mark_thread(root_comment_id, resolved=resolved)

    def set_outdated(self, root_comment_id: int, outdated: bool = True) -> None:
        """Mark a thread outdated, as GitHub does once a push changes the lines it is on."""
        self._mark_thread(root_comment_id, outdated=outdated)

    def review_comment(self, comment_id: int) -> tuple[Repo, Issue, ReviewComment]:
        """The review comment with this id, wherever it is."""
        with self.lock:
            for repo in self.state.repos.values():
                for issue in repo.issues.values():
                    for comment in issue.review_comments:
                        if comment.id == comment_id:
                            return repo, issue, comment
            raise KeyError(f"no review comment {comment_id}")

    def _mark_thread(self, root_comment_id: int, **changes: Any) -> None:
        with self.lock:
            repo, issue, comment = self.review_comment(root_comment_id)
            if comment.in_reply_to is not None:
                raise ValueError(f"comment {root_comment_id} is a reply, not a thread's first")
            comments = [
                attrs.evolve(c, **changes) if c is comment else c for c in issue.review_comments
            ]
            repo.issues[issue.number] = attrs.evolve(issue, review_comments=tuple(comments))
            self._save()

    def _update_pull(
        self,
        full_name: str,
        number: int,
        *,
        reviews: tuple[Review, ...] = (),
        review_comments: tuple[ReviewComment, ...] = (),
    ) -> None:
        repo = self._repo(full_name)
        issue = self.issue(full_name, number)
        repo.issues[number] = attrs.evolve(
            issue,
            reviews=(*issue.reviews, *reviews),
            review_comments=(*issue.review_comments, *review_comments),
        )
        self._save()

    def _place(
        self,
        full_name: str,
        number: int,
        drafts: Sequence[DraftComment],
        author: str,
        review_id: int,
        created: str,
    ) -> list[ReviewComment]:
        """The drafts as review comments on the diff; one outside it refuses them all."""
        issue = self.issue(full_name, number)
        if issue.pull is None:
            raise ApiError(404, "Not Found")
        bare = self.repo_path(full_name)
        head = self.head_sha(full_name, number)
        hunks_by_file = diff.file_hunks(bare, f"refs/heads/{issue.pull.base_ref}", head)
        placed = []
        for draft in drafts:
            hunks = hunks_by_file.get(draft.path)
            if hunks is None:
                raise _unprocessable("Path could not be resolved")
            line, side = draft.line, draft.side
            if line is None and draft.position is not None:
                found = diff.at_position(hunks, draft.position)
                if found is None:
                    raise _unprocessable("Pull request review thread position is invalid")
                line, side = found
            if line is None:
                raise _unprocessable("Line could not be resolved")
            where = diff.place(hunks, line, side)
            if where is None:
                raise _unprocessable("Line could not be resolved")
            start_side = draft.start_side or side if draft.start_line is not None else None
            if draft.start_line is not None:
                assert start_side is not None
                if draft.start_line >= line and start_side == side:
                    raise _unprocessable("start_line must precede the end line.")
                start = diff.locate(hunks, draft.start_line, start_side)
                end = diff.locate(hunks, line, side)
                if start is None or end is None or start[0] != end[0] or start[1] >= end[1]:
                    raise _unprocessable("Start line could not be resolved")
            placed.append(
                ReviewComment(
                    id=self.state.next_id(),
                    review_id=review_id,
                    author=author,
                    body=draft.body,
                    path=draft.path,
                    line=line,
                    side=side,
                    start_line=draft.start_line,
                    start_side=start_side,
                    commit_id=head,
                    diff_hunk=where.diff_hunk,
                    created_at=created,
                    updated_at=created,
                    position=where.position,
                )
            )
        return placed
