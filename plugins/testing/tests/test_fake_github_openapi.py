"""The fake GitHub is checked against GitHub's OpenAPI description: right exchanges pass, a wrong
answer or a wrong request is reported, and GitHub's own examples pass the same checks."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from shadowclone_testing.fakes.github import FakeGitHub, openapi, rest
from shadowclone_testing.harness import skip_or_fail


@pytest.fixture(scope="module")
def description_path() -> Path:
    found = openapi.find_description()
    if found is None:
        skip_or_fail(
            "GitHub's OpenAPI description is not installed: run scripts/install-github-openapi"
        )
    assert found is not None
    return found


@pytest.fixture
def gh(tmp_path: Path, description_path: Path) -> Iterator[FakeGitHub]:
    with FakeGitHub(tmp_path / "github") as fake:
        yield fake
        # What these tests provoke is theirs to look at, not the plugin's to fail them for.
        fake.take_openapi_violations()


def call(
    gh: FakeGitHub, method: str, path: str, token: str, body: object = None
) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", gh.port, timeout=30)
    try:
        headers = {"Authorization": f"token {token}", "Content-Type": "application/json"}
        data = None if body is None else json.dumps(body)
        connection.request(method, rest.API_PREFIX + path, body=data, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def a_repo(gh: FakeGitHub) -> str:
    token = gh.add_user("octo", name="Octo Cat", email="octo@example.com")
    gh.create_repo("octo/hello", files={"hello.py": "print('hi')\n"})
    gh.create_issue("octo/hello", author="octo", title="Say hello twice")
    return token


def test_the_pins_name_an_installed_description(description_path: Path) -> None:
    pins = openapi.pins()
    assert description_path.name == Path(pins.file).name
    assert openapi.load(description_path).version == pins.version


def test_right_exchanges_pass(gh: FakeGitHub) -> None:
    token = a_repo(gh)
    assert call(gh, "GET", "/repos/octo/hello", token)[0] == 200
    assert call(gh, "POST", "/repos/octo/hello/issues/1/comments", token, {"body": "hi"})[0] == 201
    status, comments = call(gh, "GET", "/repos/octo/hello/issues/1/comments", token)
    assert (status, len(comments)) == (200, 1)
    assert call(gh, "GET", "/repos/octo/hello/issues/99", token)[0] == 404
    assert gh.openapi_violations() == []


def test_an_answer_missing_a_required_field_is_reported(
    gh: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = a_repo(gh)
    right = rest.comment_json

    def without_user(*args: Any) -> rest.Json:
        return {k: v for k, v in right(*args).items() if k != "user"}

    monkeypatch.setattr(rest, "comment_json", without_user)
    call(gh, "POST", "/repos/octo/hello/issues/1/comments", token, {"body": "hi"})
    assert gh.openapi_violations() == [
        "POST /repos/{owner}/{repo}/issues/{issue_number}/comments: response 201: "
        "body: 'user' is a required property"
    ]


def test_an_answer_with_a_wrong_type_is_reported(
    gh: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = a_repo(gh)
    right = rest.user_json
    monkeypatch.setattr(rest, "user_json", lambda *args: {**right(*args), "id": "1"})
    call(gh, "GET", "/repos/octo/hello/issues/1", token)
    assert (
        "GET /repos/{owner}/{repo}/issues/{issue_number}: response 200: "
        "body.user.id: '1' is not of type 'integer'" in gh.openapi_violations()
    )


def test_a_request_with_a_wrong_body_is_reported(gh: FakeGitHub) -> None:
    token = a_repo(gh)
    call(gh, "POST", "/repos/octo/hello/issues/1/comments", token, {"body": 3})
    assert gh.openapi_violations()[0] == (
        "POST /repos/{owner}/{repo}/issues/{issue_number}/comments: request: "
        "body.body: 3 is not of type 'string'"
    )


def test_a_request_for_what_github_lacks_is_reported(gh: FakeGitHub) -> None:
    token = a_repo(gh)
    assert call(gh, "GET", "/repos/octo/hello/no-such-thing", token)[0] == 404
    assert gh.take_openapi_violations() == [
        "GET /repos/octo/hello/no-such-thing: request: no such path in GitHub's description"
    ]
    call(gh, "DELETE", "/user", token)
    assert gh.take_openapi_violations() == [
        "DELETE /user: request: no such operation in GitHub's description"
    ]


def test_a_wrong_query_parameter_is_reported(gh: FakeGitHub) -> None:
    token = a_repo(gh)
    call(gh, "GET", "/repos/octo/hello/issues/1/comments?per_page=many", token)
    (violation,) = gh.openapi_violations()
    assert violation.startswith(
        "GET /repos/{owner}/{repo}/issues/{issue_number}/comments: request: "
    )
    assert "per_page" in violation


def test_bad_credentials_pass_on_any_endpoint(gh: FakeGitHub) -> None:
    """The one allowed error status: GitHub refuses a bad token on every endpoint, though
    most operations in its description do not list 401."""
    a_repo(gh)
    assert call(gh, "GET", "/repos/octo/hello/branches/main", "wrong")[0] == 401
    assert gh.openapi_violations() == []


STALE_EXAMPLES = {
    # Each is GitHub's example older than its schema (a required field it lacks).
    ("GET", "/user"): "lacks user_view_type, which the schema's discriminator needs",
    ("GET", "/users/{username}"): "lacks user_view_type, which the schema's discriminator needs",
    ("GET", "/repos/{owner}/{repo}"): "lacks language",
    ("GET", "/repos/{owner}/{repo}/pulls"): "a requested team lacks type",
    ("POST", "/repos/{owner}/{repo}/pulls"): "a requested team lacks type",
    ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}"): "a requested team lacks type",
    ("PATCH", "/repos/{owner}/{repo}/pulls/{pull_number}"): "a requested team lacks type",
    ("GET", "/repos/{owner}/{repo}/collaborators/{username}/permission"): "lacks role_name",
}


def _examples(description_path: Path) -> Iterator[tuple[str, str, str, Any]]:
    """(method, template, status, example) for each JSON example GitHub gives of the answers
    of the operations the fake serves."""
    document = json.loads(description_path.read_bytes())
    served = {
        (r.method, re.sub(r"\(\?P<\w+>[^)]*\)", "{}", r.regex.pattern).strip("^$"))
        for r in rest.Router().routes
    }

    def resolved(node: Any) -> Any:
        while isinstance(node, dict) and set(node) == {"$ref"}:
            steps = node["$ref"].removeprefix("#/").split("/")
            node = document
            for step in steps:
                node = node[step]
        return node

    for template, item in document["paths"].items():
        for method, operation in item.items():
            shape = re.sub(r"\{\w+\}", "{}", template)
            if (method.upper(), shape) not in served or (
                method.upper(),
                template,
            ) in STALE_EXAMPLES:
                continue
            for status, response in operation["responses"].items():
                media = resolved(response).get("content", {}).get("application/json", {})
                for example in media.get("examples", {}).values():
                    value = resolved(example)["value"]
                    if isinstance(value, dict) and set(value) == {"$ref"}:
                        value = resolved(value)["value"]  # another example object's value
                    yield method.upper(), template, status, value


def test_githubs_own_examples_pass(description_path: Path) -> None:
    """A check of the adapters: GitHub's examples of the answers the fake gives are right."""
    description = openapi.load(description_path)
    checked = 0
    for method, template, status, example in _examples(description_path):
        path = template.replace("{", "").replace("}", "")  # each parameter its own name
        exchange = openapi.Exchange(
            method,
            path,
            "",
            {"Content-Type": "application/json"},
            b"{}" if method in ("POST", "PATCH") else b"",
            int(status),
            (("Content-Type", "application/json; charset=utf-8"),),
            json.dumps(example).encode(),
        )
        found = [v for v in description.check(exchange) if ": request: " not in v]
        assert found == [], (method, template, status)
        checked += 1
    assert checked >= 8  # the examples of the operations the fake serves, but the stale


