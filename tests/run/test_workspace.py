"""Where the workspace's clone starts from before GitHub has named the repository."""

from __future__ import annotations

import urllib.parse

from hypothesis import given
from hypothesis import strategies as st
from shadowclone.run.cloning import clone_url_for

NAME = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)
HOST = st.from_regex(
    r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z]{2,6}){0,2}(:[1-9][0-9]{0,4})?", fullmatch=True
)


@given(
    scheme=st.sampled_from(["http", "https"]),
    host=HOST,
    prefix=st.sampled_from(["", "/", "/github", "/github/"]),
    owner=NAME,
    repo=NAME,
)
def test_an_http_github_gives_the_repository_under_its_own_host(
    scheme: str, host: str, prefix: str, owner: str, repo: str
) -> None:
    url = f"{scheme}://{host}{prefix}"
    guess = clone_url_for(url, f"{owner}/{repo}")
    assert guess is not None
    parts = urllib.parse.urlsplit(guess)
    assert (parts.scheme, parts.netloc) == (scheme, host)  # the token goes nowhere else
    assert parts.path == f"{prefix.rstrip('/')}/{owner}/{repo}.git"


@given(
    url=st.one_of(
        st.sampled_from(
            [
                "",
                "/srv/git",
                "file:///srv/git",
                "ssh://github.com",
                "git://github.com",
                "ext::sh -c touch% /tmp/x",
                "-u",
                "http://",
                "https:///path",
                "github.com",
            ]
        ),
        st.text(max_size=30).filter(lambda text: not text.startswith(("http://", "https://"))),
        st.text(max_size=30).map(lambda text: f" https://github.com{text}"),
        st.text(min_size=1, max_size=30)
        .filter(lambda text: any(not char.isprintable() or char.isspace() for char in text))
        .map(lambda text: f"https://github.com/{text}"),
    )
)
def test_anything_but_an_http_github_gives_no_guess(url: str) -> None:
    """git would take a path, another transport or an option: the clone waits for GitHub's
    own address instead."""
    assert clone_url_for(url, "owner/app") is None
