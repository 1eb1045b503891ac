"""One REST request to the fake GitHub, as its route handlers see it, and the error body."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypeVar

import attrs

from shadowclone_testing.fakes.github import paging
from shadowclone_testing.fakes.github.extras import ExtrasStore
from shadowclone_testing.fakes.github.model import ApiError, Issue, Repo, User

API_PREFIX = "/api/v3"
DOCS = "https://docs.github.com/rest"

Json = dict[str, Any]
T = TypeVar("T")


def error_body(error: ApiError) -> Json:
    body: Json = {"message": error.message, "documentation_url": DOCS, "status": str(error.status)}
    if error.errors:
        body["errors"] = list(error.errors)
    return body


@attrs.frozen
class Call:
    """One REST request, with the token's user already resolved."""

    store: ExtrasStore
    web: str
    """`http://host:port` as the client addressed the server."""
    viewer: str | None
    query: dict[str, str]
    body: bytes
    path: str = ""
    """The path below the API prefix, without the query."""
    headers: list[tuple[str, str]] = attrs.field(factory=list)
    """Headers the handler adds to its answer, such as `Link`."""

    @property
    def api(self) -> str:
        return self.web + API_PREFIX

    def json(self) -> Json:
        try:
            data = json.loads(self.body or b"{}")
        except ValueError as e:
            raise ApiError(400, "Problems parsing JSON") from e
        if not isinstance(data, dict):
            raise ApiError(400, "Problems parsing JSON")
        return data

    def page(self, items: Sequence[T]) -> list[T]:
        """The page of `items` the query asks for; adds the `Link` header as GitHub does."""
        chosen, link = paging.paginate(items, url=self.api + self.path, query=self.query)
        if link is not None:
            self.headers.append(("Link", link))
        return chosen

    def signed_in(self) -> str:
        if self.viewer is None:
            raise ApiError(401, "Requires authentication")
        return self.viewer

    def repo(self, owner: str, name: str) -> Repo:
        """The repository if the viewer can see it; GitHub answers 404 for a private one."""
        repo = self.store.state.repo(f"{owner}/{name}")
        if repo is None or repo.permission(self.viewer) == "none":
            raise ApiError(404, "Not Found")
        return repo

    def issue(self, repo: Repo, number: str) -> Issue:
        issue = repo.issues.get(int(number)) if number.isdigit() else None
        if issue is None:
            raise ApiError(404, "Not Found")
        return issue

    def user(self, login: str) -> User:
        user = self.store.state.users.get(login)
        if user is None:
            raise ApiError(404, "Not Found")
        return user
