"""Telling the owner: which record changes are worth a notification, and delivering them.

serve hands each change of a record to `notable`; what it returns goes to the `Dispatcher`,
which delivers it to every configured notifier, each on a thread of its own with a queue of
its own, trying again with backoff when one fails. A notifier that fails (or hangs in its
own timeout) never holds serve or the other notifiers up.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping, Sequence

import attrs

from shadowclone.config import Config, Paths
from shadowclone.dashboard.keys import answer_urls as answer_urls_for
from shadowclone.dashboard.keys import load_token
from shadowclone.errors import ShadowcloneError
from shadowclone.node.schemas import Record, Request, State
from shadowclone.plugin.manager import Registry
from shadowclone.plugin.types import Notification, Notifier, NotifierContext, NotifyEvent
from shadowclone.redact import redact_tokens

log = logging.getLogger(__name__)

BACKOFF_S = (2.0, 10.0, 60.0, 300.0)
"""The waits before each new try of a failed delivery; then it is given up (and logged)."""
TEXT_LIMIT = 1000

ENDED = {
    State.DONE: NotifyEvent.DONE,
    State.FAILED: NotifyEvent.FAILED,
    State.STOPPED: NotifyEvent.STOPPED,
}


def notable(old: Record, new: Record) -> NotifyEvent | None:
    """The event a change of a clone's record is, if it is one the owner is told of."""
    if new.state in ENDED:
        return ENDED[new.state] if old.state.active else None
    if new.question is not None and (old.question is None or old.question.id != new.question.id):
        return NotifyEvent.PAUSED if new.question.cap else NotifyEvent.QUESTION
    if new.state is State.SCHEDULED and old.state is not State.SCHEDULED:
        return NotifyEvent.SCHEDULED
    return None


@attrs.frozen
class Links:
    """Where the dashboard is, for the links a notification carries."""

    base: str
    token: str


def notification(
    event: NotifyEvent, request: Request, record: Record, links: Links | None
) -> Notification:
    """The notification of `event` for a clone, every text of it redacted."""
    target = request.target.key
    question = record.question if event in (NotifyEvent.QUESTION, NotifyEvent.PAUSED) else None
    title, text = _words(event, target, record)
    answer_urls: dict[str, str] = {}
    if question is not None and links is not None:
        answer_urls = answer_urls_for(links.base, links.token, record.id, question)
    return Notification(
        event=event,
        clone_id=record.id,
        target=target,
        title=redact_tokens(title)[:200],
        text=redact_tokens(text)[:TEXT_LIMIT],
        question_id=question.id if question else None,
        options=tuple(redact_tokens(o) for o in question.options) if question else (),
        recommended=redact_tokens(question.recommended) if question else "",
        pr_url=record.pr_url,
        url=f"{links.base}/clones/{record.id}" if links is not None else None,
        answer_urls=answer_urls,
    )


def _words(event: NotifyEvent, target: str, record: Record) -> tuple[str, str]:
    answer = f"shadowclone answer {record.id}"
    if event in (NotifyEvent.QUESTION, NotifyEvent.PAUSED) and record.question is not None:
        q = record.question
        minutes = round(q.timeout_s / 60)
        heading = "paused at a cap" if event is NotifyEvent.PAUSED else "asks"
        return (
            f"{target} {heading}",
            f"{q.text}\nOptions: {', '.join(q.options)}. With no answer in {minutes} min it "
            f"takes {q.recommended!r}. Answer: {answer} {q.id} OPTION",
        )
    if event is NotifyEvent.SCHEDULED:
        until = record.scheduled_until
        when = f" until {until.astimezone():%H:%M}" if until else ""
        return (f"{target} waits", f"Clone {record.id} waits for its login's usage limit{when}.")
    if event is NotifyEvent.DONE:
        where = f" {record.pr_url}" if record.pr_url else ""
        return (f"{target} done", f"Clone {record.id} is done.{where}")
    if event is NotifyEvent.STOPPED:
        return (f"{target} stopped", f"Clone {record.id} stopped. {record.reason}".strip())
    if event is NotifyEvent.LAUNCH_FAILED:
        return (f"{target}: serve could not launch it", f"Clone {record.id}: {record.reason}")
    why = record.reason or (record.report or "").split("\n", 1)[0]
    return (f"{target} failed", f"Clone {record.id} failed: {why}".strip())


