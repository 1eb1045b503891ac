"""A subset of GitHub's GraphQL API at `/api/graphql`, where GitHub Enterprise serves it: a pull
request's review threads with their comments, the viewer, and the rate limit.

The schema is a faithful extract of GitHub's (same type, field and argument names and
nullability), written here; graphql-core parses, validates and executes queries against it.
Errors come as GitHub sends them: HTTP 200 with `errors`, each with a `message`, and a `type`
where GitHub gives one.
"""

from __future__ import annotations

import base64
import json
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from graphql import GraphQLError, build_schema, graphql_sync

from shadowclone_testing.fakes.github.extras import PRIMARY_LIMIT, ExtrasStore
from shadowclone_testing.fakes.github.model import Issue, Repo, ReviewComment

MAX_FIRST = 100

SDL = '''
scalar DateTime
scalar URI

"""The possible sides of a diff."""
enum DiffSide {
  LEFT
  RIGHT
}

interface Node {
  id: ID!
}

interface Actor {
  avatarUrl(size: Int): URI!
  login: String!
  resourcePath: URI!
  url: URI!
}

type User implements Actor & Node {
  avatarUrl(size: Int): URI!
  databaseId: Int
  id: ID!
  login: String!
  name: String
  resourcePath: URI!
  url: URI!
}

type Organization implements Actor & Node {
  avatarUrl(size: Int): URI!
  databaseId: Int
  id: ID!
  login: String!
  resourcePath: URI!
  url: URI!
}

type PageInfo {
  endCursor: String
  hasNextPage: Boolean!
  hasPreviousPage: Boolean!
  startCursor: String
}

type RateLimit {
  cost: Int!
  limit: Int!
  nodeCount: Int!
  remaining: Int!
  resetAt: DateTime!
  used: Int!
}

type PullRequestReviewComment implements Node {
  author: Actor
  body: String!
  createdAt: DateTime!
  databaseId: Int
  diffHunk: String!
  id: ID!
  line: Int
  originalLine: Int
  outdated: Boolean!
  path: String!
  replyTo: PullRequestReviewComment
  startLine: Int
  updatedAt: DateTime!
  url: URI!
}

type PullRequestReviewCommentEdge {
  cursor: String!
  node: PullRequestReviewComment
}

type PullRequestReviewCommentConnection {
  edges: [PullRequestReviewCommentEdge]
  nodes: [PullRequestReviewComment]
  pageInfo: PageInfo!
  totalCount: Int!
}

type PullRequestReviewThread implements Node {
  comments(
    after: String
    before: String
    first: Int
    last: Int
    skip: Int
  ): PullRequestReviewCommentConnection!
  diffSide: DiffSide!
  id: ID!
  isCollapsed: Boolean!
  isOutdated: Boolean!
  isResolved: Boolean!
  line: Int
  originalLine: Int
  originalStartLine: Int
  path: String!
  resolvedBy: User
  startDiffSide: DiffSide
  startLine: Int
}

type PullRequestReviewThreadEdge {
  cursor: String!
  node: PullRequestReviewThread
}

type PullRequestReviewThreadConnection {
  edges: [PullRequestReviewThreadEdge]
  nodes: [PullRequestReviewThread]
  pageInfo: PageInfo!
  totalCount: Int!
}

type PullRequest implements Node {
  author: Actor
  body: String!
  databaseId: Int
  id: ID!
  number: Int!
  reviewThreads(
    after: String
    before: String
    first: Int
    last: Int
  ): PullRequestReviewThreadConnection!
  title: String!
  url: URI!
}

type Repository implements Node {
  id: ID!
  name: String!
  nameWithOwner: String!
  pullRequest(number: Int!): PullRequest
  url: URI!
}

type Query {
  rateLimit(dryRun: Boolean = false): RateLimit
  repository(followRenames: Boolean = true, name: String!, owner: String!): Repository
  viewer: User!
}
'''

SCHEMA = build_schema(SDL)
T = TypeVar("T")
Json = dict[str, Any]


