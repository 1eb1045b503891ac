"""What tests do to the conversation of an issue or pull request, and what its REST writes do:
comments with their times, and users deleted since they wrote (reviews: reviewstore.py)."""

from __future__ import annotations

import attrs

from shadowclone_testing.fakes.github.model import (
    Comment,
    now,
)
from shadowclone_testing.fakes.github.pullstore import PullRequestStore


class ConversationStore(PullRequestStore):
    """The admin and write side of comments and users."""

    # ------------------------------------------------------------------------- comments

    def add_comment(
        self,
        full_name: str,
        number: int,
        *,
        author: str,
        body: str,
        created_at: str | None = None,
    ) -> Comment:
        """A comment on an issue or pull request, now or at `created_at` (ISO 8601)."""
        with self.lock:
            repo = self._repo(full_name)
            issue = self.issue(full_name, number)
            created = created_at or now()
            comment = Comment(id=self.state.next_id(), author=author, body=body, created_at=created)
            repo.issues[number] = attrs.evolve(
                issue,
                comments=(*issue.comments, comment),
                updated_at=max(issue.updated_at, created),
            )
            self._save()
            return comment

    def edit_comment(
        self, full_name: str, comment_id: int, *, body: str, updated_at: str | None = None
    ) -> Comment:
        """Give an issue comment a new body, updated now or at `updated_at`."""
        with self.lock:
            repo = self._repo(full_name)
            for issue in repo.issues.values():
                for index, comment in enumerate(issue.comments):
                    if comment.id == comment_id:
                        edited = attrs.evolve(comment, body=body, updated_at=updated_at or now())
                        comments = list(issue.comments)
                        comments[index] = edited
                        repo.issues[issue.number] = attrs.evolve(issue, comments=tuple(comments))
                        self._save()
                        return edited
            raise KeyError(f"no issue comment {comment_id} in {full_name}")

    # ------------------------------------------------------------------------- users

    def delete_user(self, login: str) -> None:
        """Delete an account: its tokens stop working and GitHub names no author for what it
        wrote (`user: null`)."""
        with self.lock:
            self.state.users[login] = attrs.evolve(self.user(login), deleted=True)
            for token in [t for t, owner in self.state.tokens.items() if owner == login]:
                del self.state.tokens[token]
            self._save()

    def is_deleted(self, login: str) -> bool:
        user = self.state.users.get(login)
        return user is not None and user.deleted

    # ------------------------------------------------------------------------- reviews

    # ------------------------------------------------------------------------- internals
