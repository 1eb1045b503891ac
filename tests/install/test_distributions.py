"""The seven distributions as a registry would serve them: wheels built with `uv build` from this
checkout, each with a readme, the LICENSE file, classifiers, project URLs and a real summary, one
version, and plugins bound to the core's compatible range; and the release workflow that
publishes them and the image together."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version
from shadowclone import __version__

SOURCE = Path(__file__).resolve().parents[2]
WORKFLOW = SOURCE / ".github" / "workflows" / "release.yml"
DISTRIBUTIONS = {
    "shadowclone": SOURCE / "core",
    "shadowclone-claude": SOURCE / "plugins" / "claude",
    "shadowclone-codex": SOURCE / "plugins" / "codex",
    "shadowclone-docker-launch": SOURCE / "plugins" / "docker_launch",
    "shadowclone-fake-launch": SOURCE / "plugins" / "fake_launch",
    "shadowclone-swarm-launch": SOURCE / "plugins" / "swarm_launch",
    "shadowclone-testing": SOURCE / "plugins" / "testing",
}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("wheels")
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    subprocess.run(
        [uv, "build", "--project", str(SOURCE), "--all-packages", "--out-dir", str(out), "-q"],
        check=True,
        timeout=600,
    )
    found = {}
    for name in DISTRIBUTIONS:
        matches = list(out.glob(f"{name.replace('-', '_')}-*.whl"))
        assert len(matches) == 1, (name, matches)
        found[name] = matches[0]
        sdists = list(out.glob(f"{name.replace('-', '_')}-*.tar.gz"))
        assert len(sdists) == 1, (name, sdists)
    return found


def metadata(wheel: Path) -> tuple[Message, set[str]]:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        text = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    return Parser().parsestr(text), names


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_each_wheel_has_a_readme_the_license_classifiers_urls_and_a_real_summary(
    wheels: dict[str, Path], name: str
) -> None:
    meta, files = metadata(wheels[name])
    assert meta["Name"] == name
    assert meta["Version"] == __version__, "one version for all five"
    summary = meta["Summary"]
    assert summary and len(summary) > 40 and "plugin: " + name.split("-", 1)[-1] not in summary
    assert meta["Description-Content-Type"] == "text/markdown"
    readme = meta.get_payload()
    assert isinstance(readme, str) and readme.startswith(f"# {name}\n")
    assert (DISTRIBUTIONS[name] / "README.md").read_text(encoding="utf-8").strip() in readme
    assert meta["License-Expression"] == "MIT"
    licenses = [f for f in files if f.endswith(".dist-info/licenses/LICENSE")]
    assert len(licenses) == 1
    with zipfile.ZipFile(wheels[name]) as archive:
        shipped = archive.read(licenses[0]).decode()
    assert shipped == (SOURCE / "LICENSE").read_text(encoding="utf-8")
    classifiers = meta.get_all("Classifier") or []
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert "Typing :: Typed" in classifiers
    assert meta["Requires-Python"] == ">=3.11"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Source", "Issues"} <= set(urls)
    assert all(url.startswith("https://") for url in urls.values())


@pytest.mark.parametrize("name", [n for n in DISTRIBUTIONS if n != "shadowclone"])
def test_each_plugin_needs_the_cores_compatible_range(wheels: dict[str, Path], name: str) -> None:
    meta, _ = metadata(wheels[name])
    core = [
        Requirement(r)
        for r in meta.get_all("Requires-Dist") or []
        if re.match(r"shadowclone\b(?!-)", r)
    ]
    assert len(core) == 1
    specifier = core[0].specifier
    current = Version(__version__)
    assert current in specifier
    assert Version(f"{current.major}.{current.minor + 1}.0") not in specifier, "no next minor"
    assert Version(f"{current.major}.{current.minor}.0") in specifier or current.micro > 0


def test_the_core_declares_bounds_for_every_dependency(wheels: dict[str, Path]) -> None:
    meta, _ = metadata(wheels["shadowclone"])
    for line in meta.get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        assert any(s.operator == ">=" for s in requirement.specifier), line


# --------------------------------------------------------------------- one version, released


def run_release_version(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / "scripts" / "release-version"), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_release_version_prints_the_one_version_and_checks_the_tag() -> None:
    done = run_release_version(SOURCE, f"v{__version__}")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{__version__}\n", "")
    wrong = run_release_version(SOURCE, "v99.0.0")
    assert wrong.returncode == 1
    assert wrong.stderr == (
        f"release-version: the tag v99.0.0 does not name version {__version__}\n"
    )


def test_release_version_names_a_plugin_whose_version_or_bound_differs(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copy(SOURCE / "scripts" / "release-version", tmp_path / "scripts")
    shutil.copytree(
        SOURCE / "core" / "src" / "shadowclone",
        tmp_path / "core/src/shadowclone",
        ignore=shutil.ignore_patterns("*.pyc", "__pycache__"),
    )
    for folder in ("claude", "codex", "docker_launch", "testing"):
        target = tmp_path / "plugins" / folder
        target.mkdir(parents=True)
        shutil.copy(SOURCE / "plugins" / folder / "pyproject.toml", target)
    assert run_release_version(tmp_path).returncode == 0
    codex = tmp_path / "plugins" / "codex" / "pyproject.toml"
    codex.write_text(codex.read_text().replace(f'version = "{__version__}"', 'version = "9.9.9"'))
    docker = tmp_path / "plugins" / "docker_launch" / "pyproject.toml"
    docker.write_text(re.sub(r'"shadowclone>=[^"]*"', '"shadowclone>=0.0.1"', docker.read_text()))
    done = run_release_version(tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 2
    assert "plugins/codex/pyproject.toml: version 9.9.9" in lines[0]
    assert "plugins/docker_launch/pyproject.toml: depends on ['shadowclone>=0.0.1']" in lines[1]


def test_the_release_publishes_all_five_by_trusted_publishing_then_the_image() -> None:
    workflow = yaml.load(WORKFLOW.read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    jobs = workflow["jobs"]
    assert workflow["on"] == {"push": {"tags": ["v*"]}}
    build = jobs["distributions"]["steps"]
    runs = [s.get("run", "") for s in build]
    assert any('scripts/release-version "${GITHUB_REF_NAME}"' in r for r in runs)
    assert any(r.startswith("uv build --all-packages") for r in runs), "all five, sdists too"
    pypi = jobs["pypi"]
    assert pypi["needs"] == "distributions"
    assert pypi["permissions"] == {"id-token": "write"}, "trusted publishing, no token"
    assert pypi["environment"]["name"] == "pypi"
    publish = [s for s in pypi["steps"] if s.get("uses", "").startswith("pypa/")]
    assert [s["uses"] for s in publish] == ["pypa/gh-action-pypi-publish@release/v1"]
    assert "with" not in publish[0] or "password" not in publish[0]["with"]
    assert jobs["image"]["needs"] == "pypi", "the image of a version whose packages are out"
    image_runs = [s.get("run", "") for s in jobs["image"]["steps"]]
    assert any('scripts/release-version "${GITHUB_REF_NAME}"' in r for r in image_runs)
