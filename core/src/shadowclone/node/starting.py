"""`start`: admit a clone. Admission runs entirely under `start.lock`, from the first check
until the request is written, so concurrent starts in any number of processes can never break
a rule; the rules themselves are in `admission`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime
from urllib.parse import urlparse

import attrs

from shadowclone import files
from shadowclone.config import Config
from shadowclone.errors import BadInput, MalformedFile, Refused
from shadowclone.node.admission import (
    DAY,
    Login,
    admitted_target,
    check_daily_limit,
    check_one_per_target,
    clone_caps,
    request_for,
)
from shadowclone.node.engines import Engines, engine_and_login
from shadowclone.node.ids import new_clone_id
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import NO_CAPS, Caps
from shadowclone.node.setups import read_setup
from shadowclone.node.spares import spare_kind, take_spare
from shadowclone.node.target import Target
from shadowclone.node.views import CloneView, read_view
from shadowclone.node.waiting import Waiting

START_LOCK_TIMEOUT_S = 60.0


class Starting:
    """`engines` is called only once a start gets as far as its engine: a start refused for
    its input loads no plugin."""

    def __init__(
        self,
        config: Config,
        waiting: Waiting,
        engines: Callable[[], Engines[Login]],
        clock: Callable[[], datetime],
    ) -> None:
        self.config = config
        self.waiting = waiting
        self.clones = waiting.clones
        self.paths = waiting.clones.paths
        self.engines = engines
        self.clock = clock

    def start(
        self,
        target_text: str,
        engine: str | None,
        instructions: str,
        allow_secrets: bool,
        caps: Caps | None,
    ) -> CloneView:
        """See `Node.start`, which gives every argument."""
        target = Target.parse(target_text, self.config.github.url)
        caps = clone_caps(caps or Caps(), self.config)
        if engine is not None and not engine.strip():
            raise BadInput("--engine: expected an engine name (claude, codex...), got ''")
        with contextlib.suppress(MalformedFile):  # admission reports it, under the lock
            setup = read_setup(self.paths, target.repo_full_name)
            engine = engine or (setup.engine if setup else None)
        chosen = engine_and_login(
            self.config, self.paths.config_file, self.engines, engine or self.config.engine
        )
        files.make_folder(self.paths.clones_dir)
        files.make_folder(self.paths.active_dir)
        lock = files.FileLock(
            self.paths.start_lock, timeout=START_LOCK_TIMEOUT_S, plain_folder=False
        )
        try:
            with lock:
                api = (
                    chosen.provider.base_url
                    or chosen.login.base_url
                    or chosen.registration.default_base_url
                )
                model_host = urlparse(api).netloc if api else None
                return self._admit(
                    target, chosen.name, chosen.login, instructions, model_host, allow_secrets, caps
                )
        except files.LockBusy:
            raise Refused(
                f"{self.paths.start_lock}: another start has held the lock for over "
                f"{START_LOCK_TIMEOUT_S:.0f} s"
            ) from None

    def _admit(
        self,
        target: Target,
        engine: str,
        login: Login,
        instructions: str,
        model_host: str | None,
        allow_secrets: bool = False,
        caps: Caps = NO_CAPS,
    ) -> CloneView:
        repo = target.repo_full_name
        self.clones.index.ensure()
        try:
            setup = read_setup(self.paths, repo)
        except MalformedFile as error:
            raise Refused(f"the setup record of {repo} is unreadable: {error}") from None
        target = admitted_target(target, setup, self.config, login)

        at = self.clock()
        started_today = self.clones.count_since(at - DAY)
        check_daily_limit(started_today, self.config)
        check_one_per_target(
            target,
            ((v.id, v.target, str(v.state)) for v in self.clones.active(clean=True, on=target)),
        )
        assert setup is not None  # admitted_target refuses a repository with no setup

        request = request_for(
            "",
            at,
            target,
            setup,
            self.config,
            engine,
            login,
            model_host,
            instructions,
            allow_secrets,
            caps,
        )
        folder = self._new_folder(at, spare_kind(request))
        request = attrs.evolve(request, id=folder.id)
        # The active marker goes first: a crash before the request leaves a marker without a
        # request, which the next start on its target removes (the others skip it: no request,
        # no active clone); never a request that admission cannot see.
        files.write_atomic(
            self.paths.active_dir / folder.id, target.key.encode(), plain_folder=True
        )
        folder.write_request(request)
        view = read_view(folder)
        return attrs.evolve(view, waiting_for=self.waiting.waiting_for(view))

    def _new_folder(self, at: datetime, kind: str | None = None) -> RunFolder:
        """A new run folder, its id in the index: a spare of `kind` serve made ahead if there
        is one (its clone's container is started already), or a new folder. Under
        start.lock."""
        index = self.clones.index
        last = index.last_time()
        moment = max(at, last) if last is not None else at  # the index's times never go back
        while True:
            folder = self.clones.folder(new_clone_id(moment))
            try:
                folder.path.mkdir()
            except FileExistsError:
                continue
            take_spare(self.paths.clones_dir, kind, folder.path)
            index.append(folder.id)
            return folder
