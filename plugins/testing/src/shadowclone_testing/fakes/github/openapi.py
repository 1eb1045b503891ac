"""Checks the fake GitHub's REST exchanges against GitHub's OpenAPI description of its REST API.

A fake that drifts from GitHub lets tests pass that would fail against GitHub, so in tests
every request a client makes and every answer the fake gives are checked against GitHub's
published description (openapi-core does the checking). The description is pinned in
`openapi.env` beside this module and installed by `scripts/install-github-openapi`; the demo
never checks and never needs it.

The description is read once per process (about 0.15 s for its 13 MB) and the checks run on a
copy pruned to the paths the fake serves (finding a path among GitHub's 800 costs about 3 ms a
request, among the fake's dozen almost nothing); a request the fake has no route for is checked
against the whole description, so a client calling what GitHub does not have is still caught.

Allowed quirks of the description (each is GitHub's behaviour, not a looser fake):

- null where a schema says `nullable` beside `oneOf`/`anyOf` without a `type` (a commit's
  `author` when no account has its email): OpenAPI 3.0.3 ignores such a `nullable`, GitHub
  means it;
- a folder's listing from `/contents/{path}` (an array where a discriminator on `type` picks
  the variant; its entries then go unchecked);
- an error status an operation does not list (GitHub answers 401 "Bad credentials" or 500 on
  any endpoint, though most list neither) passes when its body is GitHub's `basic-error`.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import threading
import urllib.parse
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from shadowclone_testing.fakes.github import rest

if TYPE_CHECKING:
    from openapi_core import OpenAPI

log = logging.getLogger(__name__)

PINS_FILE = Path(__file__).with_name("openapi.env")
DESCRIPTION_VARIABLE = "SHADOWCLONE_GITHUB_OPENAPI"
"""The path of the description's JSON file, instead of searching for the installed one."""
TOOLS_FOLDER = Path("tools", "github-openapi", "node_modules")
"""Where `scripts/install-github-openapi` installs the pinned npm package, in a checkout."""

Json = dict[str, Any]

SLASHED = frozenset({"ref", "path", "branch"})
"""The path parameters GitHub takes with slashes in them when they end a path (a ref like
`heads/main`, a file's path, a branch name), where openapi-core matches one segment only."""


@attrs.frozen
class Pins:
    """The pinned description: its npm package, version and file within the package."""

    package: str
    version: str
    file: str

    @property
    def installed(self) -> Path:
        """The file below a checkout's root."""
        return TOOLS_FOLDER / self.package / self.file


def pins() -> Pins:
    """Read `openapi.env`, the one record of the pins (the install script sources it)."""
    values: dict[str, str] = {}
    for line in PINS_FILE.read_text(encoding="utf-8").splitlines():
        name, equals, value = line.strip().partition("=")
        if equals and not name.startswith("#"):
            values[name] = value
    return Pins(
        values["GITHUB_OPENAPI_PACKAGE"],
        values["GITHUB_OPENAPI_VERSION"],
        values["GITHUB_OPENAPI_FILE"],
    )


