"""The repository's cache through whole clones (the real CLI, serve with the fake launcher, the
run program, real git and the fake GitHub): clones of one repository share one mirror and
borrow its objects; a later clone sees what was pushed since; a fork's work never enters it; a
mirror whose fill did not end is made again; the engine's user cannot write it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import State
from shadowclone.run.repocache import COMPLETE, MIRROR
from shadowclone_testing.harness import skip_or_fail
from shadowclone_testing.owner import Owner
from shadowclone_testing.scripted import Run, Write


def git(repo: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done.stdout.strip() if done.returncode == 0 else ""


def mirror_of(owner: Owner) -> Path:
    return owner.home.repo_cache("you/app") / MIRROR


def new_issue(owner: Owner) -> str:
    return f"you/app#{owner.github.create_issue('you/app', author='you', title='Work')}"


def workspace(owner: Owner, clone_id: str) -> Path:
    return RunFolder(owner.home.clones_dir / clone_id).path / "workspace"


def test_clones_of_one_repository_share_its_mirror_which_follows_the_repository(
    sc_owner: Owner,
) -> None:
    sc_owner.serving([Write("notes.md", "notes\n")])
    numbers = [
        sc_owner.github.create_issue("you/app", author="you", title=f"Task {n}") for n in (1, 2)
    ]
    ids = [sc_owner.start(f"you/app#{number}") for number in numbers]  # side by side
    for clone_id in ids:
        assert sc_owner.wait(clone_id, State.DONE, State.FAILED).pr_url is not None
    mirror = mirror_of(sc_owner)
    assert (mirror / COMPLETE).is_file()
    for clone_id in ids:
        alternates = workspace(sc_owner, clone_id) / ".git" / "objects" / "info" / "alternates"
        assert alternates.read_text().split() == [str(mirror / "objects")]
    later = sc_owner.github.commit("you/app", "main", {"later.txt": "pushed later\n"}, author="you")
    third = sc_owner.start(new_issue(sc_owner))
    assert sc_owner.wait(third, State.DONE, State.FAILED).pr_url is not None
    assert git(mirror, "rev-parse", "refs/heads/main") == later
    assert (workspace(sc_owner, third) / "later.txt").read_text() == "pushed later\n"
    assert git(workspace(sc_owner, third), "remote", "get-url", "origin").startswith("http")


def test_a_forks_pull_request_never_enters_the_mirror(sc_owner: Owner) -> None:
    sc_owner.serving([Write("review.md", "looked\n")])
    warm = sc_owner.start(new_issue(sc_owner))
    sc_owner.wait(warm, State.DONE, State.FAILED)
    mirror = mirror_of(sc_owner)
    number = sc_owner.github.create_pull_request(
        "you/app",
        author="stranger",
        branch="feature",
        title="A stranger's change",
        files={"feature.txt": "from a fork\n"},
        fork=True,
    )
    review = sc_owner.start(f"you/app#{number}")
    sc_owner.wait(review, State.DONE, State.FAILED)
    head = git(workspace(sc_owner, review), "rev-parse", "HEAD")
    assert (workspace(sc_owner, review) / "feature.txt").is_file()
    assert git(mirror, "cat-file", "-e", head, check=False) == ""
    # The repository's own branches, nothing else: no pull request, no fork's branch.
    origin = sc_owner.github.repo_path("you/app")
    branches = git(origin, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads")
    mirrored = git(mirror, "for-each-ref", "--format=%(refname) %(objectname)")
    assert mirrored.splitlines() == branches.splitlines()


def test_a_mirror_whose_fill_did_not_end_is_made_again(sc_owner: Owner) -> None:
    sc_owner.serving([Write("notes.md", "notes\n")])
    first = sc_owner.start(new_issue(sc_owner))
    sc_owner.wait(first, State.DONE, State.FAILED)
    mirror = mirror_of(sc_owner)
    # As a fill killed midway leaves it: no marker, objects missing, a second attempt begun.
    (mirror / COMPLETE).unlink()
    for pack in (mirror / "objects" / "pack").iterdir():
        pack.unlink()
    (mirror.parent / f"{MIRROR}.new").mkdir()
    second = sc_owner.start(new_issue(sc_owner))
    assert sc_owner.wait(second, State.DONE, State.FAILED).pr_url is not None
    assert (mirror / COMPLETE).is_file() and not (mirror.parent / f"{MIRROR}.new").exists()
    git(mirror, "fsck", "--connectivity-only")  # asserts it found nothing broken
    assert git(mirror, "rev-parse", "refs/heads/main") == sc_owner.github.branch_sha(
        "you/app", "main"
    )


def test_the_engines_user_cannot_write_the_cache(sc_owner: Owner) -> None:
    if os.geteuid() != 0:
        skip_or_fail("the engine has a user of its own only when serve runs as root")
    cache = sc_owner.home.repo_cache("you/app")
    sc_owner.serving([Write("notes.md", "notes\n")])
    warm = sc_owner.start(new_issue(sc_owner))
    sc_owner.wait(warm, State.DONE, State.FAILED)
    mirror = mirror_of(sc_owner)
    main = git(mirror, "rev-parse", "refs/heads/main")
    if sc_owner.serve is not None:
        sc_owner.serve.end()
    attempts = (
        f"touch {cache}/planted",
        f"echo evil > {mirror}/HEAD",
        f"git --git-dir={mirror} update-ref refs/heads/main HEAD~0",
        f"rm -rf {mirror}/objects",
    )
    sc_owner.serving(
        [Run(f"({line}) 2>/dev/null && echo WROTE || echo REFUSED") for line in attempts]
    )
    clone_id = sc_owner.start(new_issue(sc_owner))
    sc_owner.wait(clone_id, State.DONE, State.FAILED)
    lines, _, _ = RunFolder(sc_owner.home.clones_dir / clone_id).progress()
    outputs = [line.text.rsplit("\n", 1)[-1] for line in lines if "exited with code" in line.text]
    assert outputs.count("REFUSED") >= len(attempts) and "WROTE" not in outputs
    assert not (cache / "planted").exists()
    assert (mirror / "objects").is_dir() and (mirror / COMPLETE).is_file()
    assert git(mirror, "rev-parse", "refs/heads/main") == main
    assert "evil" not in (mirror / "HEAD").read_text()


def test_status_shows_the_caches_and_prune_drops_those_no_active_clone_uses(
    sc_owner: Owner,
) -> None:
    sc_owner.serving([Write("notes.md", "notes\n")])
    done = sc_owner.start(new_issue(sc_owner))
    sc_owner.wait(done, State.DONE, State.FAILED)
    cache = sc_owner.home.repo_cache("you/app")
    shown = sc_owner.cli("status")
    assert "cache you/app" in shown.out and "fetched" in shown.out, shown.out
    if sc_owner.serve is not None:
        sc_owner.serve.end()  # a clone started now stays queued: active
    queued = sc_owner.start(new_issue(sc_owner))
    kept = sc_owner.cli("prune", "--caches")
    assert kept.code == 0 and cache.is_dir()
    assert "you/app: a clone of it is active; its cache stays" in kept.err
    assert sc_owner.cli("stop", queued).code == 0
    would = sc_owner.cli("prune", "--caches", "--dry-run")
    assert "would remove the cache of you/app" in would.out and cache.is_dir()
    removed = sc_owner.cli("prune", "--caches", "--json")
    assert [c["repo"] for c in json.loads(removed.out)["caches"]] == ["you/app"]
    assert not cache.exists()
    assert sc_owner.cli("prune").code == 2
