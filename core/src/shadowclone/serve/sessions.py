"""serve's part in carrying an engine session from clone to clone on one pull request.

When a clone ends with a pull request and a session kept in its run folder, serve points the
pull request at that clone (`Paths.sessions_dir`, one small file per pull request). Before it
launches a clone, serve looks the clone's target up there: if an earlier clone of the same
engine and login kept a session for it, serve copies that session into the new clone's run
folder, where the run program resumes it (run/sessions.py). Removing the earlier clone (`rm`,
`prune`) removes its session: the next clone then starts afresh.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from urllib.parse import urlparse

from shadowclone.config.paths import Paths
from shadowclone.errors import BadInput, MalformedFile
from shadowclone.node import schemas, sessions
from shadowclone.node.ids import is_clone_id
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Record, Request, SessionPointer
from shadowclone.node.target import Target, same_repo

log = logging.getLogger(__name__)


def pointer_file(paths: Paths, request: Request, number: int) -> Path:
    """Where the pointer of pull request `number` of the request's repository lives."""
    host = urlparse(request.github_url).netloc.lower()
    key = f"{host}/{request.target.repo_full_name.lower()}#{number}"
    return paths.sessions_dir / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def pull_number(request: Request, pr_url: str) -> int | None:
    """The number of the pull request `pr_url` names, if it is one of the request's repository
    on its GitHub (the URL comes from the clone: anything else is ignored)."""
    try:
        target = Target.parse(pr_url, request.github_url)
    except BadInput:
        return None
    if target.kind != "pull" or not same_repo(target.repo_full_name, request.target.repo_full_name):
        return None
    return target.number


def remember(paths: Paths, folder: RunFolder, request: Request, record: Record) -> None:
    """A clone ended: if it kept its engine's session and has a pull request, the next clone
    on that pull request goes on with it."""
    if record.pr_url is None or not (folder.saved_session_dir / sessions.MANIFEST).is_file():
        return
    number = pull_number(request, record.pr_url)
    if number is None:
        log.warning(
            "clone %s: %r is not a pull request of its repository", folder.id, record.pr_url
        )
        return
    try:
        schemas.write(pointer_file(paths, request, number), SessionPointer(folder.id))
    except MalformedFile as error:
        log.error("clone %s: could not keep its session for the next clone: %s", folder.id, error)
        return
    log.info("clone %s keeps its engine's session for %s", folder.id, record.pr_url)


def give(paths: Paths, folder: RunFolder, request: Request) -> str | None:
    """Before a clone's first launch: copy into its run folder the session an earlier clone of
    the same engine and login kept for the pull request it targets; return that clone's id,
    or None when there is none to give (the clone starts afresh)."""
    try:
        pointer = schemas.read(pointer_file(paths, request, request.target.number), SessionPointer)
    except FileNotFoundError:
        return None
    except MalformedFile as error:
        log.warning("clone %s: %s", folder.id, error)
        return None
    earlier_id = pointer.clone_id
    if not is_clone_id(earlier_id) or earlier_id == folder.id:
        return None
    earlier = RunFolder(paths.clones_dir / earlier_id)
    try:
        asked = earlier.request()
        if (asked.engine, asked.login) != (request.engine, request.login):
            log.info(
                "clone %s: clone %s's session is %s on %s, not this clone's engine and login",
                folder.id,
                earlier_id,
                asked.engine,
                asked.login,
            )
            return None
        sessions.copy_session(earlier.saved_session_dir, folder.given_session_dir, earlier_id)
    except FileNotFoundError:
        return None  # the earlier clone, or its session, was removed
    except (MalformedFile, OSError) as error:
        log.warning("clone %s: clone %s's session is not given: %s", folder.id, earlier_id, error)
        return None
    log.info("clone %s goes on with clone %s's engine session", folder.id, earlier_id)
    return earlier_id