def test_the_readme_names_the_pinned_description() -> None:
    pins = openapi.pins()
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    assert f"`{pins.package}` {pins.version}" in readme


def test_a_file_path_with_slashes_is_one_parameter(
    gh: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = a_repo(gh)
    gh.commit("octo/hello", "main", {"deep/down/x.txt": "x\n"}, author="octo")
    assert call(gh, "GET", "/repos/octo/hello/contents/deep/down/x.txt", token)[0] == 200
    assert gh.take_openapi_violations() == []
    right = rest.get_contents

    def without_sha(*args: Any, **kwargs: Any) -> rest.Reply:
        status, payload = right(*args, **kwargs)
        return status, {k: v for k, v in payload.items() if k != "sha"}

    monkeypatch.setattr(rest, "get_contents", without_sha)
    gh.stop()
    gh.start()  # a new router, with the wrong handler
    call(gh, "GET", "/repos/octo/hello/contents/deep/down/x.txt", token)
    assert gh.take_openapi_violations()[0].startswith(
        "GET /repos/{owner}/{repo}/contents/{path}: response 200: "
    )


def test_a_ref_with_slashes_on_a_path_the_fake_lacks_is_githubs_one_parameter(
    gh: FakeGitHub,
) -> None:
    """GitHub has `PATCH /repos/{owner}/{repo}/git/refs/{ref}` (a ref like `heads/main`): a
    client calling it is told what it sent wrong, not that GitHub has no such path."""
    token = a_repo(gh)
    call(gh, "PATCH", "/repos/octo/hello/git/refs/heads/main", token, {"sha": 3})
    assert gh.take_openapi_violations() == [
        "PATCH /repos/{owner}/{repo}/git/refs/{ref}: request: body.sha: 3 is not of type 'string'"
    ]
    # A path GitHub has segment by segment (commits/{ref}/status) stays as it is, not a ref
    # `main/status` of commits/{ref}.
    call(gh, "PATCH", "/repos/octo/hello/commits/main/status", token, {})
    assert gh.take_openapi_violations() == [
        "PATCH /repos/octo/hello/commits/main/status: request: "
        "no such operation in GitHub's description"
    ]
