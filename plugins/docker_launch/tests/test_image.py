"""The clone image scripts/build-image built from image/Dockerfile: an entry point that
drops root for the `clone` user, an `engine` user the run program starts the engine as, the
engines at the pinned versions, this checkout's shadowclone, and the run program as the entry
point's command; the test fakes and the scripted engine only in the demo image on top."""

from __future__ import annotations

import docker
from shadowclone import __version__

from shadowclone_docker_launch.images import engine_versions


def run(client: docker.DockerClient, image: str, *command: str) -> str:
    output: bytes = client.containers.run(image, list(command), remove=True)
    return output.decode().strip()


def test_the_image_runs_the_run_program_as_a_non_root_user_beside_an_engine_user(
    client: docker.DockerClient, image: str
) -> None:
    config = client.images.get(image).attrs["Config"]
    assert config["User"] == "root", "its entry point drops to `clone` itself"
    assert config["Entrypoint"] == ["/usr/local/bin/clone-entry"]
    assert config["Cmd"] == ["shadowclone-run"]
    assert run(client, image, "id", "-u") == "1000"
    assert "SHADOWCLONE_ENGINE_USER=1001:1001" in config["Env"]
    assert "SHADOWCLONE_SHARED_GROUP=1002" in config["Env"]
    assert (
        run(client, image, "id", "engine")
        == "uid=1001(engine) gid=1001(engine) groups=1001(engine)"
    )
    assert run(client, image, "getent", "group", "1002") == "clone-shared:x:1002:"
    assert run(client, image, "sh", "-c", "command -v shadowclone-run") == (
        "/opt/shadowclone/bin/shadowclone-run"
    )


def test_the_image_has_the_pinned_engines_git_and_this_shadowclone(
    client: docker.DockerClient, image: str
) -> None:
    pins = engine_versions()
    assert pins["CLAUDE_CODE_VERSION"] in run(client, image, "claude", "--version")
    assert pins["CODEX_VERSION"] in run(client, image, "codex", "--version")
    assert run(client, image, "git", "--version").startswith("git version 2.")
    found = run(client, image, "python", "-c", "import shadowclone; print(shadowclone.__version__)")
    assert found == __version__
    plugins = run(
        client,
        image,
        "python",
        "-c",
        "import shadowclone_claude, shadowclone_codex; print('ok')",
    )
    assert plugins == "ok"
    # One copy of each engine's native program: npm installs Claude Code's for glibc and for
    # musl alike, and the image keeps only the one its `claude` runs (hundreds of megabytes
    # that every swarm node would otherwise pull).
    natives = "find / -xdev -type f -size +100M -printf '%i %p\\n' | sort -n"
    found_natives = run(client, image, "sh", "-c", natives).splitlines()
    claude = {line.split()[0] for line in found_natives if "claude" in line}
    assert len(claude) == 1, found_natives


def test_the_clone_image_has_no_test_fakes_and_the_demo_image_adds_only_them(
    client: docker.DockerClient, image: str, production_image: str
) -> None:
    probe = (
        "import importlib.util as u; "
        "print(' '.join(m for m in ('shadowclone', 'shadowclone_claude', 'shadowclone_codex', "
        "'shadowclone.fakes', 'shadowclone_testing') if u.find_spec(m)))"
    )
    assert run(client, production_image, "python", "-c", probe) == (
        "shadowclone shadowclone_claude shadowclone_codex"
    )
    assert run(client, image, "python", "-c", probe) == (
        "shadowclone shadowclone_claude shadowclone_codex shadowclone_testing"
    )
    fakes = "import shadowclone_testing.fakes.github, shadowclone_testing.scripted"
    assert run(client, image, "python", "-c", fakes + "; print('ok')") == "ok"
    base = client.images.get(production_image).attrs["RootFS"]["Layers"]
    demo = client.images.get(image).attrs["RootFS"]["Layers"]
    assert demo[: len(base)] == base, "the demo image is built on the clone image"
