"""What a clone works on: one issue or pull request, named as `owner/repo#N` or by its URL."""

from __future__ import annotations

import re
from urllib.parse import urlparse

import attrs

from shadowclone.errors import BadInput

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,99})"
_SHORT = re.compile(rf"^({_NAME})/({_NAME})#([1-9][0-9]{{0,9}})$")
_PATH = re.compile(rf"^/({_NAME})/({_NAME})/(issues|pull|pulls)/([1-9][0-9]{{0,9}})/?$")

EXPECTED = "expected owner/repo#N, or an issue or pull request URL"


@attrs.frozen
class Target:
    """An issue or pull request; `kind` is known only when a URL said it."""

    owner: str
    repo: str
    number: int
    kind: str | None = None
    """"issue" or "pull" when the URL said which; the run program asks GitHub otherwise."""

    @property
    def repo_full_name(self) -> str:
        return f"{self.owner}/{self.repo}"

    @property
    def key(self) -> str:
        """Issues and pull requests share numbers, so this names one either way."""
        return f"{self.owner}/{self.repo}#{self.number}"

    @property
    def folded(self) -> str:
        """The key as GitHub compares it: owner and repository in any letter case are one."""
        return self.key.lower()

    def __str__(self) -> str:
        return self.key

    @classmethod
    def parse(cls, text: str, github_url: str | None = None) -> Target:
        """`owner/repo#N`, or a URL on `github_url`'s host (any host if None): a URL on
        another host, or with a user, a password or another port, names something else."""
        text = text.strip()
        short = _SHORT.match(text)
        if short:
            owner, repo, number = short.groups()
            return cls(owner, repo.removesuffix(".git"), int(number))
        url = urlparse(text)
        if url.scheme in ("http", "https") and url.netloc:
            if github_url is not None:
                _check_host(text, url.netloc, github_url)
            path = _PATH.match(url.path)
            if path and not url.query and not url.fragment:
                owner, repo, kind, number = path.groups()
                return cls(owner, repo, int(number), "issue" if kind == "issues" else "pull")
        raise BadInput(f"target {text!r}: {EXPECTED}")


def same_repo(a: str, b: str) -> bool:
    """Whether two `owner/repo` names are one repository: GitHub ignores letter case."""
    return a.lower() == b.lower()


def _check_host(text: str, netloc: str, github_url: str) -> None:
    expected = urlparse(github_url).netloc.lower()
    if "@" in netloc:
        raise BadInput(f"target {text!r}: a URL with a user or password is never a target")
    if netloc.lower() != expected:
        raise BadInput(
            f"target {text!r}: {netloc} is not the configured GitHub ({expected}, [github] url)"
        )


def parse_repo(text: str) -> tuple[str, str]:
    """`owner/repo`, as `setup` takes it."""
    match = re.match(rf"^({_NAME})/({_NAME})$", text.strip())
    if not match:
        raise BadInput(f"repository {text!r}: expected owner/repo")
    return match.group(1), match.group(2)
