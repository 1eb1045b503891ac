"""The node: start, list, get, send, answer and stop clones on this machine.

The CLI and the MCP server are thin layers over `LocalNode`. Admission runs entirely
under `start.lock`, from the first check until the request is written, so concurrent starts in
any number of processes can never break a rule.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
import secrets
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import attrs

from shadowclone import files
from shadowclone.config import Config, Paths, load_config
from shadowclone.errors import BadInput, MalformedFile, NotFound, Refused
from shadowclone.node import servelock as serve_lock
from shadowclone.node.admission import (
    DAY,
    Login,
    admitted_target,
    check_daily_limit,
    check_one_per_target,
    clone_caps,
    daily_cost_reason,
    request_for,
    spent_since,
)
from shadowclone.node.index import CloneIndex
from shadowclone.node.retention import Removed, Retention, delete_tree, tree_size
from shadowclone.node.runfolder import RunFolder, is_clone_id, new_clone_id
from shadowclone.node.schemas import (
    INBOX_CLOSED,
    NO_CAPS,
    Answer,
    Caps,
    ChosenBy,
    InboxKind,
    InboxLine,
    Outcome,
    ProgressLine,
    Question,
    ResumeMarker,
    State,
    Step,
    StopMarker,
    Throttles,
    Usage,
    Via,
    dumps,
    now,
    read,
)
from shadowclone.node.scrub import scrubbed, scrubbed_line
from shadowclone.node.setups import read_setup
from shadowclone.node.spares import spare_kind, take_spare
from shadowclone.node.target import Target

if TYPE_CHECKING:
    from shadowclone.plugin.manager import Registry

log = logging.getLogger(__name__)

START_LOCK_TIMEOUT_S = 60.0
STOP_LOCK_TIMEOUT_S = 60.0
"""How long `stop` waits for a clone's launch (which holds its stop lock) to finish."""
DEFAULT_LIST_LIMIT = 30


@attrs.frozen
class CloneView:
    """A clone as the owner sees it: the request, serve's record and the clone's own lines."""

    id: str
    target: Target
    engine: str
    state: State
    requested_at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None
    stop_requested: bool = False
    question: Question | None = None
    pr_url: str | None = None
    outcome: Outcome | None = None
    report: str | None = None
    exit_code: int | None = None
    output_tail: str = ""
    reason: str = ""
    """Why serve ended the clone as it did, where its final line does not say."""
    last_progress: tuple[ProgressLine, ...] = ()
    problems: tuple[str, ...] = ()
    """Malformed files or lines met while reading this clone; each names its file."""
    usage: Usage = attrs.field(factory=Usage)
    """The engine's tokens and cost so far, over all its turns."""
    turns: int = 0
    scheduled_until: datetime | None = None
    """While scheduled: when its login's usage limit resets and the engine goes on."""
    caps: Caps = attrs.field(factory=Caps)
    """Where the clone pauses to ask whether to go on (as started; raised ones are in its
    progress lines)."""
    waiting_for: str = ""
    """What a queued clone waits for (serve, a slot, its login); shown by `start` and `get`."""


@attrs.frozen
class Questions:
    """The questions a clone asked, which are settled, and which has an answer on its way."""

    asked: dict[str, Question]
    settled: dict[str, Answer]
    pending: frozenset[str]

    def open(self) -> Question | None:
        for question in reversed(self.asked.values()):
            if question.id not in self.settled and question.id not in self.pending:
                return question
        return None


@attrs.frozen
class Listing:
    clones: list[CloneView]
    problems: list[str]