class GitHubGraphQLError(GraphQLError):
    """An error GitHub types (NOT_FOUND, EXCESSIVE_PAGINATION...), its `type` kept in the
    answer."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def _cursor(index: int) -> str:
    return base64.b64encode(f"cursor:v2:{index}".encode()).decode()


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return -1
    try:
        return int(base64.b64decode(cursor).decode().rpartition(":")[2])
    except ValueError as e:
        raise GitHubGraphQLError(
            f"`{cursor}` does not appear to be a valid cursor.", "INVALID_CURSOR_ARGUMENTS"
        ) from e


def _connection(
    name: str, items: Sequence[T], render: Callable[[T], Json], args: dict[str, Any]
) -> Json:
    """A connection over `items`, paged with `first`/`after` or `last`/`before` as GitHub
    requires (one of `first` or `last`, at most 100)."""
    first, last = args.get("first"), args.get("last")
    if first is None and last is None:
        raise GitHubGraphQLError(
            f"You must provide a `first` or `last` value to properly paginate the `{name}` "
            "connection.",
            "MISSING_PAGINATION_BOUNDARIES",
        )
    for label, value in (("first", first), ("last", last)):
        if value is not None and value > MAX_FIRST:
            raise GitHubGraphQLError(
                f"Requesting {value} records on the `{name}` connection exceeds the `{label}` "
                f"limit of {MAX_FIRST} records.",
                "EXCESSIVE_PAGINATION",
            )
    start = _offset(args.get("after")) + 1 + (args.get("skip") or 0)
    before = args.get("before")
    end = _offset(before) if before is not None else len(items)
    indices = list(range(max(start, 0), min(end, len(items))))
    if first is not None:
        indices = indices[:first]
    if last is not None:
        indices = indices[-last:] if last else []
    nodes = [render(items[i]) for i in indices]
    return {
        "totalCount": len(items),
        "nodes": nodes,
        "edges": [{"cursor": _cursor(i), "node": n} for i, n in zip(indices, nodes, strict=True)],
        "pageInfo": {
            "hasNextPage": bool(indices) and indices[-1] < min(end, len(items)) - 1,
            "hasPreviousPage": bool(indices) and indices[0] > max(start, 0),
            "startCursor": _cursor(indices[0]) if indices else None,
            "endCursor": _cursor(indices[-1]) if indices else None,
        },
    }


class _Resolver:
    """Turns the store's state into the dicts graphql-core's default resolver reads; a field
    with arguments is a function of them."""

    def __init__(self, store: ExtrasStore, web: str, viewer: str) -> None:
        self.store = store
        self.web = web
        self.viewer = viewer

    def root(self) -> Json:
        return {
            "repository": self.repository,
            "rateLimit": self.rate_limit,
            "viewer": lambda _info: self.actor(self.viewer),
        }

    def actor(self, login: str) -> Json | None:
        user = self.store.state.users.get(login)
        if user is not None and user.deleted:
            return None
        return {
            "__typename": "User" if user is not None else "Organization",
            "avatarUrl": lambda _info, size=None: f"{self.web}/avatars/{login}",
            "databaseId": user.id if user else None,
            "id": f"U_{login}",
            "login": login,
            "name": user.name if user else None,
            "resourcePath": f"/{login}",
            "url": f"{self.web}/{login}",
        }

    def rate_limit(self, _info: Any, dryRun: bool = False) -> Json:
        return {
            "cost": 1,
            "limit": PRIMARY_LIMIT,
            "nodeCount": 0,
            "remaining": PRIMARY_LIMIT - 1,
            "used": 1,
            "resetAt": time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime(math.ceil(time.time()) + 3600)
            ),
        }

    def repository(self, _info: Any, owner: str, name: str, followRenames: bool = True) -> Json:
        repo = self.store.state.repo(f"{owner}/{name}")
        if repo is None or repo.permission(self.viewer) == "none":
            raise GitHubGraphQLError(
                f"Could not resolve to a Repository with the name '{owner}/{name}'.", "NOT_FOUND"
            )
        return {
            "id": f"R_{repo.id}",
            "name": repo.name,
            "nameWithOwner": repo.full_name,
            "url": f"{self.web}/{repo.full_name}",
            "pullRequest": lambda _info, number: self.pull_request(repo, number),
        }

    def pull_request(self, repo: Repo, number: int) -> Json:
        issue = repo.issues.get(number)
        if issue is None or not issue.is_pull_request:
            raise GitHubGraphQLError(
                f"Could not resolve to a PullRequest with the number of {number}.", "NOT_FOUND"
            )
        roots = [
            c for c in issue.review_comments if c.in_reply_to is None and self._shown(issue, c)
        ]
        return {
            "id": f"PR_{issue.id}",
            "databaseId": issue.id,
            "number": issue.number,
            "title": issue.title,
            "body": issue.body,
            "url": f"{self.web}/{repo.full_name}/pull/{issue.number}",
            "author": self.actor(issue.author),
            "reviewThreads": lambda _info, **args: _connection(
                "reviewThreads", roots, lambda root: self.thread(repo, issue, root), args
            ),
        }

    def _shown(self, issue: Issue, comment: ReviewComment) -> bool:
        review = next((r for r in issue.reviews if r.id == comment.review_id), None)
        return review is None or review.state != "PENDING" or review.author == self.viewer

    def thread(self, repo: Repo, issue: Issue, root: ReviewComment) -> Json:
        comments = [
            c
            for c in issue.review_comments
            if root.id in (c.id, c.in_reply_to) and self._shown(issue, c)
        ]
        return {
            "id": f"PRRT_{root.id}",
            "isResolved": root.resolved,
            "isOutdated": root.outdated,
            "isCollapsed": root.resolved,
            "path": root.path,
            "line": None if root.outdated else root.line,
            "startLine": None if root.outdated else root.start_line,
            "originalLine": root.line,
            "originalStartLine": root.start_line,
            "diffSide": root.side,
            "startDiffSide": root.start_side,
            "resolvedBy": None,
            "comments": lambda _info, **args: _connection(
                "comments", comments, lambda c: self.comment(repo, issue, root, c), args
            ),
        }

    def comment(
        self, repo: Repo, issue: Issue, root: ReviewComment, comment: ReviewComment
    ) -> Json:
        return {
            "id": f"PRRC_{comment.id}",
            "databaseId": comment.id,
            "body": comment.body,
            "createdAt": comment.created_at,
            "updatedAt": comment.updated_at,
            "diffHunk": comment.diff_hunk,
            "path": comment.path,
            "line": None if root.outdated else root.line,
            "originalLine": root.line,
            "startLine": None if root.outdated else root.start_line,
            "outdated": root.outdated,
            "url": f"{self.web}/{repo.full_name}/pull/{issue.number}#discussion_r{comment.id}",
            "author": self.actor(comment.author),
            "replyTo": self.comment(repo, issue, root, root) if comment.in_reply_to else None,
        }


def execute(store: ExtrasStore, web: str, viewer: str, body: bytes) -> tuple[int, Json]:
    """Answer one GraphQL request as GitHub does: 200 with `data` and `errors`."""
    try:
        request = json.loads(body or b"{}")
    except ValueError:
        return 400, {
            "message": "Problems parsing JSON",
            "documentation_url": "https://docs.github.com/graphql",
        }
    if not isinstance(request, dict) or not isinstance(request.get("query"), str):
        return 200, {
            "errors": [{"message": "A query attribute must be specified and must be a string."}]
        }
    variables = request.get("variables")
    result = graphql_sync(
        SCHEMA,
        request["query"],
        root_value=_Resolver(store, web, viewer).root(),
        variable_values=variables if isinstance(variables, dict) else None,
        operation_name=request.get("operationName"),
    )
    answer: Json = {}
    if result.data is not None:
        answer["data"] = result.data
    if result.errors:
        errors = []
        for error in result.errors:
            formatted = dict(error.formatted)
            original = error.original_error
            if isinstance(original, GitHubGraphQLError):
                formatted["type"] = original.kind
            errors.append(formatted)
        answer["errors"] = errors
    return 200, answer
