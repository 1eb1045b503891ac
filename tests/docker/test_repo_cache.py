"""A repository of real size (the kit's `bigrepo`: 50,000 files, over 200 MB of history, served
by the fake GitHub) through the Docker launcher: two clones side by side fill the cache once
and both open pull requests; a third, after a push, fetches only the new commit and works on
it. The cache's other promises (a fork's head never in it, a cut fill made again, the engine
unable to write it) are tested with the fake launcher (tests/serve/test_repo_cache.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from shadowclone.contract import CONTAINER_REPO_CACHE
from shadowclone.node.schemas import State
from shadowclone.run.repocache import COMPLETE, MIRROR
from shadowclone_testing.bigrepo import FILES, real_size_repository
from shadowclone_testing.containers import SETTINGS, World
from shadowclone_testing.fakes.models import ModelRequest, Reply, Shell, Text
from shadowclone_testing.harness import set_up
from shadowclone_testing.serving import serving

REPO = "owner/big"


def work(request: ModelRequest) -> Reply:
    """Every session: one shell step, then done."""
    if request.tool_results():
        return Text("Done.")
    return Shell("ls src | wc -l > COUNTED.md && git log --oneline | wc -l >> COUNTED.md")


def test_clones_of_a_real_size_repository_share_its_cache_and_see_new_commits(
    world: World,
) -> None:
    world.github.create_repo(REPO, from_bare=real_size_repository())
    world.use("claude")
    set_up(world.paths, REPO, engine="claude", login="claude-api-key")
    world.model.rule = work
    issues = [world.github.create_issue(REPO, author="owner", title=f"Task {n}") for n in (1, 2)]
    with serving(world.node, SETTINGS):
        pair = [world.node.start(f"{REPO}#{number}").id for number in issues]
        ended = [world.ended(clone_id) for clone_id in pair]
        later = world.github.commit(REPO, "main", {"LATER.md": "pushed later\n"}, author="owner")
        third_issue = world.github.create_issue(REPO, author="owner", title="Task 3")
        third = world.node.start(f"{REPO}#{third_issue}").id
        ended.append(world.ended(third))
    for record in ended:
        assert (record.state, record.pr_url is not None) == (State.DONE, True), record
    [mirror] = [found.parent for found in world.paths.repo_cache(REPO).rglob(COMPLETE)]
    assert mirror.name == MIRROR
    main = subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(mirror), "rev-parse", "refs/heads/main"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert main.stdout.strip() == later
    for clone_id in [*pair, third]:
        workspace = world.paths.clones_dir / clone_id / "workspace"
        alternates = workspace / ".git" / "objects" / "info" / "alternates"
        assert alternates.read_text().split() == [f"{CONTAINER_REPO_CACHE}/{MIRROR}/objects"]
        assert _own_objects_bytes(workspace) < 5 * 2**20, "the history stayed in the cache"
    assert (world.paths.clones_dir / third / "workspace" / "LATER.md").is_file()
    files = sum(1 for _ in (world.paths.clones_dir / third / "workspace" / "src").rglob("*.bin"))
    assert files == FILES


def _own_objects_bytes(workspace: Path) -> int:
    objects = workspace / ".git" / "objects"
    return sum(path.stat().st_size for path in objects.rglob("*") if path.is_file())
