"""The built-in notifiers: the desktop, a webhook, and ntfy.

They register through the same hook as any third-party notifier. Each raises on a failed
delivery; serve's dispatcher tries again with backoff and never lets one stop it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import platform
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import attrs
import httpx2

from shadowclone import files
from shadowclone.errors import BadInput, PluginUnavailable
from shadowclone.plugin import hookimpl
from shadowclone.plugin.types import (
    Notification,
    NotifierContext,
    NotifierRegistration,
    NotifyEvent,
)

TIMEOUT_S = 10.0
SIGNATURE_HEADER = "X-Shadowclone-Signature"
EVENT_HEADER = "X-Shadowclone-Event"
KEY_FILE = "webhook.key"
NTFY_ACTIONS = 3
"""ntfy shows at most three action buttons."""
URGENT = frozenset({NotifyEvent.QUESTION, NotifyEvent.PAUSED, NotifyEvent.LAUNCH_FAILED})


def payload(notification: Notification) -> dict[str, Any]:
    """A notification as JSON: what the webhook posts."""
    data = attrs.asdict(notification, recurse=True)
    data["event"] = str(notification.event)
    data["options"] = list(notification.options)
    data["answer_urls"] = dict(notification.answer_urls)
    return data


def _url(options: dict[str, object] | Any, key: str, name: str) -> str:
    value = options.get(key)
    if not isinstance(value, str) or urlsplit(value).scheme not in ("http", "https"):
        raise BadInput(f"notify.{name}.{key}: expected an http(s) URL, got {value!r}")
    parts = urlsplit(value)
    if not parts.hostname or parts.username or parts.password:
        raise BadInput(f"notify.{name}.{key}: expected an http(s) URL with a host and no user")
    return value


def _check(response: httpx2.Response, where: str) -> None:
    if not 200 <= response.status_code < 300:
        raise OSError(f"{where} answered HTTP {response.status_code}")


class DesktopNotifier:
    """notify-send on Linux, osascript on macOS."""

    def __init__(self, context: NotifierContext) -> None:
        self.command = shutil.which("notify-send")
        self.osascript = shutil.which("osascript") if platform.system() == "Darwin" else None
        if self.command is None and self.osascript is None:
            raise PluginUnavailable(
                "the desktop notifier needs notify-send (Debian: apt install libnotify-bin) "
                "or macOS's osascript"
            )

    def notify(self, notification: Notification) -> None:
        body = notification.text
        if self.command is not None:
            urgency = "critical" if notification.event in URGENT else "normal"
            argv = [self.command, "--app-name=shadowclone", f"--urgency={urgency}"]
            argv += ["--", notification.title, body]
        else:
            assert self.osascript is not None
            # AppleScript strings take \" and \\ as JSON writes them, not \u escapes.
            script = (
                f"display notification {json.dumps(body, ensure_ascii=False)} with title "
                f"{json.dumps(notification.title, ensure_ascii=False)}"
            )
            argv = [self.osascript, "-e", script]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise OSError(f"{Path(argv[0]).name} failed: {done.stderr.strip()[:200]}")


class WebhookNotifier:
    """A JSON POST per notification, signed with HMAC-SHA256 of the body: the header
    `X-Shadowclone-Signature: sha256=HEX`, with the key kept in the notifier's folder."""

    def __init__(self, context: NotifierContext) -> None:
        self.url = _url(context.options, "url", "webhook")
        self.key = _key(context.folder / KEY_FILE)
        self.client = httpx2.Client(timeout=TIMEOUT_S)  # kept alive between notifications

    def notify(self, notification: Notification) -> None:
        body = json.dumps(payload(notification), sort_keys=True).encode()
        signature = hmac.new(self.key, body, hashlib.sha256).hexdigest()
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: f"sha256={signature}",
            EVENT_HEADER: str(notification.event),
        }
        response = self.client.post(self.url, content=body, headers=headers)
        _check(response, "the webhook")


def _key(path: Path) -> bytes:
    """The webhook's signing key: made once (0600), then read."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        text = secrets.token_hex(32)
        files.write_atomic(path, text.encode(), mode=0o600)
    return text.encode()


class NtfyNotifier:
    """ntfy (ntfy.sh or a server of one's own): a message per notification on the topic the
    URL names; a question's options become action buttons that POST its answer links."""

    def __init__(self, context: NotifierContext) -> None:
        url = _url(context.options, "url", "ntfy")
        parts = urlsplit(url)
        prefix, _, topic = parts.path.rstrip("/").rpartition("/")
        if not topic:
            raise BadInput(
                f"notify.ntfy.url: expected a topic's URL (https://ntfy.sh/TOPIC), got {url!r}"
            )
        self.server = urlunsplit((parts.scheme, parts.netloc, prefix + "/", "", ""))
        self.client = httpx2.Client(timeout=TIMEOUT_S)
        self.topic = topic

    def notify(self, notification: Notification) -> None:
        message: dict[str, Any] = {
            "topic": self.topic,
            "title": notification.title,
            "message": notification.text,
            "tags": [str(notification.event)],
            "priority": 4 if notification.event in URGENT else 3,
        }
        if notification.url:
            message["click"] = notification.url
        actions = [
            {"action": "http", "label": option, "url": url, "method": "POST", "clear": True}
            for option, url in notification.answer_urls.items()
        ]
        if actions:
            message["actions"] = actions[:NTFY_ACTIONS]
        response = self.client.post(self.server, json=message)
        _check(response, "ntfy")


@hookimpl
def shadowclone_notifiers() -> Iterator[NotifierRegistration]:
    yield NotifierRegistration(
        name="desktop",
        summary="A desktop notification (notify-send on Linux, osascript on macOS)",
        factory=DesktopNotifier,
    )
    yield NotifierRegistration(
        name="webhook",
        summary="A JSON POST to [notify.webhook] url, signed with HMAC-SHA256",
        factory=WebhookNotifier,
    )
    yield NotifierRegistration(
        name="ntfy",
        summary="A message on the ntfy topic [notify.ntfy] url; questions get answer buttons",
        factory=NtfyNotifier,
    )
