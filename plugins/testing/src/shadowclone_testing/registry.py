"""A Docker registry on loopback for tests (the CNCF distribution, Debian's docker-registry,
which scripts/install-registry puts in tools/registry): dev container features and images are
published to it as to any registry, and clients speak plain HTTP to `localhost`.

    with LocalRegistry(tmp_path / "registry") as registry:
        publish_features(cli, registry.address, "team/features", folder)  # folder/src/NAME/
        # "localhost:PORT/team/features/NAME:1" in a devcontainer.json's features
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from shadowclone_testing.web import free_port

PROGRAM_VARIABLE = "SHADOWCLONE_REGISTRY_BIN"
"""A docker-registry program to use instead of the checkout's tools/registry."""
START_TIMEOUT_S = 20.0


def find_program() -> Path | None:
    """The registry's program: `SHADOWCLONE_REGISTRY_BIN`, a checkout's tools/registry, or
    `docker-registry` on PATH; None when there is none."""
    named = os.environ.get(PROGRAM_VARIABLE)
    if named:
        return Path(named)
    checkout = Path(__file__).resolve().parents[4] / "tools/registry/docker-registry"
    if checkout.is_file():
        return checkout
    found = shutil.which("docker-registry")
    return Path(found) if found else None


class LocalRegistry:
    """A registry of its own in `folder`, on a free port of 127.0.0.1, for as long as the
    `with` lasts."""

    def __init__(self, folder: Path, program: Path | None = None, port: int = 0) -> None:
        """`port`: the one to take when it is free (as the images and features built from
        what the registry serves name it, Docker's build cache finds them again)."""
        found = program or find_program()
        if found is None:
            raise FileNotFoundError("no docker-registry: run scripts/install-registry")
        self.program = found
        self.folder = folder
        self.port = free_port(port)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """host:port, as an image or feature reference names it."""
        return f"localhost:{self.port}"

    def __enter__(self) -> LocalRegistry:
        self.folder.mkdir(parents=True, exist_ok=True)
        config = self.folder / "config.json"  # YAML's superset: the registry reads JSON too
        config.write_text(
            json.dumps(
                {
                    "version": 0.1,
                    "storage": {"filesystem": {"rootdirectory": str(self.folder / "data")}},
                    "http": {"addr": f"127.0.0.1:{self.port}"},
                    "log": {"level": "warn"},
                }
            )
        )
        log = (self.folder / "registry.log").open("ab")
        with log:
            self._process = subprocess.Popen(
                [str(self.program), "serve", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._answers():
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                said = (self.folder / "registry.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the registry did not start: {said}")
            time.sleep(0.05)
        return self

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v2/", timeout=1) as got:
                return bool(got.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None


def publish_features(cli: Path, registry: str, namespace: str, folder: Path) -> list[str]:
    """Publish the features of `folder/src` (one folder each, with its
    devcontainer-feature.json) to `registry` under `namespace` with the Dev Containers CLI, as a
    feature's author does; the published references, `registry/namespace/ID:MAJOR`."""
    node = shutil.which("node")
    assert node is not None, "publishing features needs node"
    argv = [node, str(cli), "features", "publish", str(folder / "src")]
    argv += ["--registry", registry, "--namespace", namespace, "--log-level", "info"]
    done = subprocess.run(
        argv,
        cwd=folder,
        env={"PATH": f"{Path(node).parent}{os.pathsep}/usr/bin{os.pathsep}/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    published = json.loads(done.stdout.strip().splitlines()[-1])
    return [
        f"{registry}/{namespace}/{feature}:{found['version'].partition('.')[0]}"
        for feature, found in published.items()
    ]
