"""Running docker builds: their output line by line to whoever follows them (a clone's
progress, the owner's terminal), their last lines kept for the error, a cancel that ends them."""

from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence

from shadowclone.plugin import Refused

Say = Callable[[str], None]
"""Where a build's output lines go, one at a time; None: to this process's own output."""

TAIL_LINES = 12
"""How many of docker's last lines a failed build's error keeps."""


TLS_REFUSED = re.compile(
    r"SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT|unable to get local issuer certificate"
    r"|CERTIFICATE_VERIFY_FAILED|certificate verify failed|self[- ]signed certificate"
    r"|x509: certificate signed by unknown authority",
    re.IGNORECASE,
)
"""What a download in a build says when a TLS-inspecting proxy's certificate is not trusted."""
CA_HINT = (
    "; a certificate authority the build does not trust answered (a TLS-inspecting proxy?): "
    "give it with --ca-cert FILE (image build, env build) or [environment] ca_certs"
)


class BuildError(Refused):
    """An image could not be built; the message says why."""


def docker_cli() -> str:
    docker = shutil.which("docker")
    if docker is None:
        raise BuildError("building an environment needs the docker CLI")
    return docker


def image_id(image: str) -> str | None:
    """The local id of `image`, or None where it is not here (or Docker cannot say)."""
    return inspect_image(image, "{{.Id}}") or None


def inspect_image(image: str, template: str) -> str | None:
    """What `docker image inspect --format TEMPLATE` says of `image` (stripped); None where it
    is not here, or Docker cannot say."""
    docker = shutil.which("docker")
    if docker is None:
        return None
    done = subprocess.run(
        [docker, "image", "inspect", "--format", template, image],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def run_build(
    argv: Sequence[str],
    what: str,
    say: Say | None,
    cancel: threading.Event | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Run a docker build (or the Dev Containers CLI's); its output goes to `say` line by line
    (None: to ours). A set `cancel` ends it (docker then cancels the build). `env`: the
    program's whole environment (default: ours)."""
    environment = {**(os.environ if env is None else env), "BUILDKIT_PROGRESS": "plain"}
    if say is None:
        say = to_our_output
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    process = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env=environment,
    )
    ender = None
    if cancel is not None:
        ender = threading.Thread(target=_end_when, args=(cancel, process), daemon=True)
        ender.start()
    assert process.stdout is not None
    with process.stdout:
        for line in process.stdout:
            text = line.rstrip()
            if text:
                tail.append(text)
                say(text)
    code = process.wait()
    if cancel is not None and cancel.is_set():
        raise BuildError(f"the build of {what} was cancelled")
    if code != 0:
        last = " | ".join(tail)
        hint = CA_HINT if any(TLS_REFUSED.search(line) for line in tail) else ""
        raise BuildError(f"docker could not build {what} (exit {code}): {last}{hint}")


def to_our_output(line: str) -> None:
    print(line, flush=True)


def _end_when(cancel: threading.Event, process: subprocess.Popen[str]) -> None:
    while process.poll() is None:
        if cancel.wait(0.2):
            process.terminate()
            return