class Dispatcher:
    """Delivers notifications to named notifiers, each on a thread of its own."""

    def __init__(
        self,
        notifiers: Mapping[str, Notifier],
        events: Sequence[str],
        backoff_s: Sequence[float] = BACKOFF_S,
    ) -> None:
        self.events = frozenset(NotifyEvent(e) for e in events)
        self.backoff_s = tuple(backoff_s)
        self._stop = threading.Event()
        self._queues: dict[str, queue.SimpleQueue[Notification]] = {}
        self._threads: list[threading.Thread] = []
        for name, notifier in notifiers.items():
            waiting: queue.SimpleQueue[Notification] = queue.SimpleQueue()
            self._queues[name] = waiting
            thread = threading.Thread(
                target=self._deliver,
                args=(name, notifier, waiting),
                name=f"notifier {name}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)

    def put(self, item: Notification) -> None:
        if item.event not in self.events:
            return
        for waiting in self._queues.values():
            waiting.put(item)

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop: what is being delivered gets `timeout_s` to finish; the rest is dropped."""
        self._stop.set()
        for waiting in self._queues.values():
            waiting.put(_CLOSE)
        for thread in self._threads:
            thread.join(timeout_s)

    def _deliver(
        self, name: str, notifier: Notifier, waiting: queue.SimpleQueue[Notification]
    ) -> None:
        while not self._stop.is_set():
            item = waiting.get()
            if item is _CLOSE:
                return
            for attempt, delay in enumerate((*self.backoff_s, None), start=1):
                try:
                    notifier.notify(item)
                    log.info("told %s of %s of clone %s", name, item.event, item.clone_id)
                    break
                except Exception as error:  # noqa: BLE001 - a notifier's failure is logged, never raised
                    if delay is None:
                        log.error(
                            "notifier %s gave up on %s of clone %s after %d tries: %s",
                            name,
                            item.event,
                            item.clone_id,
                            attempt,
                            error,
                        )
                        break
                    log.warning("notifier %s failed (%s); trying again in %g s", name, error, delay)
                    if self._stop.wait(delay):
                        return


_CLOSE = Notification(NotifyEvent.DONE, "", "", "", "")
"""Wakes a delivery thread to end."""


def make_dispatcher(
    config: Config, paths: Paths, registry: Registry, backoff_s: Sequence[float] = BACKOFF_S
) -> Dispatcher | None:
    """The configured notifiers, each built from its `[notify.NAME]` table; one that cannot be
    built is logged and left out (serve runs without it)."""
    notifiers: dict[str, Notifier] = {}
    for name in dict.fromkeys(config.notify.use):
        folder = paths.config_file.parent / "notify" / name
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            registration = registry.notifier(name)
            context = NotifierContext(options=config.notify.options.get(name, {}), folder=folder)
            notifiers[name] = registration.factory(context)
        except Exception as error:  # noqa: BLE001 - a plugin's factory may raise anything
            log.error("notifier %s is left out: %s", name, error)
    if not notifiers:
        return None
    return Dispatcher(notifiers, config.notify.events, backoff_s)


def links_for(config: Config, paths: Paths) -> Links | None:
    """The dashboard's address and token, when the dashboard has one to link to."""
    if not (config.dashboard.serve or config.dashboard.url):
        return None
    try:
        token, _ = load_token(paths)
    except (ShadowcloneError, OSError) as error:
        log.error("notifications carry no answer links: %s", error)
        return None
    return Links(config.dashboard.address(), token)
