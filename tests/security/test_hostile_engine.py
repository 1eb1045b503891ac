"""A hostile engine, told to break every rule, inside a whole clone: `shadowclone serve` with the
fake launcher run as root (so the engine runs as a user of its own, as in Docker), the real run
program, real git and the fake GitHub over HTTP.

The engine is the scripted engine running one shell script of attacks: it tries to read the
secrets and the run program's process, to write the files the run program trusts, to push the
default branch with what it can find, and it plants code in its git repository (hooks,
fsmonitor, a signing program, a clean filter, aliases, includes) for the run program to run at
save time. Every attack must fail, and GitHub must see no write but the clone's own branch and
pull request.
"""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

import pytest
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import State
from shadowclone_testing.harness import set_up
from shadowclone_testing.owner import SECRET, Owner
from shadowclone_testing.scripted import Run, Say

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="only root can give the engine a user of its own (the fake launcher run by a normal "
    "user cannot; the Docker tests cover that case)",
)

HOOK = """#!/bin/sh
# Planted by the engine: it records who ran it, and passes its input through (a filter).
touch "$(dirname "$0")/ran-$1-$(id -u)"
cat
"""

ATTACKS = r"""
set -u
# The log stays in the engine's own git folder (its home is removed when the clone ends).
report() { printf '%s: %s\n' "$1" "$2" >> "$PWD/.git/attacks.log"; }
attack() {
    name=$1; shift
    if out=$("$@" 2>&1); then report "$name" "SUCCEEDED: $out"; else report "$name" blocked; fi
}
keeper=$PPID
attack read-secrets cat "$SECRETS"
attack read-environ cat /proc/$keeper/environ
attack read-mem dd if=/proc/$keeper/mem bs=1 count=1 skip=$((0x400000))
attack list-fds ls /proc/$keeper/fd
attack read-fd cat /proc/$keeper/fd/0
attack signal kill -0 $keeper
attack private-git ls "$RUN/private"
attack write-carry sh -c "echo '{}' > '$RUN/carry.json'"
handoff='{"network": "open", "resume": "save"}'
attack write-handoff sh -c "echo '$handoff' > '$RUN/handoff.json'"
attack write-progress sh -c "echo '{}' >> '$RUN/progress.jsonl'"
attack write-request sh -c "echo '{}' > '$RUN/request.json'"
attack git-token sh -c 'test -n "${SHADOWCLONE_GIT_TOKEN:-}" && echo "$SHADOWCLONE_GIT_TOKEN"'
attack push-no-verify git push --no-verify origin HEAD:refs/heads/main
attack push-url git push --no-verify "$CLONE_URL" HEAD:refs/heads/main
attack rest-api curl -sf -X PATCH -H 'Content-Type: application/json' \
    -d '{"sha": "0000000000000000000000000000000000000000"}' \
    "$API/repos/you/app/git/refs/heads/main"
# Code for the run program to run when it saves the work.
git config core.fsmonitor "$MARK/hook fsmonitor"
git config core.hooksPath "$MARK/hooks"
git config gpg.program "$MARK/hook gpg"
git config commit.gpgsign true
git config filter.evil.clean "$MARK/hook clean"
git config filter.evil.smudge "$MARK/hook smudge"
git config alias.add "!$MARK/hook alias"
git config include.path "$MARK/included"
git config "includeIf.gitdir:/.path" "$MARK/included"
printf '* filter=evil\n' > .gitattributes
echo "planted" > planted.txt
report planted done
"""


def plant_kit(folder: Path) -> Path:
    """A folder every user may use, with the planted hook program and hooks folder in it."""
    folder.mkdir()
    hook = folder / "hook"
    hook.write_text(HOOK)
    hooks = folder / "hooks"
    hooks.mkdir()
    for name in (
        "pre-commit",
        "post-commit",
        "reference-transaction",
        "pre-push",
        "post-index-change",
    ):
        script = hooks / name
        script.write_text(f'#!/bin/sh\nexec "{hook}" {name}\n')
    (folder / "included").write_text(f"[core]\n\tfsmonitor = {hook} included\n")
    for path in (folder, hooks, hook, *hooks.iterdir(), folder / "included"):
        path.chmod(0o777 if path.is_dir() else 0o755)
    folder.chmod(0o777 | stat.S_ISVTX)
    return folder


