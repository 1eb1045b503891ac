"""setup: prepare one repository on this machine, without ever reading a secret.

Setup checks the machine (config, engine and login, launcher, the secrets file's presence, mode
and owner), then runs a check clone through the launcher with the same mounts as a real clone:
inside, the run program reads the secrets and asks GitHub for the repository's visibility,
default branch and the owner's push permission. Setup changes nothing on GitHub. From what the
check clone reports it refuses what must be refused, or writes the setup record.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from shadowclone.config import Config, Paths
from shadowclone.environment import devcontainer
from shadowclone.environment.declared import Environment, declared
from shadowclone.environment.recipe import recipe_for
from shadowclone.errors import BadInput, PluginUnavailable, ShadowcloneError
from shadowclone.node import sending
from shadowclone.node.admission import Login, login_refuses
from shadowclone.node.checks import ENVIRONMENT_FOLDER, CheckReport
from shadowclone.node.engines import (
    EngineLogin,
    LoginOfAnotherEngine,
    NoProvider,
    engine_and_login,
)
from shadowclone.node.ids import new_clone_id
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import (
    ProgressKind,
    ProgressLine,
    Request,
    RunMode,
    SetupRecord,
    Step,
    now,
)
from shadowclone.node.setups import (
    environment_files,
    files_in,
    keep_environment,
    write_setup,
)
from shadowclone.node.target import Target, parse_repo, same_repo
from shadowclone.plugin import contract
from shadowclone.plugin.manager import Registry
from shadowclone.plugin.types import (
    Launcher,
    LauncherSettings,
    LaunchSpec,
    LaunchState,
    SecretProviderRegistration,
)
from shadowclone.relay.server import RelayFor, relay_for_checks
from shadowclone.setup.secrets_file import create_template, privacy_problems

CHECK_TIMEOUT_S = 300.0
CHECKS_FOLDER = sending.CHECKS_FOLDER
LABEL_CLONE = contract.LABEL_CLONE
LABEL_PURPOSE = "shadowclone.purpose"


@attrs.frozen
class Check:
    name: str
    passed: bool
    detail: str


@attrs.frozen
class SetupSummary:
    repo: str
    checks: tuple[Check, ...]
    record: SetupRecord | None = None
    next_steps: tuple[str, ...] = ()
    refused: bool = False
    """A rule refused the repository, rather than something to fix on this machine."""

    @property
    def ok(self) -> bool:
        return self.record is not None


class _Stopped(Exception):
    """A check failed: setup ends there, and the summary so far is its answer."""

    def __init__(self, summary: SetupSummary) -> None:
        super().__init__(summary.repo)
        self.summary = summary


class _Summary:
    def __init__(self, repo: str, on_check: Callable[[Check], None] | None = None) -> None:
        self.repo = repo
        self.checks: list[Check] = []
        self.on_check = on_check

    def add(self, name: str, passed: bool, detail: str) -> bool:
        check = Check(name, passed, detail)
        self.checks.append(check)
        if self.on_check is not None:
            self.on_check(check)
        return passed

    def fail(self, name: str, detail: str, *next_steps: str, refused: bool = False) -> _Stopped:
        """A failed check, which the caller raises: each step reads as its checks in order."""
        self.add(name, False, detail)
        return _Stopped(self.done(*next_steps, refused=refused))

    def done(
        self, *next_steps: str, record: SetupRecord | None = None, refused: bool = False
    ) -> SetupSummary:
        return SetupSummary(self.repo, tuple(self.checks), record, next_steps, refused)


def setup_repository(
    config: Config,
    paths: Paths,
    registry: Registry,
    repo_text: str,
    *,
    engine: str | None = None,
    image: str | None = None,
    check_commands: Sequence[str] = (),
    timeout_s: float = CHECK_TIMEOUT_S,
    on_check: Callable[[Check], None] | None = None,
    on_progress: Callable[[ProgressLine], None] | None = None,
    build: bool = True,
    devcontainer_path: str | None = None,
) -> SetupSummary:
    """`on_check` hears each check as it is decided, `on_progress` each progress line of the
    check clone (and of the environment's build) as it comes: the owner sees setup move while
    the check clone runs. With `build`, the image of an environment the repository declares
    is made (or found) by the launcher now rather than before the first clone's launch.
    `devcontainer_path` chooses the dev container configuration among several (by default the
    specification's default one, or the only one)."""
    owner, name = parse_repo(repo_text)
    summary = _Summary(f"{owner}/{name}", on_check)
    summary.add("config", True, f"{paths.config_file} is valid (version {config.version})")
    try:
        chosen = _engine(summary, config, paths, registry, engine or config.engine)
        keys = _secrets_file(summary, paths, registry, chosen.login)
        launcher = _launcher(summary, config, paths, registry)
        request = _check_request(config, owner, name, chosen, image, devcontainer_path)
        report = run_check_clone(paths, launcher, request, timeout_s, on_progress)
        _check_clone(summary, paths, report, keys)
        repo = _repository(summary, report, chosen.login)
        record = _record(summary, config, paths, repo, chosen, report, image, check_commands)
        if record.environment is not None and build:
            _build(summary, config, paths, launcher, record, on_progress)
    except _Stopped as stopped:
        return stopped.summary
    return summary.done(f"shadowclone start {repo}#<issue or pull request number>", record=record)


def _check_request(
    config: Config,
    owner: str,
    name: str,
    chosen: EngineLogin[SecretProviderRegistration],
    image: str | None,
    devcontainer_path: str | None,
) -> Request:
    """The check clone's request: a real clone's mounts and login, in check mode."""
    return Request(
        id="check",
        target=Target(owner, name, 1),
        engine=chosen.name,
        login=chosen.login.name,
        launcher=config.launcher,
        image=image or config.image,
        github_url=config.github.url,
        github_api_url=config.github.api_url,
        base_url=chosen.provider.base_url,
        mode=RunMode.CHECK,
        environment=devcontainer_path,
    )


def _engine(
    summary: _Summary, config: Config, paths: Paths, registry: Registry, engine: str
) -> EngineLogin[SecretProviderRegistration]:
    """The engine and its login, checked as `start` checks them (`node.engines`)."""
    try:
        chosen = engine_and_login(config, paths.config_file, lambda: registry, engine)
    except NoProvider:
        raise summary.fail(
            "engine",
            f"no [providers.{engine}] in {paths.config_file}",
            f'add [providers.{engine}] with login = "..." to the config',
        ) from None
    except PluginUnavailable as error:
        raise summary.fail(
            "engine", str(error), "install the engine's plugin, or pick another with --engine"
        ) from None
    except LoginOfAnotherEngine as error:
        raise summary.fail(
            "engine",
            f"the login {error.login.name} is for {error.login.engine}",
            f"set providers.{engine}.login to one of its logins",
        ) from None
    summary.add("engine", True, f"{engine} with the {chosen.login.name} login")
    return chosen


def _secrets_file(
    summary: _Summary, paths: Paths, registry: Registry, login: SecretProviderRegistration
) -> list[str]:
    """The keys the clones of `login` need. The secrets template comes first: the owner can
    fill it in while getting Docker ready."""
    secrets = paths.secrets_file
    keys = _keys(registry, login)
    if create_template(secrets, registry.secret_providers()):
        raise summary.fail(
            "secrets file",
            f"created {secrets} (mode 0600), an empty template",
            f"paste {', '.join(keys)} into {secrets}, then run `shadowclone setup {summary.repo}` "
            "again",
        )
    problems = privacy_problems(secrets)
    if problems:
        raise summary.fail(
            "secrets file",
            "; ".join(problems),
            "make the secrets file private to you, then run setup again",
        )
    summary.add("secrets file", True, f"{secrets} is private to you")
    return keys


def _launcher(summary: _Summary, config: Config, paths: Paths, registry: Registry) -> Launcher:
    try:
        settings = LauncherSettings.of(config, paths.clones_dir, config.image)
        launcher = registry.launcher(config.launcher).factory(settings)
        launcher.check()
    except ShadowcloneError as error:
        raise summary.fail(
            "launcher", f"{config.launcher}: {error}", "fix the launcher, then run setup again"
        ) from None
    summary.add("launcher", True, f"{config.launcher} can run clones")
    return launcher


def _check_clone(summary: _Summary, paths: Paths, report: CheckReport, keys: list[str]) -> None:
    """What the check clone reported of itself and of the secrets file's values."""
    problems = list(report.problems)
    if not problems and not report.missing_secrets and not report.user:
        problems.append("GitHub named no user for the token")
    if problems:
        raise summary.fail(
            "check clone",
            "; ".join(problems),
            "fix what the check clone reported, then run setup again",
        )
    summary.add("check clone", True, f"GitHub answers as {report.user}")
    if report.missing_secrets:
        raise summary.fail(
            "logins",
            f"no value for {', '.join(report.missing_secrets)}",
            f"paste {', '.join(report.missing_secrets)} into {paths.secrets_file}",
        )
    summary.add("logins", True, f"{', '.join(keys)} present")


def _repository(summary: _Summary, report: CheckReport, login: Login) -> str:
    """What GitHub said of the repository, checked against the login and the owner's access;
    the repository's name as GitHub spells it (what the clones will show)."""
    repo = summary.repo
    unsaid = [
        what
        for what, value in (
            ("its visibility", report.visibility),
            ("its default branch", report.default_branch),
            ("whether you can push", report.can_push),
        )
        if value is None or value == ""
    ]
    if unsaid:
        raise summary.fail(
            "repository",
            f"GitHub did not say {', '.join(unsaid)} of {repo}",
            "check the token's access to the repository, then run setup again",
        )
    summary.add(
        "repository",
        True,
        f"{report.visibility}, default branch {report.default_branch}",
    )
    if login_refuses(login, report.visibility):
        raise summary.fail(
            "login and visibility",
            f"the {login.name} login never works on a {report.visibility} repository",
            "use an API-key login for this repository",
            refused=True,
        )
    if not report.can_push:
        raise summary.fail(
            "push permission",
            f"{report.user} cannot push",
            "ask for write access to the repository",
            refused=True,
        )
    summary.add("push permission", True, f"{report.user} can push to {repo}")
    if report.full_name and same_repo(report.full_name, repo):
        return report.full_name
    return repo


def _record(
    summary: _Summary,
    config: Config,
    paths: Paths,
    repo: str,
    chosen: EngineLogin[SecretProviderRegistration],
    report: CheckReport,
    image: str | None,
    check_commands: Sequence[str],
) -> SetupRecord:
    """Write the setup record: what the check clone found, and the environment it kept."""
    environment = _declared(paths, repo)
    record = SetupRecord(
        repo=repo,
        config_version=config.version,
        engine=chosen.name,
        login=chosen.login.name,
        visibility=report.visibility or "private",
        default_branch=report.default_branch or "main",
        can_push=True,
        check_commands=tuple(dict.fromkeys([*check_commands, *environment.checks])),
        caches=environment.caches,
        lifecycle=environment.lifecycle,
        image=image,
        environment=report.environment,
    )
    path = write_setup(paths, record)
    summary.add("setup record", True, f"{path} (config version {config.version})")
    if record.environment is not None:
        summary.add("declaration", True, declaration_summary(environment))
    return record


def _build(
    summary: _Summary,
    config: Config,
    paths: Paths,
    launcher: Launcher,
    record: SetupRecord,
    on_progress: Callable[[ProgressLine], None] | None,
) -> None:
    """Have the launcher make (or find) the image of the environment the record declares."""
    spec = LaunchSpec(
        clone_id=new_clone_id(now()),
        run_folder=paths.clones_dir / CHECKS_FOLDER,
        secrets_file=paths.secrets_file,
        image=record.image or config.image,
        environment=recipe_for(config, paths, record.repo),
    )

    def say(text: str) -> None:
        if on_progress is not None:
            on_progress(ProgressLine(Step.PREPARE, ProgressKind.NOTE, text))

    try:
        prepared = launcher.prepare(spec, say, threading.Event())
    except Exception as error:  # noqa: BLE001 - whatever the launcher raised, said in one line
        raise summary.fail(
            "environment",
            f"{record.environment}: {error}",
            f"fix {record.environment} (`shadowclone env show {record.repo}`), then run setup "
            "again",
        ) from None
    summary.add("environment", True, f"{record.environment}: clones run in {prepared.image}")


def declaration_summary(environment: Environment) -> str:
    """One line: the declaration read, the other configurations found, and the keys a clone
    does not apply yet (`shadowclone env show` says why)."""
    line = f"read {environment.source}"
    others = [path for path in environment.found if path != environment.source]
    if others:
        line += f" (also found: {', '.join(others)}; choose with --devcontainer)"
    if environment.features:
        line += f"; features: {', '.join(environment.features)}"
    keys = dict.fromkeys(key for key, _ in environment.lifecycle.commands())
    if keys:
        line += f"; run in each clone's workspace before the engine: {', '.join(keys)}"
    if environment.not_applied:
        line += f"; not applied yet: {', '.join(environment.not_applied)}"
    return line


def _declared(paths: Paths, repo: str) -> Environment:
    """The environment setup kept for `repo` (an empty one when it declares none)."""
    kept = environment_files(paths, repo)  # a Compose configuration reads its files too
    return declared(kept) or Environment(source="")


def read_declaration(found: Path, report: CheckReport) -> None:
    """Check the declaration the check clone copied into `found`; a dev container configuration
    is read by the reference CLI here (the clone image has none), its reading kept beside the
    repository's files (`READING_PATH`) for every later use. BadInput in one line naming the
    file when it cannot be used."""
    source = report.environment
    assert source is not None
    files = files_in(found)
    if devcontainer.is_configuration(source):
        name = (report.full_name or report.repo).rpartition("/")[2]
        reading = devcontainer.read_configuration(files[source], source, name)
        kept = {"source": source, "found": list(report.configurations), **reading}
        files[devcontainer.READING_PATH] = json.dumps(kept, indent=2, ensure_ascii=False) + "\n"
    environment = declared(files)
    assert environment is not None
    if environment.dockerfile is not None and environment.dockerfile not in files:
        raise BadInput(f"{source}: {environment.dockerfile} was not found in the repository")
    if devcontainer.READING_PATH in files:
        place = found / devcontainer.READING_PATH
        place.parent.mkdir(parents=True, exist_ok=True)
        place.write_text(files[devcontainer.READING_PATH])


def _keys(registry: Registry, login: SecretProviderRegistration) -> list[str]:
    everyone = [p for p in registry.secret_providers() if p.engine is None]
    return [s.key for p in (*everyone, login) for s in p.secrets]


def run_check_clone(
    paths: Paths,
    launcher: Launcher,
    request: Request,
    timeout_s: float = CHECK_TIMEOUT_S,
    on_progress: Callable[[ProgressLine], None] | None = None,
) -> CheckReport:
    """Launch the check clone and wait for its report, handing on each progress line as it
    comes; its folder is removed afterwards. A clone that cannot start (no image, no Docker)
    is a problem of the report, with the launcher's words on how to fix it."""
    with relay_for_checks(launcher, paths.clones_dir) as relay:
        return _run_check(paths, launcher, request, timeout_s, on_progress, relay)


def _run_check(
    paths: Paths,
    launcher: Launcher,
    request: Request,
    timeout_s: float,
    on_progress: Callable[[ProgressLine], None] | None,
    relay: RelayFor | None,
) -> CheckReport:
    clone_id = new_clone_id(now())
    folder = RunFolder(paths.clones_dir / CHECKS_FOLDER / clone_id)
    folder.path.mkdir(parents=True)
    folder.write_request(attrs.evolve(request, id=clone_id))
    spec = LaunchSpec(
        clone_id=clone_id,
        run_folder=folder.path,
        secrets_file=paths.secrets_file,
        image=request.image,
        labels={LABEL_CLONE: clone_id, LABEL_PURPOSE: "setup-check"},
        env={contract.CLONE_ID_VARIABLE: clone_id},
        relay=relay(clone_id) if relay is not None else None,
    )
    offset = 0

    def follow() -> None:
        nonlocal offset
        lines, _, offset = folder.progress(offset)
        if on_progress is not None:
            for line in lines:
                on_progress(line)

    try:
        try:
            launcher.launch(spec)
        except ShadowcloneError as error:
            return CheckReport(request.target.repo_full_name, problems=(str(error),))
        deadline = time.monotonic() + timeout_s
        status = launcher.status(clone_id)
        while status.state is LaunchState.RUNNING and time.monotonic() < deadline:
            follow()
            time.sleep(0.2)
            status = launcher.status(clone_id)
        follow()
        if status.state is LaunchState.RUNNING:
            launcher.stop(clone_id)
            return CheckReport(
                request.target.repo_full_name,
                problems=(f"the check clone did not finish within {timeout_s:.0f} s",),
            )
        lines, _, _ = folder.progress()
        final = next((line for line in reversed(lines) if line.final), None)
        if final is None or not final.report:
            tail = status.output_tail.strip().splitlines()[-1:] or ["no output"]
            return CheckReport(
                request.target.repo_full_name,
                problems=(
                    f"the check clone ended with no report (exit {status.exit_code}): {tail[0]}",
                ),
            )
        try:
            report = CheckReport.from_json(final.report)
        except (ValueError, TypeError, KeyError):
            return CheckReport(request.target.repo_full_name, problems=(final.report,))
        found = folder.path / ENVIRONMENT_FOLDER
        if not report.problems and report.environment is not None:
            try:
                read_declaration(found, report)
            except BadInput as error:
                report = attrs.evolve(report, problems=(str(error),))
        if not report.problems:
            keep_environment(
                paths, report.full_name or report.repo, found if report.environment else None
            )
        return report
    finally:
        with contextlib.suppress(ShadowcloneError):
            launcher.remove(clone_id)
        shutil.rmtree(folder.path, ignore_errors=True)


__all__ = ["Check", "SetupSummary", "run_check_clone", "setup_repository"]
