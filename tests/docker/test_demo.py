"""With Docker: `shadowclone demo --launcher docker` runs the whole clone in a container of
the clone image, against the fake GitHub, with no account."""

from __future__ import annotations

import re

from shadowclone_testing.harness import run_shadowclone


def test_the_demo_runs_its_clone_in_docker(image: str) -> None:
    result = run_shadowclone("demo", "--launcher", "docker", "--image", image)
    assert result.code == 0, result.out[-3000:] + result.err[-3000:]
    assert "serve is running (docker launcher, scripted engine)" in result.out
    assert re.search(r"pull request http://[\d.]+:\d+/you/hello/pull/\d+", result.out)
    assert "Hello, in a friendly style!" in result.out