def attack_script(person: Owner, kit: Path) -> str:
    """The attacks, for an engine whose workspace is the run folder's `workspace`."""
    variables = {
        "SECRETS": str(person.home.secrets_file),
        "MARK": str(kit),
        "CLONE_URL": f"{person.github.url}/you/app.git",
        "API": person.github.api_url,
    }
    exports = "".join(f"{key}={shlex.quote(value)}\n" for key, value in variables.items())
    return exports + 'RUN="$(dirname "$PWD")"\n' + ATTACKS


def test_a_hostile_engine_breaks_no_rule(sc_owner: Owner, tmp_path: Path) -> None:
    kit = plant_kit(tmp_path / "kit")
    main_before = sc_owner.github.branch_sha("you/app", "main")
    number = sc_owner.github.create_issue("you/app", author="you", title="Do something")
    script = attack_script(sc_owner, kit)
    sc_owner.serving([Run(script), Say("All done.")])
    clone_id = sc_owner.start(f"you/app#{number}")
    record = sc_owner.wait(clone_id, State.DONE, State.FAILED)
    folder = RunFolder(sc_owner.home.clones_dir / clone_id)

    assert not (folder.path / "engine").exists(), "the engine's home stays behind"
    results = (folder.path / "workspace" / ".git" / "attacks.log").read_text()
    lines = dict(line.split(": ", 1) for line in results.splitlines())
    assert lines.pop("planted") == "done"
    assert lines and all(value == "blocked" for value in lines.values()), results
    assert len(lines) == 15

    ran_as_root = [path.name for path in kit.iterdir() if path.name.endswith("-0")]
    assert ran_as_root == [], "the run program ran code the engine planted"

    assert record.state is State.DONE, record.report
    assert sc_owner.github.branch_sha("you/app", "main") == main_before
    [pull] = sc_owner.github.pull_requests("you/app")
    branch = f"shadowclone/{number}-do-something"
    assert sc_owner.github.read_file("you/app", branch, "planted.txt") == "planted\n"
    pushes = [r for r in sc_owner.github.requests() if r.path.endswith("git-receive-pack")]
    assert pushes, "the clone's branch was pushed"
    for path in (folder.progress_file, folder.record_file):
        text = path.read_text()
        assert SECRET not in text and sc_owner.token not in text
    assert pull.number


def test_a_hostile_review_cannot_steer_the_phase_that_posts(
    sc_owner: Owner,
    tmp_path: Path,
) -> None:
    """A stranger's pull request is reviewed in three launches; the engine of the middle one
    tries to rewrite what the last one (network on, token at hand) acts on."""
    kit = plant_kit(tmp_path / "kit")
    set_up(sc_owner.home, "you/app")
    number = sc_owner.github.create_pull_request(
        "you/app",
        author="stranger",
        branch="idea",
        title="An idea",
        files={"x.py": "x\n"},
        fork=True,
    )
    main_before = sc_owner.github.branch_sha("you/app", "main")
    script = attack_script(sc_owner, kit)
    sc_owner.serving([Run(script), Say("Reviewed.")])
    clone_id = sc_owner.start(f"you/app#{number}")
    done = sc_owner.wait(clone_id, State.DONE, State.FAILED)
    folder = RunFolder(sc_owner.home.clones_dir / clone_id)
    assert not (folder.path / "engine").exists(), "the engine's home stays behind"
    results = (folder.path / "workspace" / ".git" / "attacks.log").read_text()
    assert "SUCCEEDED" not in results, results
    assert done.state is State.DONE, done.report
    assert done.handoffs == 2
    assert sc_owner.github.branch_sha("you/app", "main") == main_before
    assert [p.name for p in kit.iterdir() if p.name.endswith("-0")] == []
    assert "Reviewed." in sc_owner.github.issue("you/app", number).reviews[-1].body
    pushes = [r for r in sc_owner.github.requests() if "git-receive-pack" in r.path]
    assert pushes, "the engine's pushes were tried"
    assert all(r.status == 401 and r.user is None for r in pushes), pushes
