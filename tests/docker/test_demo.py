"""With Docker: `shadowclone demo --launcher docker` runs the whole clone in a container of
the clone image, against the fake GitHub, with no account."""

from __future__ import annotations

import re
from pathlib import Path

from shadowclone_testing.harness import run_shadowclone


def test_the_demo_runs_its_clone_in_docker(image: str, tmp_path: Path) -> None:
    # The demo's home in the test's own folder, where the check for containers left behind
    # looks (the session's temporary folder).
    env = {"TMPDIR": str(tmp_path)}
    result = run_shadowclone("demo", "--launcher", "docker", "--image", image, env=env)
    assert result.code == 0, result.out[-3000:] + result.err[-3000:]
    assert "serve is running (docker launcher, scripted engine)" in result.out
    assert re.search(r"pull request http://[\d.]+:\d+/you/hello/pull/\d+", result.out)
    assert "Hello, in a friendly style!" in result.out