def find_description(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The description's file: SHADOWCLONE_GITHUB_OPENAPI, or the installed pin found from the
    current folder up (as `harness.engines_bin` finds the engines); None when neither is there."""
    named = environ.get(DESCRIPTION_VARIABLE)
    if named:
        return Path(named) if Path(named).is_file() else None
    relative = pins().installed
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / relative).is_file():
            return folder / relative
    return None


# ----------------------------------------------------------------------------- exchanges


@attrs.frozen
class Exchange:
    """One REST request and the fake's answer, as the HTTP layer saw them."""

    method: str
    path: str
    """Below the API prefix, without the query."""
    query: str
    request_headers: Mapping[str, str]
    request_body: bytes
    status: int
    response_headers: Sequence[tuple[str, str]]
    response_body: bytes


def _content_type(headers: Iterable[tuple[str, str]]) -> str:
    return next((v.lower() for k, v in headers if k.lower() == "content-type"), "")


class _Request:
    """openapi-core's request protocol over an `Exchange`."""

    def __init__(self, host_url: str, path: str, exchange: Exchange) -> None:
        from openapi_core.datatypes import RequestParameters
        from werkzeug.datastructures import Headers, ImmutableMultiDict

        self.host_url = host_url
        self.path = path
        self.method = exchange.method.lower()
        self.body: bytes | None = exchange.request_body or None
        self.content_type = _content_type(exchange.request_headers.items())
        self.parameters = RequestParameters(
            query=ImmutableMultiDict(
                urllib.parse.parse_qsl(exchange.query, keep_blank_values=True)
            ),
            header=Headers(list(exchange.request_headers.items())),
            cookie=ImmutableMultiDict(),
        )


@functools.cache
def _routes() -> tuple[rest.Route, ...]:
    return rest.Router().routes


def _one_segment_parameters(path: str) -> str:
    """`path` with the slashes in a rest-of-path parameter (a file's path, a branch name) as
    `%2F`: GitHub takes them whole where its description says `{path}`, while openapi-core
    matches a parameter to one segment only."""
    for route in _routes():
        match = route.regex.match(path)
        if match is None:
            continue
        for name, value in match.groupdict().items():
            if "/" in value and route.regex.groupindex[name] == len(match.groups()):
                start = match.start(name)
                return path[:start] + value.replace("/", "%2F") + path[match.end(name) :]
    return path


class _Response:
    """openapi-core's response protocol over an `Exchange`."""

    def __init__(self, exchange: Exchange) -> None:
        from werkzeug.datastructures import Headers

        self.status_code = exchange.status
        self.headers = Headers(list(exchange.response_headers))
        self.content_type = _content_type(exchange.response_headers)
        self.data: bytes | None = exchange.response_body or None


# ----------------------------------------------------------------------------- the description


class Description:
    """GitHub's description, ready to check exchanges with; build it once (see `load`)."""

    def __init__(self, document: Json, served: Sequence[re.Pattern[str]]) -> None:
        from openapi_core import Config, OpenAPI

        # The description is GitHub's own; checking it (12 s) would tell nothing new.
        config = Config(spec_validator_cls=None)
        self.version = str(document.get("info", {}).get("version", "?"))
        self.host_url = str(document["servers"][0]["url"])
        self.served_patterns = tuple(served)
        pruned = {
            **document,
            "paths": {
                template: item
                for template, item in document["paths"].items()
                if any(pattern.match(template) for pattern in served)
            },
        }
        self.served: OpenAPI = OpenAPI.from_dict(pruned, config=config)
        self.whole: OpenAPI = OpenAPI.from_dict(document, config=config)
        self._basic_error = document["components"]["schemas"]["basic-error"]
        self._templates = tuple(document["paths"])

    @functools.cached_property
    def _spanning(self) -> tuple[re.Pattern[str], ...]:
        """For each template ending in a parameter GitHub takes with slashes: a pattern whose
        parameter takes the rest of the path, longest literal start first."""
        found = []
        for template in self._templates:
            head, slash, last = template.rpartition("/")
            if slash and last.strip("{}") in SLASHED and not head.endswith("}"):
                start = re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(head + "/"))
                found.append(re.compile(f"^{start}(?P<rest>.+/.+)$"))
        return tuple(sorted(found, key=lambda p: -len(p.pattern)))

    def _path(self, method: str, path: str, routed: bool) -> str:
        """`path` as openapi-core matches it: slashes in a rest-of-path parameter as `%2F`
        (see `_one_segment_parameters`), also for a path the fake has no route for (a client
        calling GitHub's `PATCH /repos/{owner}/{repo}/git/refs/{ref}` with `heads/main`) that
        matches no template segment by segment."""
        from openapi_core.templating.paths.exceptions import PathError, PathNotFound
        from openapi_core.templating.paths.finders import APICallPathFinder

        if routed:
            return _one_segment_parameters(path)
        try:
            APICallPathFinder(self.whole.spec).find(method, self.host_url + path)
        except PathNotFound:
            pass
        except PathError:  # the path is GitHub's, segment by segment; the method is not
            return path
        else:
            return path
        for pattern in self._spanning:
            match = pattern.match(path)
            if match is not None:
                return path[: match.start("rest")] + match["rest"].replace("/", "%2F")
        return path

    def check(self, exchange: Exchange) -> list[str]:
        """What in `exchange` breaks the description, each readable on its own line."""
        routed = any(p.match(exchange.path) for p in self.served_patterns)
        openapi = self.served if routed else self.whole
        path = self._path(exchange.method.lower(), exchange.path, routed)
        request = _Request(self.host_url, path, exchange)
        found = [
            f"request: {line}"
            for error in openapi.iter_request_errors(request)
            for line in _describe(error)
        ]
        if any(line.startswith("request: no ") for line in found):
            return [self._name(openapi, exchange, path) + ": " + line for line in found]
        response = _Response(exchange)
        for error in openapi.iter_response_errors(request, response):
            if self._undeclared_error_status(error, exchange):
                continue
            found += [f"response {exchange.status}: {line}" for line in _describe(error)]
        return [self._name(openapi, exchange, path) + ": " + line for line in found]

    def _undeclared_error_status(self, error: Exception, exchange: Exchange) -> bool:
        """An allowed quirk: GitHub's error statuses on operations that do not list them."""
        from openapi_core.templating.responses.exceptions import ResponseNotFound
        from openapi_schema_validator import OAS30Validator

        if not isinstance(error, ResponseNotFound) or exchange.status < 400:
            return False
        try:
            body = json.loads(exchange.response_body)
        except ValueError:
            return False
        return bool(OAS30Validator(self._basic_error).is_valid(body))

    def _name(self, openapi: OpenAPI, exchange: Exchange, path: str) -> str:
        """`METHOD /template` as the description names the operation, or the path itself."""
        from openapi_core.templating.paths.exceptions import PathError
        from openapi_core.templating.paths.finders import APICallPathFinder

        try:
            found = APICallPathFinder(openapi.spec).find(
                exchange.method.lower(), self.host_url + path
            )
        except PathError:
            return f"{exchange.method} {exchange.path}"
        return f"{exchange.method} {found.path_result.pattern}"


