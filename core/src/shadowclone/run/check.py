"""The check clone of `setup`: inside a clone, with the same mounts as a real one,
read the secrets and ask GitHub what setup needs to know. It only reads: no write call reaches
GitHub, and nothing is cloned."""

from __future__ import annotations

from pathlib import Path

import attrs

from shadowclone.environment import compose, devcontainer
from shadowclone.environment.declared import TOML_PATH, parse_environment_toml
from shadowclone.errors import BadInput, ShadowcloneError
from shadowclone.node.checks import ENVIRONMENT_FOLDER, CheckReport
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Request, Step
from shadowclone.plugin.manager import Registry
from shadowclone.plugin.types import Outcome
from shadowclone.proxy.secrets import GITHUB_TOKEN_KEY, Secrets
from shadowclone.run.github import GithubClient
from shadowclone.run.progress import ProgressWriter

MAX_CONTEXT_FILES = 256
MAX_CONTEXT_BYTES = 32 * 1024 * 1024


def _text(path: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{path}: expected UTF-8 text") from None


def devcontainer_configurations(client: GithubClient, repo: str) -> dict[str, str]:
    """Every Dev Container configuration of `repo`'s default branch, by path: the root
    `.devcontainer.json`, `.devcontainer/devcontainer.json` and
    `.devcontainer/NAME/devcontainer.json` (in at most `MAX_FOLDERS` folders)."""
    found: dict[str, str] = {}
    root = client.contents(repo, devcontainer.ROOT_CONFIG)
    if isinstance(root, bytes):
        found[devcontainer.ROOT_CONFIG] = _text(devcontainer.ROOT_CONFIG, root)
    listed = client.contents(repo, devcontainer.FOLDER)
    entries = listed if isinstance(listed, list) else []
    paths = [e.path for e in entries if e.kind == "file" and e.path == devcontainer.DEFAULT_CONFIG]
    folders = sorted(e.path for e in entries if e.kind == "dir")
    if len(folders) > devcontainer.MAX_FOLDERS:
        raise BadInput(
            f"{devcontainer.FOLDER}: over {devcontainer.MAX_FOLDERS} folders to look for "
            "configurations in"
        )
    paths += [f"{folder}/devcontainer.json" for folder in folders]
    for path in paths:
        data = client.contents(repo, path)
        if isinstance(data, bytes):
            found[path] = _text(path, data)
    return found


def fetch_environment(
    client: GithubClient, repo: str, into: Path, wanted: str | None = None
) -> tuple[str, tuple[str, ...]] | None:
    """Copy `repo`'s environment declaration, its Dockerfile and that Dockerfile's build
    context into `into` (by repository path), from the default branch; returns the
    declaration's path and every dev container configuration found, or None when the
    repository declares none. `wanted` chooses among several configurations. A malformed
    declaration, or a context over the bounds, is a one-line `BadInput`."""
    toml = client.contents(repo, TOML_PATH)
    configurations: dict[str, str] = {}
    if isinstance(toml, bytes):  # it wins: no configuration is read
        environment = parse_environment_toml(_text(TOML_PATH, toml))
        source, text, key = TOML_PATH, toml, "dockerfile"
        dockerfile, context = environment.dockerfile, environment.context
    else:
        configurations = devcontainer_configurations(client, repo)
        if not configurations:
            return None
        source = devcontainer.choose(list(configurations), wanted)
        text = configurations[source].encode()
        dockerfile, context, key = devcontainer.locate(source, configurations[source])
    found = devcontainer.ordered(list(configurations))
    fetched = {source: text}
    folders: list[str] = []
    if dockerfile is not None:
        fetched[dockerfile] = _file(client, repo, dockerfile, f"{source}: {key}")
        folders.append(context)
    features: tuple[str, ...] = ()
    if source != TOML_PATH:
        parsed = devcontainer.parse_text(source, configurations[source])
        features = devcontainer.local_feature_folders(source, parsed)
        if "dockerComposeFile" in parsed:
            folders += _fetch_compose(client, repo, source, parsed, fetched)
    needed: set[str] = set()
    _listed(client, repo, source, folders, "the build context", needed)
    _listed(client, repo, source, list(features), "the local feature", needed)
    total = sum(len(data) for data in fetched.values())
    for path in sorted(needed - fetched.keys()):
        data = client.contents(repo, path)
        if not isinstance(data, bytes):
            raise BadInput(f"{source}: {path} is not a file of the repository")
        total += len(data)
        if total > MAX_CONTEXT_BYTES:
            raise BadInput(
                f"{source}: the build context holds over {MAX_CONTEXT_BYTES // 2**20} MiB"
            )
        fetched[path] = data
    for path, data in fetched.items():
        target = (into / path).resolve()
        if not target.is_relative_to(into.resolve()):
            raise BadInput(f"{source}: {path} lies outside the repository")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return source, found


def _file(client: GithubClient, repo: str, path: str, where: str) -> bytes:
    data = client.contents(repo, path)
    if not isinstance(data, bytes):
        raise BadInput(f"{where}: {path} is not a file of the repository")
    return data


def _fetch_compose(
    client: GithubClient,
    repo: str,
    source: str,
    parsed: dict[str, object],
    fetched: dict[str, bytes],
) -> list[str]:
    """Add to `fetched` a Compose configuration's files, the project's `.env`, the services'
    env files and Dockerfiles; return the services' build contexts."""
    files = compose.compose_files(source, parsed)
    for path in files:
        fetched[path] = _file(client, repo, path, f"{source}: dockerComposeFile")
    env = client.contents(repo, compose.project_env_path(files))
    if isinstance(env, bytes):
        fetched[compose.project_env_path(files)] = env
    texts = {path: _text(path, data) for path, data in fetched.items()}
    for path in compose.env_files(source, parsed, texts):
        data = client.contents(repo, path)
        if isinstance(data, bytes):  # a missing one that is required is refused when read
            fetched[path] = data
            texts[path] = _text(path, data)
    contexts = []
    for path in compose.references(source, parsed, texts):
        if path.endswith("/"):
            contexts.append(path.removesuffix("/"))
        elif path not in fetched:
            fetched[path] = _file(client, repo, path, f"{source}: a Compose service's build")
    return contexts


def _listed(
    client: GithubClient, repo: str, source: str, roots: list[str], what: str, needed: set[str]
) -> None:
    """Add to `needed` every file below the folders `roots` (a Dockerfile's build context, or
    local features: `what`), within `MAX_CONTEXT_FILES` files and folders in all."""
    listed_folders = 0
    for root in roots:
        folders = [root]
        while folders:
            listed_folders += 1
            listed = client.contents(repo, folders.pop())
            if isinstance(listed, bytes):
                raise BadInput(f"{source}: {what} {root} is a file, not a folder")
            if listed is None and what != "the build context":
                raise BadInput(f"{source}: {what} {root} is not a folder of the repository")
            for entry in listed or []:
                if entry.kind == "dir":
                    folders.append(entry.path)
                elif entry.kind == "file":
                    needed.add(entry.path)
            if len(needed) + listed_folders > MAX_CONTEXT_FILES:
                raise BadInput(
                    f"{source}: {what} {root} holds over {MAX_CONTEXT_FILES} files and folders"
                )


def run_check(folder: RunFolder, request: Request, secrets: Secrets, registry: Registry) -> int:
    progress = ProgressWriter(folder, secrets.redactor)
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
                fetched = fetch_environment(client, repository.full_name, into, request.environment)
            report = attrs.evolve(
                report,
                user=user.login,
                full_name=repository.full_name,
                visibility=repository.visibility,
                default_branch=repository.default_branch,
                can_push=repository.can_push,
                environment=fetched[0] if fetched else None,
                configurations=fetched[1] if fetched else (),
            )
        except ShadowcloneError as error:
            report = attrs.evolve(report, problems=(*report.problems, str(error)))
    ok = not report.problems and not report.missing_secrets
    progress.final(Outcome.DONE if ok else Outcome.FAILED, None, report.to_json())
    return 0 if ok else 1
