"""The notifier contract: tests every notifier passes.

A notifier's tests subclass `NotifierContract` and say how to get its registration and where
it can deliver in a test:

    class TestMyNotifier(NotifierContract):
        def make_registration(self): ...
        def destination(self, folder, *, working): ...

`destination` is a context manager giving the `[notify.NAME]` options that point at a place
the test owns (a loopback HTTP server, a stand-in program on PATH) and a way to read back
what reached it.
"""

from __future__ import annotations

import abc
import string
import tempfile
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TypeVar

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shadowclone.errors import BadInput, PluginUnavailable
from shadowclone.plugin import Notification, Notifier, NotifierContext, NotifierRegistration
from shadowclone.plugin.types import NAME_PATTERN, NotifyEvent
from shadowclone.redact import redact_tokens

T = TypeVar("T")

SHARED = [HealthCheck.differing_executors]
"""One suite runs for many plugins, each subclass an executor of its own."""

WAIT_S = 30.0
"""Bound on one build or delivery, so that a notifier that hangs fails instead."""

SAFE_TEXT = st.text(
    st.sampled_from(string.ascii_letters + string.digits + " .,!?()#'\"\n"), max_size=200
)
"""Text with no secret-shaped token in it, whatever hypothesis draws."""

OPTION_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=30),
    st.sampled_from(["http://", "https://", "ftp://example.invalid/x", "http://u:p@h/t", "//x"]),
    st.lists(st.text(max_size=5), max_size=2),
)


@attrs.frozen
class Destination:
    """Where a notifier under test delivers."""

    options: Mapping[str, object]
    """The `[notify.NAME]` table that points the notifier here."""
    received: Callable[[], list[str]]
    """Everything delivered so far, one text per delivery (a body, a program's arguments)."""


def notification(
    event: NotifyEvent, title: str = "acme/app#7 done", text: str = ""
) -> Notification:
    return Notification(
        event=event,
        clone_id="260101-120000-abcd",
        target="acme/app#7",
        title=title,
        text=text or f"The clone says {event}.",
        pr_url="https://github.com/acme/app/pull/7",
        url="http://127.0.0.1:8400/clones/260101-120000-abcd",
    )


def in_thread(work: Callable[[], T], what: str) -> T:
    """`work()` on a thread of its own, as serve's dispatcher runs it, within WAIT_S."""
    found: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            found.append(work())
        except BaseException as error:  # noqa: BLE001 - raised again below
            failed.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(WAIT_S)
    assert not thread.is_alive(), f"{what} took longer than {WAIT_S:.0f} s"
    if failed:
        raise failed[0]
    return found[0]


def _check_refusal(error: Exception) -> None:
    assert isinstance(error, (PluginUnavailable, BadInput)), (
        f"a factory that cannot work raises PluginUnavailable or BadInput, not {error!r}"
    )
    message = str(error)
    assert message.strip() and "\n" not in message and "Traceback" not in message, (
        f"its message is one line: {message!r}"
    )


class NotifierContract(abc.ABC):
    """What serve's dispatcher relies on from any notifier."""

    # ------------------------------------------------------------------ what a plugin provides

    @abc.abstractmethod
    def make_registration(self) -> NotifierRegistration:
        """The notifier's registration, as its plugin's hook yields it."""

    @abc.abstractmethod
    def destination(self, folder: Path, *, working: bool) -> AbstractContextManager[Destination]:
        """A place to deliver to, kept in `folder` or served from this machine while the
        context lasts; with `working=False` one that refuses every delivery (an HTTP error, a
        program that fails)."""

    # ------------------------------------------------------------------ helpers

    def build(self, folder: Path, options: Mapping[str, object]) -> Notifier:
        own = folder / "notifier"
        own.mkdir(mode=0o700, exist_ok=True)
        factory = self.make_registration().factory
        return in_thread(lambda: factory(NotifierContext(options, own)), "the factory")

    def deliver(self, notifier: Notifier, sent: Notification) -> None:
        in_thread(lambda: notifier.notify(sent), "a delivery")

    # ------------------------------------------------------------------ the contract

    def test_the_registration_is_valid(self) -> None:
        registration = self.make_registration()
        assert isinstance(registration, NotifierRegistration)
        assert NAME_PATTERN.match(registration.name)
        assert registration.summary.strip() and "\n" not in registration.summary
        assert callable(registration.factory)

    def test_with_no_settings_it_builds_or_says_why_in_one_line(self, tmp_path: Path) -> None:
        try:
            self.build(tmp_path, {})
        except Exception as error:  # noqa: BLE001 - the kind is the test
            _check_refusal(error)

    @settings(
        max_examples=30,
        deadline=None,
        suppress_health_check=[*SHARED, HealthCheck.function_scoped_fixture],
    )
    @given(
        options=st.dictionaries(
            st.sampled_from(["url", "topic", "token", "priority", "command", "x"]), OPTION_VALUES
        )
    )
    def test_settings_it_cannot_use_are_refused_in_one_line(
        self, tmp_path: Path, options: dict[str, object]
    ) -> None:
        try:
            self.build(tmp_path, options)
        except Exception as error:  # noqa: BLE001 - the kind is the test
            _check_refusal(error)

    def test_every_event_is_delivered_with_its_title(self, tmp_path: Path) -> None:
        with self.destination(tmp_path, working=True) as destination:
            notifier = self.build(tmp_path, destination.options)
            for number, event in enumerate(NotifyEvent, start=1):
                title = f"acme/app#{number} {event} title"
                self.deliver(notifier, notification(event, title))
                received = destination.received()
                assert len(received) == number, f"{event}: delivered {len(received)} times"
                assert title in received[-1], f"{event}: the title is not in {received[-1]!r}"

    def test_a_destination_that_refuses_makes_notify_raise(self, tmp_path: Path) -> None:
        """serve tries again only when notify raises: a lost notification must not pass."""
        with self.destination(tmp_path, working=False) as destination:
            notifier = self.build(tmp_path, destination.options)
            with pytest.raises(Exception):  # noqa: B017 - any error: serve tries again
                self.deliver(notifier, notification(NotifyEvent.QUESTION))

    @settings(max_examples=15, deadline=None, suppress_health_check=SHARED)
    @given(title=SAFE_TEXT.filter(lambda t: t.strip() != ""), text=SAFE_TEXT)
    def test_it_delivers_no_secret_shaped_token_the_notification_lacks(
        self, title: str, text: str
    ) -> None:
        with (
            tempfile.TemporaryDirectory() as folder,
            self.destination(Path(folder), working=True) as destination,
        ):
            notifier = self.build(Path(folder), destination.options)
            self.deliver(notifier, notification(NotifyEvent.DONE, title, text))
            for delivered in destination.received():
                assert redact_tokens(delivered) == delivered, (
                    f"a secret-shaped token reached the destination: {delivered!r}"
                )

    def test_what_it_keeps_in_its_folder_is_private(self, tmp_path: Path) -> None:
        with self.destination(tmp_path, working=True) as destination:
            notifier = self.build(tmp_path, destination.options)
            self.deliver(notifier, notification(NotifyEvent.DONE))
            self.build(tmp_path, destination.options)  # again, as serve after a restart
        for path in (tmp_path / "notifier").rglob("*"):
            mode = path.lstat().st_mode & 0o077
            assert mode == 0, f"{path} is open to others (mode {path.lstat().st_mode:o})"
