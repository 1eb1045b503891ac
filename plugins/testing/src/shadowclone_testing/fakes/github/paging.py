"""GitHub's REST pagination: `per_page` and `page` in, a page and a `Link` header out."""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")

DEFAULT_PER_PAGE = 30
MAX_PER_PAGE = 100


def _number(value: str | None, default: int) -> int:
    """GitHub ignores a value that is no positive number and uses the default."""
    if value is None or not value.strip().isdigit() or int(value) < 1:
        return default
    return int(value)


def paginate(
    items: Sequence[T], *, url: str, query: Mapping[str, str]
) -> tuple[list[T], str | None]:
    """The page of `items` the query asks for and the `Link` header value (None when everything
    fits on one page, as GitHub sends none then). `url` is the absolute address the client used,
    without its query; the links keep every other query parameter."""
    per_page = min(_number(query.get("per_page"), DEFAULT_PER_PAGE), MAX_PER_PAGE)
    page = _number(query.get("page"), 1)
    last = max(1, math.ceil(len(items) / per_page))
    chosen = list(items[(page - 1) * per_page : page * per_page])

    def link(to: int, rel: str) -> str:
        params = {**query, "page": str(to)}
        return f'<{url}?{urllib.parse.urlencode(params)}>; rel="{rel}"'

    links = []
    if page > 1:
        links.append(link(min(page - 1, last), "prev"))
    if page < last:
        links.append(link(page + 1, "next"))
        links.append(link(last, "last"))
    if page > 1:
        links.append(link(1, "first"))
    return chosen, ", ".join(links) or None
