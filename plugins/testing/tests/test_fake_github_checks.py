"""The fake GitHub's check runs with annotations and job logs, pasted images, and rate limits,
over real HTTP."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from shadowclone_testing.fakes.github import Annotation

if TYPE_CHECKING:
    from plugins.testing.tests.conftest import Call, Links, World


# ----------------------------------------------------------------------------- checks, images


def test_check_runs_annotations_and_a_job_log(world: World, call: Call, links: Links) -> None:
    gh = world.gh
    head = gh.branch_sha(world.repo, "mate/twenty")
    assert head is not None
    lint = gh.add_check_run(
        world.repo, head, name="lint", conclusion="success", title="Clean", summary="No problems"
    )
    tests = gh.add_check_run(
        world.repo,
        head,
        name="tests",
        conclusion="failure",
        log="collected 3 items\nFAILED test_app.py::test_twenty\n",
        annotations=[
            Annotation(
                path="app.py",
                start_line=20,
                end_line=21,
                annotation_level="failure",
                message="boom",
                title="test_twenty",
            ),
            Annotation(
                path="app.py", start_line=1, end_line=1, annotation_level="warning", message="style"
            ),
        ],
        title="1 failed",
        summary="1 failed, 2 passed",
    )
    listed = call(
        gh, "GET", "/api/v3/repos/octo/app/commits/mate/twenty/check-runs", token=world.owner
    )
    assert listed.status == 200
    assert listed.body["total_count"] == 2
    runs = {r["name"]: r for r in listed.body["check_runs"]}
    assert (runs["lint"]["id"], runs["tests"]["id"]) == (lint, tests)
    failed = runs["tests"]
    assert (failed["status"], failed["conclusion"], failed["head_sha"]) == (
        "completed",
        "failure",
        head,
    )
    assert failed["output"]["annotations_count"] == 2
    assert re.search(rf"/octo/app/actions/runs/\d+/job/{tests}$", failed["details_url"])
    assert failed["app"]["slug"] == "github-actions"
    paged = call(
        gh, "GET", f"/api/v3/repos/octo/app/commits/{head}/check-runs?per_page=1", token=world.owner
    )
    assert (paged.body["total_count"], len(paged.body["check_runs"]), "next" in links(paged)) == (
        2,
        1,
        True,
    )

    notes = call(gh, "GET", failed["output"]["annotations_url"], token=world.owner).body
    assert [
        (a["path"], a["start_line"], a["end_line"], a["annotation_level"], a["message"], a["title"])
        for a in notes
    ] == [
        ("app.py", 20, 21, "failure", "boom", "test_twenty"),
        ("app.py", 1, 1, "warning", "style", None),
    ]

    redirect = call(
        gh, "GET", f"/api/v3/repos/octo/app/actions/jobs/{tests}/logs", token=world.owner
    )
    assert redirect.status == 302
    location = redirect.headers["location"]
    log = call(gh, "GET", location)  # the signed address needs no token
    assert log.status == 200
    assert log.headers["content-type"].startswith("text/plain")
    assert log.body == b"collected 3 items\nFAILED test_app.py::test_twenty\n"
    assert call(gh, "GET", location.replace("token=", "token=x")).status == 403
    assert (
        call(
            gh, "GET", f"/api/v3/repos/octo/app/actions/jobs/{lint}/logs", token=world.owner
        ).status
        == 404
    )


def test_pasted_images_are_served_to_readers_of_their_repository(world: World, call: Call) -> None:
    gh = world.gh
    png = b"\x89PNG\r\n\x1a\nfake image"
    url = gh.upload_image(png, "image/png", repo=world.repo)
    assert re.fullmatch(rf"{gh.url}/user-attachments/assets/[0-9a-f-]{{36}}", url)
    assert call(gh, "GET", url).status == 404
    assert call(gh, "GET", url, token=world.stranger).status == 404
    redirect = call(gh, "GET", url, token=world.mate)
    assert redirect.status == 302
    image = call(gh, "GET", redirect.headers["location"])
    assert (image.status, image.headers["content-type"], image.body) == (200, "image/png", png)

    public = gh.upload_image(b"GIF89a", "image/gif")
    shown = call(gh, "GET", call(gh, "GET", public).headers["location"])
    assert shown.body == b"GIF89a"


# ----------------------------------------------------------------------------- rate limits


def test_rate_limits_of_both_kinds(world: World, call: Call) -> None:
    gh = world.gh
    fine = call(gh, "GET", "/api/v3/user", token=world.owner)
    assert fine.status == 200
    assert fine.headers["x-ratelimit-limit"] == "5000"
    assert int(fine.headers["x-ratelimit-remaining"]) == 5000 - int(
        fine.headers["x-ratelimit-used"]
    )
    assert fine.headers["x-ratelimit-resource"] == "core"

    gh.limit_rate("primary", requests=2, seconds=120)
    for _ in range(2):
        refused = call(gh, "GET", "/api/v3/user", token=world.owner)
        assert refused.status == 403
        assert refused.headers["x-ratelimit-remaining"] == "0"
        assert (
            int(refused.headers["x-ratelimit-reset"])
            > int(fine.headers["x-ratelimit-reset"]) - 3600 + 100
        )
        octo = gh.user("octo").id
        assert refused.body["message"] == f"API rate limit exceeded for user ID {octo}."
    assert call(gh, "GET", "/api/v3/user", token=world.owner).status == 200

    gh.limit_rate("secondary", seconds=30, status=429)
    refused = call(gh, "GET", "/api/v3/user", token=world.owner)
    assert refused.status == 429
    assert refused.headers["retry-after"] == "30"
    assert refused.body["message"].startswith("You have exceeded a secondary rate limit")
    assert call(gh, "GET", "/api/v3/user", token=world.owner).status == 200

    assert [r.status for r in gh.requests() if r.path == "/api/v3/user"] == [
        200,
        403,
        403,
        200,
        429,
        200,
    ]
