"""What a check clone reports of a repository (`shadowclone setup`): the one file setup reads
from the clone side, so both sides find it here."""

from __future__ import annotations

import json

import attrs

from shadowclone.node.schemas import CONVERTER


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
    configurations: tuple[str, ...] = ()
    """Every dev container configuration the repository has (`environment` is the one read)."""
    problems: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(CONVERTER.unstructure(self))

    @classmethod
    def from_json(cls, text: str) -> CheckReport:
        return CONVERTER.structure(json.loads(text), cls)


ENVIRONMENT_FOLDER = "environment"
"""Where the check clone copies the environment's files, by their paths in the repository."""
