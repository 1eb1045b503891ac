"""Two users in every clone: the run program (the keeper of the secrets) and the engine.

In a real container of the clone image, started by the Docker launcher, a script runs as the
keeper: it holds the secret in its environment, its memory and an open descriptor, makes a
shared folder, and starts an "engine" script through the very setpriv line the run program
uses. Every way the engine could reach the secret or the keeper (the secrets file and its
copy, /proc of the keeper, signals, the run folder, becoming the keeper) fails, and writing in
the shared folder works. The same script run by the keeper's own user succeeds at those
attacks, so their failure comes from the users and not from the script. Both owners are run:
root (serve as root: the keeper is the image's `clone` user) and an ordinary uid (the keeper is
the owner)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest
from shadowclone.plugin import CloneStatus, LaunchSpec, LaunchState, NetworkMode, Refused

from shadowclone_docker_launch.launcher import (
    CAPABILITIES,
    CLONE_UID,
    RUN_FOLDER,
    DockerLauncher,
    container_name,
)

SECRET = "sk-identities-7f3a9c2e"
ENGINE_UID = 1001
"""image/Dockerfile's defaults: the engine user (its group has the same id) and the group the
keeper and the engine share."""
SHARED_GID = 1002
KEEPER_CAPS = (1 << 0) | (1 << 5) | (1 << 6) | (1 << 7)
"""CAP_CHOWN, CAP_KILL, CAP_SETGID, CAP_SETUID."""
REQUEST = '{"the": "request"}\n'
WAIT_S = 60.0

KEEPER = r"""
set -eu
run="$SHADOWCLONE_RUN_FOLDER"
if [ -z "${HELD_SECRET:-}" ]; then
    # Hold the secret where an engine would look for it: the environment and memory.
    HELD_SECRET="$(cat "$SHADOWCLONE_SECRETS_FILE")"
    export HELD_SECRET
    exec sh "$0" "$@"
fi
exec 3<"$SHADOWCLONE_SECRETS_FILE"  # and a descriptor
trap 'echo TERM >>"$run/keeper-signalled"' TERM
{
    echo "uid=$(id -u)"
    echo "groups=$(id -G)"
    echo "caps=$(grep '^CapEff:' /proc/self/status | cut -f2)"
    echo "secrets_file=$SHADOWCLONE_SECRETS_FILE"
    echo "owner_variable=${SHADOWCLONE_OWNER-unset}"
} >"$run/keeper.txt"

shared="$run/workspace"
mkdir "$shared"
chgrp "$SHADOWCLONE_SHARED_GROUP" "$shared"
chmod 2770 "$shared"

stack="$(grep '\[stack\]' "/proc/$$/maps" | cut -d' ' -f1)"
engine="${SHADOWCLONE_ENGINE_USER%%:*}"
engine_group="${SHADOWCLONE_ENGINE_USER#*:}"
cp "$run/request.json" "$run/request.saved"

# The control: the same attacks by the keeper's own user.
env -i PATH="$PATH" sh "$run/engine.sh" "$$" "$stack" "$shared" control "$(id -u)" \
    >"$run/control.out" 2>&1 || true
cat "$run/request.saved" >"$run/request.json"
mv "$run/keeper-signalled" "$run/control-signalled" 2>/dev/null || true

env -i PATH="$PATH" \
    setpriv --reuid="$engine" --regid="$engine_group" --groups="$SHADOWCLONE_SHARED_GROUP" \
    --inh-caps=-all --ambient-caps=-all --no-new-privs -- \
    sh "$run/engine.sh" "$$" "$stack" "$shared" engine "$(id -u)" \
    >"$run/engine.out" 2>&1 || true
