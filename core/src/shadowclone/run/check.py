"""The check clone of `setup`: inside a clone, with the same mounts as a real one,
read the secrets and ask GitHub what setup needs to know. It only reads: no write call reaches
GitHub, and nothing is cloned."""

from __future__ import annotations

import json
from pathlib import Path

import attrs

from shadowclone.environment.declared import DECLARATIONS, declared
from shadowclone.errors import BadInput, ShadowcloneError
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import CONVERTER, Request, Step
from shadowclone.plugin.manager import Registry
from shadowclone.plugin.types import Outcome
from shadowclone.run.github import GithubClient
from shadowclone.run.progress import ProgressWriter
from shadowclone.run.redact import Redactor
from shadowclone.run.secrets import GITHUB_TOKEN_KEY, Secrets


@attrs.frozen
class CheckReport:
    """What the check clone found; the final line's report carries it as JSON."""

    repo: str
    full_name: str | None = None
    """The repository's name as GitHub spells it (the owner may have typed another case)."""
    user: str | None = None
    visibility: str | None = None
    default_branch: str | None = None
    can_push: bool | None = None
    missing_secrets: tuple[str, ...] = ()
    """Keys of the secrets file the login (or every clone) needs that hold no value."""
    environment: str | None = None
    """The repository's environment declaration, if it has one: its files (and the
    Dockerfile's context) are copied into the run folder's `ENVIRONMENT_FOLDER`."""
    problems: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(CONVERTER.unstructure(self))

    @classmethod
    def from_json(cls, text: str) -> CheckReport:
        return CONVERTER.structure(json.loads(text), cls)


ENVIRONMENT_FOLDER = "environment"
"""Where the check clone copies the environment's files, by their paths in the repository."""
MAX_CONTEXT_FILES = 256
MAX_CONTEXT_BYTES = 32 * 1024 * 1024


def fetch_environment(client: GithubClient, repo: str, into: Path) -> str | None:
    """Copy `repo`'s environment declaration, its Dockerfile and that Dockerfile's build
    context into `into` (by repository path); returns the declaration's path, or None when the
    repository declares none. A malformed declaration, or a context over the bounds, is a
    one-line `BadInput`."""
    texts: dict[str, str] = {}
    for path in DECLARATIONS:  # the first found wins: the others are not read
        data = client.contents(repo, path)
        if isinstance(data, bytes):
            try:
                texts[path] = data.decode("utf-8")
            except UnicodeDecodeError:
                raise BadInput(f"{path}: expected UTF-8 text") from None
            break
    environment = declared(texts)
    if environment is None:
        return None
    fetched = {environment.source: texts[environment.source].encode()}
    if environment.dockerfile is not None:
        wanted = {environment.dockerfile}
        folders, listed_folders = [environment.context], 0
        while folders:
            listed_folders += 1
            listed = client.contents(repo, folders.pop())
            if isinstance(listed, bytes):
                raise BadInput(f"{environment.source}: the build context is a file, not a folder")
            for entry in listed or []:
                if entry.kind == "dir":
                    folders.append(entry.path)
                elif entry.kind == "file":
                    wanted.add(entry.path)
            if len(wanted) + listed_folders > MAX_CONTEXT_FILES:
                raise BadInput(
                    f"{environment.source}: the build context {environment.context} holds over "
                    f"{MAX_CONTEXT_FILES} files and folders"
                )
        total = 0
        for path in sorted(wanted - fetched.keys()):
            data = client.contents(repo, path)
            if not isinstance(data, bytes):
                raise BadInput(f"{environment.source}: {path} is not a file of the repository")
            total += len(data)
            if total > MAX_CONTEXT_BYTES:
                raise BadInput(
                    f"{environment.source}: the build context holds over "
                    f"{MAX_CONTEXT_BYTES // 2**20} MiB"
                )
            fetched[path] = data
    for path, data in fetched.items():
        target = (into / path).resolve()
        if not target.is_relative_to(into.resolve()):
            raise BadInput(f"{environment.source}: {path} lies outside the repository")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return environment.source


def run_check(folder: RunFolder, request: Request, secrets: Secrets, registry: Registry) -> int:
    progress = ProgressWriter(folder, Redactor(secrets.all_values()))
    repo = request.target.repo_full_name
    report = CheckReport(repo=repo)
    login = registry.secret_provider(request.login)
    needed = [s.key for s in login.secrets] + [GITHUB_TOKEN_KEY]
    missing = tuple(key for key in needed if not secrets.values.get(key))
    report = attrs.evolve(report, missing_secrets=missing)
    progress.note(Step.TARGET, f"checking {repo} for the {request.login} login")
    token = secrets.values.get(GITHUB_TOKEN_KEY)
    if token:
        try:
            with GithubClient(token, api_url=request.github_api_url) as client:
                user = client.token_user()
                repository = client.repository(repo)
                into = folder.path / ENVIRONMENT_FOLDER
                source = fetch_environment(client, repository.full_name, into)
            report = attrs.evolve(
                report,
                user=user.login,
                full_name=repository.full_name,
                visibility=repository.visibility,
                default_branch=repository.default_branch,
                can_push=repository.can_push,
                environment=source,
            )
        except ShadowcloneError as error:
            report = attrs.evolve(report, problems=(*report.problems, str(error)))
    ok = not report.problems and not report.missing_secrets
    progress.final(Outcome.DONE if ok else Outcome.FAILED, None, report.to_json())
    return 0 if ok else 1
