"""The check clone of `setup`: inside a clone, with the same mounts as a real one,
read the secrets and ask GitHub what setup needs to know. It only reads: no write call reaches
GitHub, and nothing is cloned."""

from __future__ import annotations

import json

import attrs

from shadowclone.errors import ShadowcloneError
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
    problems: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(CONVERTER.unstructure(self))

    @classmethod
    def from_json(cls, text: str) -> CheckReport:
        return CONVERTER.structure(json.loads(text), cls)


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
            report = attrs.evolve(
                report,
                user=user.login,
                full_name=repository.full_name,
                visibility=repository.visibility,
                default_branch=repository.default_branch,
                can_push=repository.can_push,
            )
        except ShadowcloneError as error:
            report = attrs.evolve(report, problems=(*report.problems, str(error)))
    ok = not report.problems and not report.missing_secrets
    progress.final(Outcome.DONE if ok else Outcome.FAILED, None, report.to_json())
    return 0 if ok else 1