cat "$shared/engine-file" >"$run/keeper-read-shared"
echo "keeper done"
"""

ENGINE = r"""
pid=$1 stack=$2 shared=$3 tag=$4 keeper=$5
run=/clone/run
try() {
    name=$1
    shift
    if result=$("$@" 2>&1); then verdict=ok; else verdict=denied; fi
    printf '%s\t%s\t%s\n' "$name" "$verdict" "$(printf '%s' "$result" | tr -c '[:print:]' ' ')"
}
read_mem() {  # open the keeper's memory and read its stack, where its environment is
    start=$((0x${stack%-*}))
    end=$((0x${stack#*-}))
    dd if="/proc/$pid/mem" iflag=skip_bytes,count_bytes skip="$start" count=$((end - start)) \
        bs=65536 status=none | tr -c '[:print:]' '\n' | grep -aE '.{8,}'
}
read_fds() {  # every descriptor the keeper has open, the secrets file's among them
    read=1
    for fd in "/proc/$pid/fd/"*; do
        timeout 2 cat "$fd" && read=0
    done
    return $read
}
write() {
    echo "written by $tag" >"$1" && cat "$1"
}
try read_mounted_secrets cat /clone/secrets.toml
try read_secrets_copy cat /run/clone/secrets.toml
try read_environ cat "/proc/$pid/environ"
try read_maps cat "/proc/$pid/maps"
try read_mem read_mem
try ptrace_mem cat "/proc/$pid/mem"
try list_fds ls "/proc/$pid/fd"
try read_fds read_fds
try read_fd_3 cat "/proc/$pid/fd/3"
try signal_0 kill -0 "$pid"
try signal_term kill -TERM "$pid"
try become_keeper setpriv --reuid="$keeper" --regid="$keeper" --clear-groups -- id -u
try write_run_folder write "$run/$tag-was-here"
try overwrite_request write "$run/request.json"
try write_shared write "$shared/$tag-file"
printf 'caps\t%s\n' "$(grep '^CapEff:' /proc/self/status | cut -f2)"
printf 'id\t%s\t%s\n' "$(id -u)" "$(id -G)"
"""

ATTACKS = (
    "read_mounted_secrets",
    "read_secrets_copy",
    "read_environ",
    "read_maps",
    "read_mem",
    "ptrace_mem",
    "list_fds",
    "read_fds",
    "read_fd_3",
    "signal_0",
    "signal_term",
    "become_keeper",
    "write_run_folder",
    "overwrite_request",
)
DENIED = ("Permission denied", "Operation not permitted")
PROC_ATTACKS = (
    "read_environ",
    "read_maps",
    "read_mem",
    "ptrace_mem",
    "list_fds",
    "read_fds",
    "read_fd_3",
)
"""Attacks on the keeper through /proc: the kernel refuses them for the user alone."""


@pytest.fixture
def launcher(client: docker.DockerClient, image: str, tmp_path: Path) -> Iterator[DockerLauncher]:
    launcher = DockerLauncher(tmp_path / "clones", image, client=client)
    yield launcher
    for status in launcher.running():
        launcher.remove(status.clone_id)


def clone_spec(root: Path, image: str, number: int) -> LaunchSpec:
    clone_id = f"261202-0000{number:02d}-idnt"
    folder = root / "clones" / clone_id
    folder.mkdir(parents=True)
    (folder / "request.json").write_text(REQUEST, encoding="utf-8")
    (folder / "keeper.sh").write_text(KEEPER, encoding="utf-8")
    (folder / "engine.sh").write_text(ENGINE, encoding="utf-8")
    secrets = root / "secrets.toml"
    if not secrets.exists():
        secrets.write_text(f'github_token = "{SECRET}"\n', encoding="utf-8")
        secrets.chmod(0o600)
    return LaunchSpec(clone_id, folder, secrets, image, NetworkMode.OPEN)


def give(paths: list[Path], uid: int, gid: int) -> None:
    """The owner's files, as `start` and `config init` run by that owner make them."""
    for path in paths:
        for entry in (path, *(path.rglob("*") if path.is_dir() else ())):
            os.chown(entry, uid, gid)


def run_clone(launcher: DockerLauncher, spec: LaunchSpec, *command: str) -> CloneStatus:
    launcher.command_for = lambda _spec: list(command)
    launcher.launch(spec)
    deadline = time.monotonic() + WAIT_S
    while (status := launcher.status(spec.clone_id)).state is LaunchState.RUNNING:
        assert time.monotonic() < deadline, "the clone did not finish"
        time.sleep(0.1)
    return status


def results(path: Path) -> dict[str, tuple[str, str]]:
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        name, verdict, *detail = line.split("\t")
        found[name] = (verdict, detail[0] if detail else "")
    return found


def keeper_facts(folder: Path) -> dict[str, str]:
    text = (folder / "keeper.txt").read_text(encoding="utf-8")
    return dict(line.split("=", 1) for line in text.splitlines())


@pytest.mark.parametrize("owner", [(0, 0), (4242, 4242)], ids=["root-owner", "ordinary-owner"])
def test_the_engine_reaches_neither_the_secrets_nor_the_keeper(
    launcher: DockerLauncher,
    client: docker.DockerClient,
    image: str,
    tmp_path: Path,
    owner: tuple[int, int],
) -> None:
    launcher.owner = owner
    spec = clone_spec(tmp_path, image, 1)
    if owner[0] != 0:
        give([spec.run_folder, spec.secrets_file], *owner)
    secrets_before = spec.secrets_file.read_bytes()

    status = run_clone(launcher, spec, "sh", f"{RUN_FOLDER}/keeper.sh")

    assert status.exit_code == 0, status.output_tail
    assert "keeper done" in status.output_tail
    folder = spec.run_folder
    keeper_uid, keeper_gid = owner if owner[0] != 0 else (CLONE_UID, CLONE_UID)

    # The keeper: the owner's user (or `clone`), in the shared group, with just its four caps.
    keeper = keeper_facts(folder)
    assert int(keeper["uid"]) == keeper_uid
    assert sorted(map(int, keeper["groups"].split())) == sorted({keeper_gid, SHARED_GID})
    assert int(keeper["caps"], 16) == KEEPER_CAPS
    assert keeper["owner_variable"] == "unset", "the entry point hands the owner's ids on to no one"
    copied = owner[0] == 0
    secrets_file = "/run/clone/secrets.toml" if copied else "/clone/secrets.toml"
    assert keeper["secrets_file"] == secrets_file

    # The control: as the keeper's own user, the attacks reach the secret.
    control_text = (folder / "control.out").read_text(encoding="utf-8")
    control = results(folder / "control.out")
    assert SECRET in control_text
    for name in ("read_environ", "read_mem", "read_fds", "read_fd_3"):
        assert control[name][0] == "ok" and SECRET in control[name][1], (name, control[name])
    for name in ("read_maps", "list_fds", "signal_0", "signal_term", "write_run_folder"):
        assert control[name][0] == "ok", (name, control[name])
    secrets_attack = "read_secrets_copy" if copied else "read_mounted_secrets"
    assert control[secrets_attack][0] == "ok" and SECRET in control[secrets_attack][1]
    assert (folder / "control-signalled").read_text() == "TERM\n"

    # The engine: every attack fails, for lack of permission, and the secret never shows.
    engine_text = (folder / "engine.out").read_text(encoding="utf-8")
    assert SECRET not in engine_text, engine_text
    engine = results(folder / "engine.out")
    for name in ATTACKS:
        verdict, detail = engine[name]
        assert verdict == "denied", (name, detail)
    for name in (*PROC_ATTACKS, "read_mounted_secrets", "signal_0", "signal_term"):
        assert any(reason in engine[name][1] for reason in DENIED), (name, engine[name])
    for name in ("become_keeper", "write_run_folder", "overwrite_request"):
        assert any(reason in engine[name][1] for reason in DENIED), (name, engine[name])
    if copied:
        assert "Permission denied" in engine["read_secrets_copy"][1]
    else:
        assert "No such file" in engine["read_secrets_copy"][1], "no copy to read"
    assert int(engine["caps"][0], 16) == 0
    assert engine["id"] == (str(ENGINE_UID), f"{ENGINE_UID} {SHARED_GID}")
    assert not (folder / "keeper-signalled").exists(), "the engine's TERM never arrived"
    assert not (folder / "engine-was-here").exists()
    assert (folder / "request.json").read_text(encoding="utf-8") == REQUEST

    # What the two share works, in both directions.
    assert engine["write_shared"] == ("ok", "written by engine")
    shared_file = folder / "workspace" / "engine-file"
    assert (shared_file.stat().st_uid, shared_file.stat().st_gid) == (ENGINE_UID, SHARED_GID)
    assert (folder / "keeper-read-shared").read_text(encoding="utf-8") == "written by engine\n"

    # The container: root with four capabilities, told the owner, and the host's files kept.
    inspected = client.api.inspect_container(container_name(spec.clone_id))
    host = inspected["HostConfig"]
    assert inspected["Config"]["User"] == "0:0"
    assert host["CapDrop"] == ["ALL"] and sorted(host["CapAdd"]) == sorted(CAPABILITIES)
    assert any(opt.startswith("no-new-privileges") for opt in host["SecurityOpt"])
    assert f"SHADOWCLONE_OWNER={owner[0]}:{owner[1]}" in inspected["Config"]["Env"]
    assert ("/run/clone" in host["Tmpfs"]) is copied
    assert spec.secrets_file.read_bytes() == secrets_before
    info = spec.secrets_file.stat()
    assert (info.st_uid, info.st_mode & 0o777) == (owner[0], 0o600)
    if not copied:
        assert (folder.stat().st_uid, (folder / "request.json").stat().st_uid) == owner


LATER_PHASE = r"""
set -eu
run="$SHADOWCLONE_RUN_FOLDER"
cat "$run/deliveries.jsonl" "$run/from-serve/note"
echo more >>"$run/from-serve/note"
stat -c '%n %u:%g %a' "$run" "$run/workspace" "$run/workspace/engine-dir" \
    "$run/workspace/engine-dir/file" "$run/deliveries.jsonl" "$run/from-serve"
"""


def test_a_later_phase_takes_over_what_root_wrote_and_leaves_the_clones_own(
    launcher: DockerLauncher, image: str, tmp_path: Path
) -> None:
    """Serve as root, between two phases of one clone: the run folder is the keeper's, with
    the shared workspace and a folder handed to the engine in it, all unreadable by root
    without DAC_READ_SEARCH, and root has written more. The next phase's keeper may use what
    root wrote, and the clone's own folders keep their users and groups."""
    launcher.owner = (0, 0)
    spec = clone_spec(tmp_path, image, 2)
    folder = spec.run_folder
    engine_dir = folder / "workspace" / "engine-dir"
    engine_dir.mkdir(parents=True)
    (engine_dir / "file").write_text("the engine's\n")
    give([folder], CLONE_UID, CLONE_UID)
    give([folder / "workspace"], CLONE_UID, SHARED_GID)
    give([engine_dir], ENGINE_UID, SHARED_GID)
    for path in (folder / "workspace", engine_dir):
        path.chmod(0o2770)
    folder.chmod(0o700)
    (folder / "deliveries.jsonl").write_text('{"line": 1}\n')
    (folder / "from-serve").mkdir(mode=0o700)
    (folder / "from-serve" / "note").write_text("root's\n")
    (folder / "from-serve" / "note").chmod(0o600)

    status = run_clone(launcher, spec, "sh", "-c", LATER_PHASE)

    assert status.exit_code == 0, status.output_tail
    lines = status.output_tail.splitlines()
    assert lines[:2] == ['{"line": 1}', "root's"]
    owners = dict(line.split(" ", 1) for line in lines[2:])
    assert owners == {
        RUN_FOLDER: f"{CLONE_UID}:{CLONE_UID} 700",
        f"{RUN_FOLDER}/workspace": f"{CLONE_UID}:{SHARED_GID} 2770",
        f"{RUN_FOLDER}/workspace/engine-dir": f"{ENGINE_UID}:{SHARED_GID} 2770",
        f"{RUN_FOLDER}/workspace/engine-dir/file": f"{ENGINE_UID}:{SHARED_GID} 644",
        f"{RUN_FOLDER}/deliveries.jsonl": f"{CLONE_UID}:{CLONE_UID} 644",
        f"{RUN_FOLDER}/from-serve": f"{CLONE_UID}:{CLONE_UID} 700",
    }
    assert (folder / "from-serve" / "note").read_text() == "root's\nmore\n"


def test_an_owner_with_the_engine_users_uid_is_refused(
    launcher: DockerLauncher, client: docker.DockerClient, image: str, tmp_path: Path
) -> None:
    launcher.owner = (ENGINE_UID, ENGINE_UID)
    spec = clone_spec(tmp_path, image, 3)
    with pytest.raises(Refused, match="ENGINE_UID") as refused:
        launcher.launch(spec)
    assert "\n" not in str(refused.value)
    with pytest.raises(Refused, match="ENGINE_UID"):
        launcher.check()
    assert launcher.traces(spec.clone_id) == []

    # The entry point refuses too, whoever starts the image.
    with pytest.raises(docker.errors.ContainerError) as failed:
        client.containers.run(
            image,
            ["true"],
            environment={"SHADOWCLONE_OWNER": f"{ENGINE_UID}:{ENGINE_UID}"},
            cap_drop=["ALL"],
            cap_add=list(CAPABILITIES),
            remove=True,
        )
    assert failed.value.exit_status == 70
    assert "ENGINE_UID" in str(failed.value), "its one line says what to rebuild"


def test_the_entry_takes_over_a_run_folder_while_serve_writes_in_it(
    launcher: DockerLauncher, image: str, tmp_path: Path
) -> None:
    """Serve (root) writes its record the atomic way while the clone starts: a temporary file
    appears and is renamed away between the entry's listing of the folder and its look at the
    file. The entry goes on; the clone starts every time."""
    launcher.owner = (0, 0)
    stop = threading.Event()

    def serve_writes(folder: Path) -> None:
        while not stop.is_set():
            for name in range(20):
                temporary = folder / f".record.json.{name}.tmp"
                temporary.write_text("{}\n")
                temporary.rename(folder / "record.json")

    for number in range(12):
        spec = clone_spec(tmp_path, image, 10 + number)
        writer = threading.Thread(target=serve_writes, args=(spec.run_folder,), daemon=True)
        stop.clear()
        writer.start()
        try:
            status = run_clone(launcher, spec, "true")
        finally:
            stop.set()
            writer.join()
        assert status.exit_code == 0, status.output_tail
