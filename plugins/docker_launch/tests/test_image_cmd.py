"""`shadowclone image build` without Docker: the pins it reads, the build context it prepares
(real wheels from this checkout), the docker command it runs (a stand-in docker records it),
and the release workflow that runs it on a tag."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from shadowclone.plugin import DEMO_IMAGE
from shadowclone_testing.harness import CliResult

from shadowclone_docker_launch import commands
from shadowclone_docker_launch.images import (
    DEMO_PACKAGES,
    IMAGE_IN_SOURCE,
    IMAGE_PACKAGES,
    BuildPlan,
    ImageBuildError,
    engine_versions,
    find_source,
    prepare_context,
)

SOURCE = Path(__file__).resolve().parents[3]
WORKFLOW = SOURCE / ".github" / "workflows" / "release.yml"
pytestmark = pytest.mark.usefixtures("sc_home")  # a config of its own, never the owner's

PEM = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"


def test_the_source_is_this_checkout() -> None:
    assert find_source() == SOURCE
    assert find_source(SOURCE / "core" / "src") == SOURCE


def test_outside_a_checkout_there_is_no_source(tmp_path: Path) -> None:
    """An installation from wheels builds from what is installed (tests/install)."""
    assert find_source(tmp_path) is None


def test_the_engines_are_the_ones_install_engines_installs(tmp_path: Path) -> None:
    """scripts/install-engines reads the pins the image uses: the tests run the image's
    engines."""
    pins = SOURCE / IMAGE_IN_SOURCE / "engines.env"
    text = pins.read_text(encoding="utf-8")
    found = dict(re.findall(r'^(CLAUDE_VERSION|CODEX_VERSION)="([^"]+)"', text, re.MULTILINE))
    assert engine_versions() == {
        "CLAUDE_CODE_VERSION": found["CLAUDE_VERSION"],
        "CODEX_VERSION": found["CODEX_VERSION"],
    }
    script = (SOURCE / "scripts" / "install-engines").read_text(encoding="utf-8")
    assert f'source "$root/{IMAGE_IN_SOURCE}/engines.env"' in script
    assert "_VERSION=" not in script, "no second pin"


def test_a_pins_file_without_pins_is_refused(tmp_path: Path) -> None:
    (tmp_path / "engines.env").write_text("CLAUDE_VERSION=latest\n")
    with pytest.raises(ImageBuildError, match="no pinned CLAUDE_VERSION"):
        engine_versions(tmp_path)


def test_the_context_holds_the_image_files_wheels_requirements_and_authorities(
    tmp_path: Path,
) -> None:
    cert = tmp_path / "proxy-ca.crt"
    cert.write_text(PEM, encoding="ascii")
    context = tmp_path / "context"
    context.mkdir()
    packages = prepare_context(SOURCE, context, [cert])

    image = SOURCE / IMAGE_IN_SOURCE
    assert (context / "Dockerfile").read_text() == (image / "Dockerfile").read_text()
    assert os.access(context / "clone-entry", os.X_OK)
    for argument, names in (
        ("SHADOWCLONE_PACKAGES", IMAGE_PACKAGES),
        ("DEMO_PACKAGES", DEMO_PACKAGES),
    ):
        wheels = packages[argument].split()
        assert len(wheels) == len(names)
        for wheel, name in zip(wheels, names, strict=True):
            assert wheel.startswith(f"./{name.replace('-', '_')}-") and wheel.endswith(".whl")
            assert (context / "packages" / wheel).is_file()
    assert "shadowclone-testing" not in IMAGE_PACKAGES, "the clone image has no test fakes"
    requirements = (context / "packages" / "requirements.txt").read_text()
    assert re.search(r"^attrs==\S+", requirements, re.MULTILINE), "pinned from uv.lock"
    assert "shadowclone" not in requirements, "the workspace's own come as wheels"
    assert [p.read_text() for p in (context / "ca-certificates").iterdir()] == [PEM]


def test_something_that_is_no_certificate_is_refused(tmp_path: Path) -> None:
    cert = tmp_path / "not.crt"
    cert.write_text("hello\n")
    with pytest.raises(ImageBuildError, match="not a PEM certificate"):
        prepare_context(SOURCE, tmp_path / "context", [cert])


def test_the_docker_command() -> None:
    plan = BuildPlan("img:1", "base:2", Path("/ctx"), {"A": "1", "B": "two words"})
    assert plan.command() == [
        "docker",
        "build",
        "--tag",
        "img:1",
        "--network",
        "host",
        "--build-arg",
        "BASE_IMAGE=base:2",
        "--build-arg",
        "A=1",
        "--build-arg",
        "B=two words",
        "/ctx",
    ]
    published = BuildPlan("img:1", "b", Path("/c"), {}, None, "linux/amd64,linux/arm64", True)
    argv = published.command("/usr/bin/docker")
    assert argv[:3] == ["/usr/bin/docker", "buildx", "build"]
    assert "--network" not in argv
    assert argv[argv.index("--platform") + 1] == "linux/amd64,linux/arm64"
    assert "--push" in argv


def calls(record: Path) -> int:
    """How many times the stand-in docker ran."""
    return len(Path(f"{record}.count").read_text())


@pytest.fixture
def fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `docker` first on PATH that records its arguments and the context it was given."""
    record = tmp_path / "docker-call.json"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "docker"
    script.write_text(
        "#!/usr/bin/env python3\n"
        "import json, os, sys\n"
        "context = sys.argv[-1]\n"
        "files = sorted(os.path.relpath(os.path.join(d, f), context)\n"
        "               for d, _, fs in os.walk(context) for f in fs)\n"
        f"json.dump({{'argv': sys.argv[1:], 'files': files}}, open({str(record)!r}, 'w'))\n"
        f"open({str(record) + '.count'!r}, 'a').write('x')\n"
        "sys.exit(int(os.environ.get('FAKE_DOCKER_EXIT', '0')))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return record


def test_image_build_runs_docker_build_on_the_prepared_context(
    fake_docker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = commands.main(
        ["image", "build", "--tag", "mine:dev", "--base", "shadowclone-base:bookworm"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "built mine:dev" in out
    call = json.loads(fake_docker.read_text())
    argv = call["argv"]
    assert argv[:7] == ["build", "--tag", "mine:dev", "--target", "clone", "--network", "host"]
    build_args = [argv[i + 1] for i, a in enumerate(argv) if a == "--build-arg"]
    args = dict(a.split("=", 1) for a in build_args)
    assert args["BASE_IMAGE"] == "shadowclone-base:bookworm"
    for name, version in engine_versions().items():
        assert args[name] == version
    assert len(args["SHADOWCLONE_PACKAGES"].split()) == len(IMAGE_PACKAGES)
    assert calls(fake_docker) == 1, "no demo image unless asked"
    assert "Dockerfile" in call["files"] and "packages/requirements.txt" in call["files"]
    assert not Path(argv[-1]).exists(), "the context is a temporary folder, removed after"


def test_image_build_names_the_configs_image_by_default(
    fake_docker: Path, sc_cli: Callable[..., CliResult], capsys: pytest.CaptureFixture[str]
) -> None:
    assert sc_cli("config", "set", "image", '"registry.example/me/clone:7"').code == 0
    assert commands.main(["image", "build"]) == 0
    argv = json.loads(fake_docker.read_text())["argv"]
    assert argv[argv.index("--tag") + 1] == "registry.example/me/clone:7"


def test_a_failed_docker_build_is_one_line_and_exit_1(
    fake_docker: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAKE_DOCKER_EXIT", "3")
    assert commands.main(["image", "build", "--tag", "x:1"]) == 1
    _, err = capsys.readouterr()
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith("shadowclone: docker could not build the clone image x:1 (exit 3)")
    )


def test_image_build_demo_builds_the_demo_stage_on_the_clone_image(
    fake_docker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert commands.main(["image", "build", "--tag", "mine:dev", "--demo"]) == 0
    out, _ = capsys.readouterr()
    assert f"built mine:dev and {DEMO_IMAGE}" in out
    assert calls(fake_docker) == 2
    argv = json.loads(fake_docker.read_text())["argv"]
    assert argv[:5] == ["build", "--tag", DEMO_IMAGE, "--target", "demo"]
    build_args = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--build-arg")
    assert build_args["DEMO_PACKAGES"].startswith("./shadowclone_testing-")


def test_the_demo_image_is_never_pushed(
    fake_docker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert commands.main(["image", "build", "--tag", "x:1", "--demo", "--push"]) == 1
    _, err = capsys.readouterr()
    assert "drop --demo or --push" in err.strip().splitlines()[-1]
    assert not fake_docker.exists(), "nothing was built"


# --------------------------------------------------------------------------- release.yml


def test_the_release_workflow_builds_and_pushes_the_image_on_a_tag() -> None:
    text = WORKFLOW.read_text(encoding="utf-8")
    workflow = yaml.load(text, Loader=yaml.BaseLoader)  # strings only, as GitHub reads them
    assert workflow["on"] == {"push": {"tags": ["v*"]}}
    assert workflow["permissions"]["packages"] == "write"
    steps = workflow["jobs"]["image"]["steps"]
    assert all(set(step) <= {"name", "uses", "with", "run"} for step in steps)
    for step in steps:
        assert ("uses" in step) != ("run" in step), step
        if "uses" in step:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@v\d+", step["uses"]), step["uses"]
    assert text.count("${{") == text.count("}}")
    login = next(s for s in steps if s.get("uses", "").startswith("docker/login-action"))
    assert login["with"]["registry"] == "ghcr.io"

    build = next(s["run"] for s in steps if "image build" in s.get("run", ""))
    command = build.replace("\\\n", " ").split("uv run shadowclone image build", 1)[1]
    options = re.findall(r"(--[a-z-]+)", command)
    known = {opt for param in commands.build_command.params for opt in getattr(param, "opts", [])}
    assert set(options) <= known, f"options the command does not have: {set(options) - known}"
    assert {"--tag", "--push", "--platform"} <= set(options)


@pytest.mark.parametrize(
    ("argv", "code", "words"),
    [
        (["env", "show", "not a repository"], 2, "shadowclone: "),
        (["env", "show", "acme/never-set-up"], 1, "shadowclone: acme/never-set-up is not set up"),
    ],
)
def test_the_commands_run_by_scripts_end_bad_input_in_one_line(
    argv: list[str], code: int, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert commands.main(argv) == code
    err = capsys.readouterr().err
    assert err.startswith(words) and len(err.strip().splitlines()) == 1, err
