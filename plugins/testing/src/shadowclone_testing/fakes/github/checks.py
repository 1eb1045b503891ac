"""Check runs, their annotations and their GitHub Actions job logs over REST."""

from __future__ import annotations

from shadowclone_testing.fakes.github import git
from shadowclone_testing.fakes.github.model import Annotation, ApiError, CheckRun, Repo
from shadowclone_testing.fakes.github.rest import Call, Json, Reply, user_json

ACTIONS_APP_ID = 15368
"""GitHub Actions' app id on github.com."""


def _app(call: Call, actions: bool) -> Json:
    slug, name = ("github-actions", "GitHub Actions") if actions else ("fake-ci", "Fake CI")
    return {
        "id": ACTIONS_APP_ID if actions else 1,
        "slug": slug,
        "node_id": f"A_{slug}",
        "owner": user_json(call, "github"),
        "name": name,
        "description": "",
        "external_url": f"{call.web}/apps/{slug}",
        "html_url": f"{call.web}/apps/{slug}",
        "created_at": "2018-07-30T09:30:17Z",
        "updated_at": "2024-04-10T20:33:16Z",
        "permissions": {"checks": "write", "contents": "read", "metadata": "read"},
        "events": [],
    }


def check_run_json(call: Call, repo: Repo, run: CheckRun) -> Json:
    api = f"{call.api}/repos/{repo.full_name}"
    if run.job_id is not None:
        html = f"{call.web}/{repo.full_name}/actions/runs/{run.run_id}/job/{run.job_id}"
    else:
        html = f"{call.web}/{repo.full_name}/runs/{run.id}"
    return {
        "id": run.id,
        "head_sha": run.sha,
        "node_id": f"CR_{run.id}",
        "external_id": "",
        "url": f"{api}/check-runs/{run.id}",
        "html_url": html,
        "details_url": html,
        "status": run.status,
        "conclusion": run.conclusion,
        "started_at": run.started_at,
        "completed_at": run.completed_at,
        "output": {
            "title": run.title,
            "summary": run.summary,
            "text": run.text,
            "annotations_count": len(run.annotations),
            "annotations_url": f"{api}/check-runs/{run.id}/annotations",
        },
        "name": run.name,
        "check_suite": {"id": run.id},
        "app": _app(call, run.job_id is not None),
        "pull_requests": [],
    }


def annotation_json(call: Call, repo: Repo, run: CheckRun, note: Annotation) -> Json:
    return {
        "path": note.path,
        "blob_href": f"{call.web}/{repo.full_name}/blob/{run.sha}/{note.path}",
        "start_line": note.start_line,
        "end_line": note.end_line,
        "start_column": None,
        "end_column": None,
        "annotation_level": note.annotation_level,
        "title": note.title,
        "message": note.message,
        "raw_details": note.raw_details,
    }


def _run(call: Call, repo: Repo, run_id: str) -> CheckRun:
    found = next((r for r in repo.check_runs if str(r.id) == run_id), None)
    if found is None:
        raise ApiError(404, "Not Found")
    return found


def list_for_ref(call: Call, owner: str, name: str, ref: str) -> Reply:
    repo = call.repo(owner, name)
    bare = call.store.repo_path(repo.full_name)
    sha = None
    for candidate in (f"refs/heads/{ref}", f"refs/tags/{ref}", ref):
        sha = git.rev_parse(bare, candidate)
        if sha is not None:
            break
    if sha is None:
        raise ApiError(422, f"No commit found for SHA: {ref}")
    runs = [r for r in repo.check_runs if r.sha == sha]
    wanted_name = call.query.get("check_name")
    wanted_status = call.query.get("status")
    runs = [r for r in runs if wanted_name in (None, r.name) and wanted_status in (None, r.status)]
    runs.sort(key=lambda r: -r.id)  # newest first, as GitHub lists them
    return 200, {
        "total_count": len(runs),
        "check_runs": [check_run_json(call, repo, r) for r in call.page(runs)],
    }


def get_check_run(call: Call, owner: str, name: str, run_id: str) -> Reply:
    repo = call.repo(owner, name)
    return 200, check_run_json(call, repo, _run(call, repo, run_id))


def list_annotations(call: Call, owner: str, name: str, run_id: str) -> Reply:
    repo = call.repo(owner, name)
    run = _run(call, repo, run_id)
    return 200, [annotation_json(call, repo, run, a) for a in call.page(run.annotations)]


def job_logs(call: Call, owner: str, name: str, job_id: str) -> Reply:
    """302 to a plain-text log at a signed address that works for a minute, as GitHub does."""
    call.signed_in()
    repo = call.repo(owner, name)
    found = next((r for r in repo.check_runs if str(r.job_id) == job_id), None)
    if found is None:
        raise ApiError(404, "Not Found")
    target = f"/_fake/logs/{job_id}"
    call.headers.append(("Location", f"{call.web}{target}?token={call.store.sign(target)}"))
    return 302, None
