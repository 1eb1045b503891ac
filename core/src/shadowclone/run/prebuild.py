"""A prebuild: what a repository's `onCreateCommand` and `updateContentCommand` make, made
once per commit of its default branch and kept in an image, as the Dev Container specification's
prebuilds keep it, so that each clone runs only `postCreateCommand` and `postStartCommand`.

Run as root in a container of the repository's environment image, with the repository's cache
mounted read-only, the network on and no secret (`python -m shadowclone.run.prebuild SPEC`,
`SPEC` the commit and the commands as JSON, `PrebuildSpec`): the default branch's commit is
checked out where a clone's workspace is, the commands run there as the engine's user with the
engine's home, as in a clone, and what they made (files no commit holds, and the home) is
moved to `contract.CONTAINER_PREBUILT`, which the launcher then commits into an image. A clone
copies it into its own workspace and home (`run/lifecycle.py`): the run folder is mounted over
the paths the commands ran in, so nothing is found there by chance.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs

from shadowclone import contract
from shadowclone.node.lifecycle import PREBUILT_KEYS, PrebuildSpec
from shadowclone.run.identity import EngineIdentity, IdentityError, engine_identity
from shadowclone.run.lifecycle import read_features

COMMAND_TIMEOUT_S = 30 * 60.0
GIT_TIMEOUT_S = 10 * 60.0


class PrebuildFailed(Exception):
    """One line: what failed."""


def prebuild(spec: PrebuildSpec, identity: EngineIdentity, mirror: Path, out: Path) -> None:
    """Check out `spec.commit` from `mirror` where a clone's workspace is, run the commands
    there as the engine, and move what they made into `out` (`workspace`, `home`, and the
    info file)."""
    run_folder = Path(contract.CONTAINER_RUN_FOLDER)
    workspace = Path(contract.CONTAINER_WORKSPACE)
    home = run_folder / contract.ENGINE_AREA / "home"
    for folder in (run_folder, run_folder / contract.ENGINE_AREA, home, home / "tmp", workspace):
        folder.mkdir(parents=True, exist_ok=True)
        if identity.isolated:
            assert identity.uid is not None and identity.gid is not None
            os.chown(folder, identity.uid, identity.gid)
    env = identity.environment(os.environ, home)
    # The mirror is the run program's, not the engine's: git reads it all the same only with
    # `safe.directory` in a global config (a local clone drops `-c` settings on the way to the
    # mirror's side).
    trusting = Path(tempfile.mkdtemp(prefix="prebuild-")) / "gitconfig"
    trusting.write_text("[safe]\n\tdirectory = *\n")
    trusting.parent.chmod(0o755)
    as_engine = _Runner(identity, workspace, {**env, "GIT_CONFIG_GLOBAL": str(trusting)})
    source = f"file://{mirror}"
    as_engine.git("clone", "--quiet", "--no-checkout", source, ".")
    as_engine.git("checkout", "--quiet", spec.commit)
    # As a clone runs them (run/lifecycle.py): remoteEnv never over the engine's home.
    commands_env = {**env, **spec.lifecycle.environment(os.environ)}
    commands_env.update(HOME=env["HOME"], TMPDIR=env["TMPDIR"])
    features = read_features()  # this image's, as a clone of it reads them
    for group in spec.lifecycle.groups(PREBUILT_KEYS, features):  # a group's in parallel
        for label, line in group:
            print(f"{label}: $ {line}", flush=True)
        with ThreadPoolExecutor(len(group)) as pool:
            codes = list(pool.map(lambda pair: as_engine.shell(pair[1], commands_env), group))
        for (label, line), code in zip(group, codes, strict=True):
            if code != 0:
                ended = "timed out" if code is None else f"exited {code}"
                raise PrebuildFailed(f"{label} `{line}` {ended}")
    # Every file no commit holds, ignored or not (a dependency folder is most often ignored).
    listed = as_engine.git("ls-files", "--others", "--directory", "-z")
    made = sorted(path.rstrip("/") for path in listed.split("\0") if path)
    kept = out / "workspace"
    for relative in made:
        target = kept / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(workspace / relative), target)
    shutil.rmtree(home / "tmp", ignore_errors=True)
    shutil.move(str(home), out / "home")
    commands = [line for _, line in spec.lifecycle.prebuilt()]
    info = {"commit": spec.commit, "commands": commands, "made": made}
    (out / contract.PREBUILT_INFO).write_text(json.dumps(info, indent=1) + "\n")
    shutil.rmtree(run_folder / contract.ENGINE_AREA, ignore_errors=True)
    shutil.rmtree(workspace, ignore_errors=True)


@attrs.frozen
class _Runner:
    identity: EngineIdentity
    cwd: Path
    env: Mapping[str, str]

    def git(self, *args: str) -> str:
        settings = ["-c", "core.hooksPath=/dev/null"]
        settings += ["-c", "advice.detachedHead=false"]
        done = subprocess.run(
            self.identity.wrap(["git", *settings, *args]),
            cwd=self.cwd,
            env=dict(self.env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            said = (done.stderr.strip() or done.stdout.strip()).splitlines()
            raise PrebuildFailed(f"git {args[0]}: {said[-1] if said else 'no message'}")
        return done.stdout

    def shell(self, line: str, env: Mapping[str, str]) -> int | None:
        try:
            done = subprocess.run(
                self.identity.wrap(["/bin/sh", "-c", line]),
                cwd=self.cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                timeout=COMMAND_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return None
        return done.returncode


def main(argv: Sequence[str]) -> int:
    """Exit 0 with the prebuilt files in place; else 1, the reason on the last line."""
    try:
        (text,) = argv
        spec = PrebuildSpec.from_json(text)
        out = Path(contract.CONTAINER_PREBUILT)
        out.mkdir(parents=True, exist_ok=True)
        mirror = Path(contract.CONTAINER_REPO_CACHE) / contract.REPO_CACHE_MIRROR
        prebuild(spec, engine_identity(), mirror, out)
    except (
        PrebuildFailed,
        IdentityError,
        OSError,
        KeyError,
        ValueError,
        subprocess.TimeoutExpired,
    ) as error:
        print(f"prebuild failed: {error}", flush=True)
        return 1
    print(f"prebuilt {spec.commit}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