def _describe(error: Exception) -> Iterator[str]:
    """openapi-core's error as lines like `body[0].user: None is not of type 'object'`."""
    from openapi_core.templating.paths.exceptions import OperationNotFound, PathNotFound
    from openapi_core.templating.responses.exceptions import ResponseNotFound
    from openapi_core.validation.schemas.exceptions import InvalidSchemaValue

    if isinstance(error, PathNotFound):
        yield "no such path in GitHub's description"
        return
    if isinstance(error, OperationNotFound):
        yield "no such operation in GitHub's description"
        return
    if isinstance(error, ResponseNotFound):
        yield f"status not in GitHub's description (it lists {', '.join(error.availableresponses)})"
        return
    cause = error.__cause__
    if isinstance(cause, InvalidSchemaValue):
        where = _where(error)
        for schema_error in cause.schema_errors:  # jsonschema's, which mypy sees untyped
            if _nullable_composition(schema_error) or _array_under_discriminator(schema_error):
                continue
            steps = getattr(schema_error, "absolute_path", ())
            path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in steps)
            yield f"{where}{path}: {getattr(schema_error, 'message', schema_error)}"
        return
    detail = f": {cause}" if cause is not None else ""
    yield f"{error}{detail}"


def _nullable_composition(schema_error: object) -> bool:
    """The allowed quirk of null where the description says `nullable` beside `oneOf`/`anyOf`
    but no `type` (OpenAPI 3.0.3 then ignores `nullable`; GitHub means null and sends it)."""
    schema = getattr(schema_error, "schema", None)
    return (
        getattr(schema_error, "instance", ...) is None
        and isinstance(schema, Mapping)
        and schema.get("nullable") is True
        and "type" not in schema
    )


def _array_under_discriminator(schema_error: object) -> bool:
    """The allowed quirk of a folder's listing from `/contents/{path}`: its `oneOf` picks the
    array variant through a discriminator on `type`, which an array cannot have, so every
    listing fails. The listing's entries go unchecked (a known gap)."""
    schema = getattr(schema_error, "schema", None)
    return (
        isinstance(getattr(schema_error, "instance", None), list)
        and isinstance(schema, Mapping)
        and "discriminator" in schema
    )


def _where(error: Exception) -> str:
    """What part of the message a schema error is in: the body, or a named parameter/header."""
    name = getattr(error, "name", None)
    location = getattr(error, "location", None)
    if name is not None:
        return f"{location or 'header'} {name}"
    return "body"


# ----------------------------------------------------------------------------- loading once

_loaded: dict[Path, Description] = {}
_loading = threading.Lock()
_enabled = False
_watched: weakref.WeakSet[Any] = weakref.WeakSet()


def enable() -> None:
    """Check every fake GitHub started from now on in this process (the pytest plugin calls
    this; the demo does not)."""
    global _enabled  # noqa: PLW0603 - one switch per process, as the plugin loads once
    _enabled = True


def load(path: Path) -> Description:
    """The description at `path`, read and pruned once per process."""
    path = path.resolve()
    with _loading:
        if path not in _loaded:
            document = json.loads(path.read_bytes())
            served = [route.regex for route in _routes()]
            _loaded[path] = Description(document, served)
        return _loaded[path]


def for_new_fake(fake: object) -> Description | None:
    """The description a fake starting now checks against, or None when checks are off.

    Under CI=true a missing description is an error, so that CI never passes unchecked.
    """
    if not _enabled:
        return None
    path = find_description()
    if path is None:
        reason = (
            f"GitHub's OpenAPI description is not installed: run scripts/install-github-openapi "
            f"or set {DESCRIPTION_VARIABLE}"
        )
        if os.environ.get("CI", "").lower() == "true":
            raise RuntimeError(f"CI=true and {reason}")
        log.warning("the fake GitHub goes unchecked: %s", reason)
        return None
    _watched.add(fake)
    return load(path)


def watched() -> list[Any]:
    """The fakes started with checks on and still alive, for the pytest plugin."""
    return list(_watched)