class LocalNode:
    """Operations on the clones of this machine; `Registry` is loaded only when needed."""

    def __init__(
        self,
        config: Config,
        paths: Paths,
        registry: Registry | None = None,
        clock: Callable[[], datetime] = now,
    ) -> None:
        self.config = config
        self.paths = paths
        self._registry = registry
        self.clock = clock

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            from shadowclone.plugin.manager import load_registry  # entry points: only when needed

            self._registry = load_registry(self.config.plugins.disabled)
        return self._registry

    # ------------------------------------------------------------------ start

    def start(
        self,
        target_text: str,
        engine: str | None = None,
        instructions: str = "",
        allow_secrets: bool = False,
        caps: Caps | None = None,
    ) -> CloneView:
        """Admit a clone; `allow_secrets`: it may push what looks like a secret (otherwise a
        secret found in its commits stops its push); `caps`: this clone's, each given one in
        place of the config's."""
        target = Target.parse(target_text, self.config.github.url)
        caps = clone_caps(caps or Caps(), self.config)
        if engine is not None and not engine.strip():
            raise BadInput("--engine: expected an engine name (claude, codex...), got ''")
        with contextlib.suppress(MalformedFile):  # admission reports it, under the lock
            setup = read_setup(self.paths, target.repo_full_name)
            engine = engine or (setup.engine if setup else None)
        engine_name = engine or self.config.engine
        provider = self.config.provider(engine_name)
        if provider is None:
            raise BadInput(
                f"engine {engine_name!r}: no [providers.{engine_name}] table in "
                f"{self.paths.config_file}"
            )
        registration = self.registry.engine(engine_name)
        login = self.registry.secret_provider(provider.login)
        if login.engine not in (None, engine_name):
            raise BadInput(
                f"{self.paths.config_file}: providers.{engine_name}.login: {provider.login!r} is a "
                f"login for {login.engine}, not {engine_name}"
            )
        files.make_folder(self.paths.clones_dir)
        files.make_folder(self.paths.active_dir)
        lock = files.FileLock(
            self.paths.start_lock, timeout=START_LOCK_TIMEOUT_S, plain_folder=False
        )
        try:
            with lock:
                api = provider.base_url or login.base_url or registration.default_base_url
                model_host = urlparse(api).netloc if api else None
                return self._admit(
                    target, engine_name, login, instructions, model_host, allow_secrets, caps
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
        self.index.ensure()
        try:
            setup = read_setup(self.paths, repo)
        except MalformedFile as error:
            raise Refused(f"the setup record of {repo} is unreadable: {error}") from None
        target = admitted_target(target, setup, self.config, login)

        at = self.clock()
        started_today = self._count_since(at - DAY)
        check_daily_limit(started_today, self.config)
        check_one_per_target(
            target, ((v.id, v.target, str(v.state)) for v in self._active(clean=True))
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
        # request, which the next start removes; never a request that admission cannot see.
        files.write_atomic(
            self.paths.active_dir / folder.id, target.key.encode(), plain_folder=True
        )
        folder.write_request(request)
        view = self._view(folder)
        return attrs.evolve(view, waiting_for=self.waiting_for(view))

    @property
    def index(self) -> CloneIndex:
        return CloneIndex(self.paths.clones_dir)

    def _new_folder(self, at: datetime, kind: str | None = None) -> RunFolder:
        """A new run folder, its id in the index: a spare of `kind` serve made ahead if there
        is one (its clone's container is started already), or a new folder. Under
        start.lock."""
        last = self.index.last_time()
        moment = max(at, last) if last is not None else at  # the index's times never go back
        while True:
            folder = RunFolder(self.paths.clones_dir / new_clone_id(moment))
            try:
                folder.path.mkdir()
            except FileExistsError:
                continue
            take_spare(self.paths.clones_dir, kind, folder.path)
            self.index.append(folder.id)
            return folder

    def active(self) -> builtins.list[CloneView]:
        """The queued, running and waiting clones."""
        return self._active()

    def started_since(self, since: datetime) -> int:
        """Clones admitted since `since`: what the daily limit counts."""
        return self._count_since(since)

    def spent_since(self, since: datetime) -> float:
        """What the clones requested since `since` have cost so far, as their engines reported
        it (serve folds it into their records): what `daily_cost_usd` caps."""
        return spent_since(self.paths, self.index, since)

    def _count_since(self, since: datetime) -> int:
        """Clones requested since `since`, counted by the time in their ids (the index).

        Ids carry whole seconds, so `since` is rounded down: a clone is counted for up to a
        second longer than 24 hours, never a moment less."""
        return self.index.since(since.replace(microsecond=0))

    def _active(self, clean: bool = False) -> list[CloneView]:
        """Active clones, from the active markers; `clean` (under start.lock) drops stale ones."""
        try:
            files.check_plain_folder(self.paths.active_dir)
            ids = sorted(os.listdir(self.paths.active_dir))
        except FileNotFoundError:
            return []
        except OSError as error:
            raise MalformedFile(self.paths.active_dir, f"cannot list: {error.strerror}") from None
        active: list[CloneView] = []
        for clone_id in ids:
            if not is_clone_id(clone_id):
                continue
            folder = RunFolder(self.paths.clones_dir / clone_id)
            try:
                view = self._view(folder) if folder.exists() else None
            except MalformedFile as error:
                log.warning("%s", error)
                continue
            if view is not None and view.state.active:
                active.append(view)
            elif clean:
                try:
                    files.remove(self.paths.active_dir / clone_id)
                except MalformedFile as error:
                    log.warning("a stale active marker stays: %s", error)
        return active

    # ------------------------------------------------------------------ reading

    def _view(self, folder: RunFolder, lines: int = 0) -> CloneView:
        request = folder.request()
        problems: list[str] = []
        # The stop marker before the record. A marker is written under the clone's stop lock,
        # which serve holds from its look at the marker until the clone runs, so a queued
        # clone with a marker and no `launching_at` never starts. Only a stop that gave up
        # waiting for the lock writes one during a launch, once `launching_at` is set; read in
        # this order, that clone is never seen here as stopped in the queue (whose active
        # marker admission would drop).
        stop = folder.stop_marker()
        try:
            record = folder.record()
        except MalformedFile as error:
            record, problems = None, [str(error)]
        if record is not None:
            record = scrubbed(record)  # serve writes it scrubbed; a file others changed may not be
        state = record.state if record else State.QUEUED
        launching = record is not None and record.launching_at is not None
        if state is State.QUEUED and stop is not None and not launching:
            state = State.STOPPED  # a queued clone with a stop marker never starts
        view = CloneView(
            id=folder.id,
            target=request.target,
            engine=request.engine,
            state=state,
            requested_at=request.requested_at,
            caps=request.caps,
            stop_requested=stop is not None,
            problems=tuple(problems),
        )
        if record is not None:
            view = attrs.evolve(
                view,
                started_at=record.started_at,
                ended_at=record.ended_at,
                question=record.question,
                pr_url=record.pr_url,
                outcome=record.outcome,
                report=record.report,
                exit_code=record.exit_code,
                output_tail=record.output_tail,
                reason=record.reason,
                last_progress=(record.last_progress,) if record.last_progress else (),
                usage=record.usage,
                turns=record.turns,
                scheduled_until=record.scheduled_until if record.state is State.SCHEDULED else None,
            )
        if lines:
            # A huge log is read from its last whole lines: the latest state is what `get` shows.
            skipped = files.tail_offset(folder.progress_file)
            progress, line_problems, _ = folder.progress(skipped)
            if skipped:
                line_problems.insert(
                    0,
                    f"{folder.progress_file}: its first {skipped} bytes were skipped (too much "
                    "to read at once); the lines shown are its latest",
                )
            questions = self._questions(folder, progress)
            final = next((p for p in reversed(progress) if p.final), None)
            view = attrs.evolve(
                view,
                last_progress=tuple(scrubbed_line(line) for line in progress[-lines:]),
                question=questions.open() if state.active else None,
                pr_url=view.pr_url or (final.pr_url if final else None),
                report=view.report or (final.report if final else None),
                problems=view.problems + tuple(line_problems),
            )
        return view

    def _questions(self, folder: RunFolder, progress: list[ProgressLine]) -> Questions:
        asked: dict[str, Question] = {}
        settled: dict[str, Answer] = {}
        for line in progress:
            if line.question is not None:
                asked[line.question.id] = line.question
            if line.answer is not None:
                settled[line.answer.question_id] = line.answer
        inbox, _, _ = folder.inbox()
        pending = frozenset(
            line.question_id for line in inbox if line.kind is InboxKind.ANSWER and line.question_id
        )
        return Questions(asked, settled, pending)

    def resolve(self, clone_id: str) -> RunFolder:
        """The run folder of an id, or of a unique prefix of one."""
        clone_id = clone_id.strip()
        exact = RunFolder(self.paths.clones_dir / clone_id)
        if is_clone_id(clone_id) and exact.exists():
            return exact
        if clone_id and "/" not in clone_id and "." not in clone_id:
            matches = [
                RunFolder(self.paths.clones_dir / i) for i in self.index.with_prefix(clone_id)
            ]
            matches = [f for f in matches if f.exists()]
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                raise BadInput(
                    f"clone id {clone_id!r} is ambiguous: it starts "
                    + ", ".join(f.id for f in matches[:5])
                )
        raise NotFound(f"no clone {clone_id!r}; `shadowclone list` shows the clones")

    def get(self, clone_id: str, lines: int = 20) -> CloneView:
        view = self._view(self.resolve(clone_id), lines=max(lines, 1))
        return attrs.evolve(view, waiting_for=self.waiting_for(view))

    def throttles(self) -> dict[str, int]:
        """The logins serve holds back for an overload: how many of their clones may run."""
        if serve_lock.running(self.paths) is None:
            return {}
        return self._throttles()

    def _throttles(self) -> dict[str, int]:
        """What serve last wrote of its holds (the caller knows serve runs)."""
        try:
            return dict(read(self.paths.throttles_file, Throttles).limits)
        except FileNotFoundError:
            return {}
        except (OSError, MalformedFile) as error:
            log.warning("%s", error)
            return {}

    def waiting_for(self, view: CloneView) -> str:
        """Why a queued clone has not started, as serve's queue would decide; "" for others.

        The daily limit is not among the reasons: it is applied when a clone is admitted, so a
        queued clone is already counted."""
        if view.state is not State.QUEUED or view.stop_requested:
            return ""
        if serve_lock.running(self.paths) is None:
            return (
                "serve, which is not running: start it with `shadowclone serve`, or keep it "
                "running with `shadowclone service install`"
            )
        active = self._active()
        launched = [v for v in active if v.state.admitted]
        ahead = sum(
            1
            for v in active
            if v.state is State.QUEUED and (v.requested_at, v.id) < (view.requested_at, view.id)
        )
        queue = f"; {ahead} queued ahead of it" if ahead else ""
        cap = self.config.limits.daily_cost_usd
        if cap is not None and (spent := self.spent_since(self.clock() - DAY)) >= cap:
            return daily_cost_reason(spent, cap)
        if len(launched) >= self.config.parallel_clones:
            return (
                f"a slot: {len(launched)} clones running, parallel_clones = "
                f"{self.config.parallel_clones}{queue}"
            )
        with contextlib.suppress(OSError, MalformedFile):
            request = RunFolder(self.paths.clones_dir / view.id).request()
            # The admitted clones of the same login, each request read once.
            same = [
                other
                for other in launched
                if RunFolder(self.paths.clones_dir / other.id).request().login == request.login
            ]
            for other in same:
                until = other.scheduled_until
                if until is not None and until > self.clock():
                    return (
                        f"its login {request.login}, whose usage limit resets at "
                        f"{until.astimezone():%H:%M:%S} (clone {other.id} waits for it)"
                    )
            held = self._throttles().get(request.login)
            if held is not None and len(same) >= held:
                return (
                    f"its login {request.login}, whose provider is overloaded: serve runs at "
                    f"most {held} of its clones for now ({len(same)} running)"
                )
            if request.one_at_a_time and same:
                return (
                    f"its login {request.login}, which runs one clone at a time: clone "
                    f"{same[0].id} has it"
                )
        return f"serve to launch it{queue}"

    def list(self, include_all: bool = False, limit: int = DEFAULT_LIST_LIMIT) -> Listing:
        """Active clones and the most recent others (all of them with `include_all`)."""
        views: list[CloneView] = []
        problems: list[str] = []
        for item in self.views(include_all, limit):
            if isinstance(item, CloneView):
                views.append(item)
            else:
                problems.append(item)
        return Listing(views, problems)

    def views(
        self, include_all: bool = False, limit: int = DEFAULT_LIST_LIMIT
    ) -> Iterator[CloneView | str]:
        """`list`, one clone (or one problem, as a string) at a time, newest first: all of
        them can be shown without holding them all."""
        shown: set[str] = set()
        for clone_id in self.index.newest():
            if not include_all and len(shown) >= limit:
                break
            try:
                view = self._view(RunFolder(self.paths.clones_dir / clone_id))
            except FileNotFoundError:
                continue  # a start in progress, or a removed clone
            except MalformedFile as error:
                shown.add(clone_id)
                yield str(error)
                continue
            shown.add(clone_id)
            yield view
        if not include_all:
            yield from (view for view in self._active() if view.id not in shown)

    # ------------------------------------------------------------------ talking

    def _active_view(self, clone_id: str, what: str) -> tuple[RunFolder, CloneView]:
        folder = self.resolve(clone_id)
        view = self._view(folder)
        if not view.state.active:
            raise Refused(f"clone {folder.id} is {view.state}; it takes no {what}")
        if view.stop_requested:
            raise Refused(f"clone {folder.id} is stopping; it takes no {what}")
        return folder, view

    def send(self, clone_id: str, text: str, via: Via = Via.CLI) -> InboxLine:
        if not text.strip():
            raise BadInput("message: expected some text, got nothing")
        folder, _ = self._active_view(clone_id, "messages")
        line = InboxLine(id=_line_id(), kind=InboxKind.MESSAGE, text=text, at=self.clock(), via=via)
        # Under the inbox lock, as the clone closes its inbox: a message is either accepted
        # before the close (and the clone waits for it) or refused here.
        with files.lock_for(folder.inbox_file):
            progress, _, _ = folder.progress()
            if any(p.final for p in progress):
                raise Refused(f"clone {folder.id} has finished; it takes no more messages")
            if any(p.step is Step.SAVE and p.text == INBOX_CLOSED for p in progress):
                raise Refused(
                    f"clone {folder.id} is saving its work; it takes no more messages "
                    "(start a new clone for more work)"
                )
            files.append_line(folder.inbox_file, dumps(line), locked=True)
        return line

    def answer(self, clone_id: str, question_id: str, choice: str, via: Via = Via.CLI) -> InboxLine:
        folder, _ = self._active_view(clone_id, "answers")
        # The inbox lock makes check-then-append atomic: two answers cannot both pass.
        with files.lock_for(folder.inbox_file):
            progress, _, _ = folder.progress()
            questions = self._questions(folder, progress)
            question = questions.asked.get(question_id)
            if question is None:
                known = ", ".join(questions.asked) or "none"
                raise NotFound(
                    f"clone {folder.id} has no question {question_id!r} (its questions: {known})"
                )
            settled = questions.settled.get(question_id)
            if settled is not None and settled.chosen_by is ChosenBy.WITHDRAWN:
                raise Refused(
                    f"question {question_id} was withdrawn: the engine stopped waiting for it"
                )
            if settled is not None and settled.chosen_by is ChosenBy.TIMEOUT:
                raise Refused(
                    f"question {question_id} has expired: with no answer in time, the clone "
                    f"took the recommended option {settled.choice!r}"
                )
            if settled is not None or question_id in questions.pending:
                raise Refused(f"question {question_id} is already answered")
            chosen = _choose(question, choice)
            line = InboxLine(
                id=_line_id(),
                kind=InboxKind.ANSWER,
                text=chosen,
                question_id=question_id,
                at=self.clock(),
                via=via,
            )
            files.append_line(folder.inbox_file, dumps(line), locked=True)
        return line

    def stop(self, clone_id: str) -> CloneView:
        """Write the stop marker, under the clone's stop lock, which serve holds from its last
        look at the marker until the clone runs: so the view returned is what happens. A
        queued clone is `stopped` (it never starts, and its issue is free at once); one serve
        was launching is `running` (stop waited for the launch), and is stopped as any running
        clone. Only if a launch holds the lock for over `STOP_LOCK_TIMEOUT_S` is the marker
        written without it, the clone `queued` with `stop_requested` and `launching_at` set:
        serve stops it as soon as it runs."""
        folder = self.resolve(clone_id)
        try:
            with folder.stop_lock(timeout=STOP_LOCK_TIMEOUT_S):
                return self._stop(folder)
        except files.LockBusy:
            pass
        view = self._view(folder)
        if not view.state.active:
            raise Refused(f"clone {folder.id} has already ended: {view.state}")
        record = folder.record()
        launching = record is not None and (
            record.launching_at is not None or record.state.launched
        )
        if not launching:
            raise Refused(
                f"clone {folder.id}: its stop lock has been held for over "
                f"{STOP_LOCK_TIMEOUT_S:.0f} s, and not by a launch; try again"
            )
        return self._stop(folder)

    def _stop(self, folder: RunFolder) -> CloneView:
        view = self._view(folder)
        if not view.state.active:
            raise Refused(f"clone {folder.id} has already ended: {view.state}")
        if not view.stop_requested:
            folder.write_stop(StopMarker(at=self.clock()))
        return self._view(folder)

    def resume(self, clone_id: str) -> CloneView:
        """A scheduled clone goes on now, not at its login's reset (the provider may refuse it
        again, and then it waits again)."""
        folder = self.resolve(clone_id)
        view = self._view(folder)
        if view.state is not State.SCHEDULED:
            raise Refused(f"clone {folder.id} is {view.state}, not scheduled: nothing to resume")
        folder.write_resume(ResumeMarker(at=self.clock()))
        return self._view(folder)

    # ------------------------------------------------------------------ retention

    def remove(self, clone_id: str) -> Removed:
        """Remove an ended clone's run folder (its workspace with it); see `retention`."""
        return self._retention().remove(self.resolve(clone_id))

    def prune(self, older_than: timedelta, dry_run: bool = False) -> builtins.list[Removed]:
        """Remove every clone that ended more than `older_than` ago, and finish what an
        earlier removal left; `dry_run`: only say which clones would go."""
        retention = self._retention()
        gone: builtins.list[Removed] = []
        for folder in retention.ended_before(self.index, self.clock() - older_than):
            if dry_run:
                state, ended = retention.removable(folder)
                gone.append(Removed(folder.id, str(state), ended, tree_size(folder.path)))
                continue
            try:
                gone.append(retention.remove(folder))
            except (BadInput, Refused, MalformedFile) as error:
                log.warning("clone %s stays: %s", folder.id, error)
        if not dry_run:
            for hidden in retention.leftovers():
                delete_tree(hidden)
        return gone

    def _retention(self) -> Retention:
        return Retention(self.paths.clones_dir, self.paths.active_dir)

    def follow(
        self,
        clone_id: str,
        lines: int = 20,
        poll_s: float = 1.0,
        on_wait: Callable[[str], None] | None = None,
    ) -> Iterator[ProgressLine]:
        """The last `lines` progress lines, then each new one as it is written, until the clone
        ends. `on_wait` hears what a queued clone waits for, first and whenever that changes."""
        from watchfiles import watch

        folder = self.resolve(clone_id)
        progress, _, offset = folder.progress(files.tail_offset(folder.progress_file))
        yield from (scrubbed_line(line) for line in progress[-lines:]) if lines else []
        told = ""

        def ended() -> bool:
            nonlocal told
            view = self._view(folder)
            if on_wait is not None:
                reason = self.waiting_for(view)
                if reason and reason != told:
                    on_wait(reason)
                told = reason
            return not view.state.active

        if any(p.final for p in progress) or ended():
            return
        for _changes in watch(
            folder.path,
            rust_timeout=int(poll_s * 1000),
            yield_on_timeout=True,
            debounce=50,
            step=20,
        ):
            new, _, offset = folder.progress(offset)
            yield from (scrubbed_line(line) for line in new)
            if any(p.final for p in new) or ended():
                return


def _line_id() -> str:
    return secrets.token_hex(8)


def _choose(question: Question, choice: str) -> str:
    wanted = choice.strip()
    for option in question.options:
        if option == wanted or option.casefold() == wanted.casefold():
            return option
    if wanted.isdigit() and 1 <= int(wanted) <= len(question.options):
        return question.options[int(wanted) - 1]
    if question.free_text and wanted:
        return wanted
    raise BadInput(
        f"choice {choice!r} for question {question.id}: expected one of "
        + ", ".join(repr(o) for o in question.options)
        + (" or an option's number" if question.options else "")
    )


def local_node(paths: Paths | None = None) -> LocalNode:
    """The node of this machine, with the owner's config (the spec's `localNode()`)."""
    config, resolved = load_config(paths)
    return LocalNode(config, resolved)
