"""The engine's access to the model: the clone's caps, the login's usage limits and the model
proxy that holds the login.

Apart from the run program's phases (run/program.py) because all three act on the same model
requests, at the proxy, whichever phase (the working session, a review's consultation) sends
them; the phases ask these objects, and pass in what they need.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path

from shadowclone.errors import ShadowcloneError
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ChosenBy, Request, Step, now
from shadowclone.plugin.manager import Registry
from shadowclone.plugin.types import (
    EngineRegistration,
    EngineSession,
    SecretProviderRegistration,
)
from shadowclone.proxy import (
    PLACEHOLDERS,
    PROXIED_LOGINS,
    ModelProxy,
    credential_for_login,
    engine_files,
)
from shadowclone.proxy.chatgpt import STATE_FILE as LOGIN_STATE_FILE
from shadowclone.proxy.secrets import Secrets
from shadowclone.run.ask.http import AskService
from shadowclone.run.carry import KeptSession
from shadowclone.run.credentials import CredentialWatch
from shadowclone.run.drive.caps import CapGate, CapWatch, Reached
from shadowclone.run.identity import EngineIdentity
from shadowclone.run.inbox import FileWatch
from shadowclone.run.progress import ProgressWriter

OVERLOAD_NOTE_S = 10.0
"""The least time between two progress lines about an overloaded provider."""

PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")


def outbound_proxy(upstream: str) -> str | None:
    """The proxy this process must use to reach `upstream`, from the usual variables (a
    network-off clone's way out)."""
    host = urllib.parse.urlsplit(upstream).hostname or ""
    if urllib.request.proxy_bypass(host):
        return None
    proxies = urllib.request.getproxies_environment()
    return proxies.get(urllib.parse.urlsplit(upstream).scheme) or proxies.get("all")


class Caps:
    """What the engine has used of the clone's caps, and the gate that holds its model
    requests at a reached cap until the owner raises it or the clone finishes."""

    def __init__(self, request: Request, progress: ProgressWriter, ask_service: AskService) -> None:
        self.request = request
        self.progress = progress
        self.ask_service = ask_service
        self.watch = CapWatch(request.caps)
        """Counted from the working session's start (`begin`)."""
        self.gate = CapGate(self.watch, self.on_cap)

    def begin(self, kept: KeptSession | None = None) -> None:
        """Count afresh for a new working session, or on from the `kept` one's use."""
        if kept is None:
            self.watch = CapWatch(self.request.caps)
        else:
            self.watch = CapWatch(
                self.request.caps,
                cost_usd=kept.cost_usd,
                turns=kept.turns,
                earlier_minutes=kept.minutes,
            )

    def arm(self) -> None:
        """The gate for the session about to launch, on the current count."""
        self.gate = CapGate(self.watch, self.on_cap)

    async def admit(self) -> None:
        """Before each model request leaves the proxy: none goes past a cap (`CapGate`)."""
        await self.gate.admit()

    async def on_cap(self, reached: Reached) -> bool:
        """A cap is reached (the engine's model requests held at the proxy): ask the owner
        whether to raise the cap (and go on, in the same session) or finish; True goes on."""
        self.progress.note(Step.ENGINE, f"paused: the clone reached {reached.describe()}")
        raise_it, finish = f"raise the cap by {reached.step()}", "finish now"
        question = (
            f"The clone reached {reached.describe()}. Raise the cap by {reached.step()} and go "
            "on, or finish now (the work so far is saved as a draft pull request)?"
        )
        _, choice, by = await self.ask_service.tool.choose(
            question, [raise_it, finish], finish, cap=True
        )
        if choice != raise_it or by is not ChosenBy.OWNER:
            return False
        caps = self.watch.raise_cap(reached.kind)
        self.progress.note(Step.ENGINE, f"the owner raised the cap; caps now {caps.describe()}")
        return True


class UsageLimits:
    """The login's usage limit and the provider's overloads, as the proxy hears of them: the
    working session is ended for a limit (and resumed at its reset), a consultation's request
    held until then."""

    def __init__(
        self,
        folder: RunFolder,
        request: Request,
        progress: ProgressWriter,
        stop: asyncio.Event,
        caps: Caps,
    ) -> None:
        self.folder = folder
        self.request = request
        self.progress = progress
        self.stop = stop
        self.caps = caps
        self.held = 0
        """Model requests waiting at the proxy for the login's usage limit to reset (those of
        a review's consultation; the working session is ended instead)."""
        self._overload_said = -float("inf")
        self.working: EngineSession | None = None
        """The engine's working session, while it is supervised."""
        self.consulting = 0
        """Review consultations under way: a model request may be theirs."""
        self.resume_at: datetime | None = None
        """Set when a usage limit ended the working session: when to resume it."""
        self.scheduled_at = now()
        """When the working session was last scheduled: a resume marker counts from then."""
        self._ending: asyncio.Task[None] | None = None
        """The working session's stop for the usage limit."""

    def holding(self) -> bool:
        """Whether the working session is held at the proxy or being ended for the usage
        limit: no stall then."""
        return self.held > 0 or self.resume_at is not None

    async def take_reset(self) -> datetime | None:
        """When to resume the working session a usage limit ended (None: none did), once its
        stop is done; the limit is forgotten."""
        reset, self.resume_at = self.resume_at, None
        ending, self._ending = self._ending, None
        if ending is not None:
            await asyncio.gather(ending, return_exceptions=True)
        return reset

    def waits_long(self, reset: datetime) -> bool:
        """Whether the wait for `reset` is long enough to end the clone's process meanwhile
        (`Request.long_wait_s`)."""
        return (reset - now()).total_seconds() > self.request.long_wait_s

    def on_overload(self, status: int) -> None:
        """Say so, at most once every `OVERLOAD_NOTE_S`: serve starts fewer clones on the login
        while it hears of overloads."""
        moment = time.monotonic()
        if moment - self._overload_said < OVERLOAD_NOTE_S:
            return
        self._overload_said = moment
        said = f"answered {status}" if status else "could not be reached"
        self.progress.overloaded(f"the model provider {said}: the request is sent again soon")

    async def resume_or_stop(self, since: datetime) -> None:
        """Return once the clone is stopped or the owner says resume (`shadowclone resume`)
        after `since`."""
        names = {self.folder.resume_file.name}
        async with FileWatch(self.folder.path, names) as watch:
            while not self.stop.is_set():
                marker = self.folder.resume_marker()
                if marker is not None and marker.at >= since:
                    self.progress.note(Step.ENGINE, "the owner resumed the clone")
                    return
                stop = asyncio.ensure_future(self.stop.wait())
                change = asyncio.ensure_future(watch.wait())
                try:
                    await asyncio.wait({stop, change}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for task in (stop, change):
                        task.cancel()
                    await asyncio.gather(stop, change, return_exceptions=True)

    async def on_usage_limit(self, reset: datetime) -> bool:
        """The login's plan is used up until `reset`. The working session is ended before the
        engine sees the refusal (the working phase resumes it at the reset; False: the request
        is not sent again); a review's consultation waits at the proxy instead, and its request
        is sent again then (True)."""
        session = self.working
        if self.resume_at is not None:
            return False  # another request of the session being ended
        if session is not None and not self.consulting:
            self.resume_at, self.scheduled_at = reset, now()
            what = "the engine ends now and resumes its session at {at}"
            if self.waits_long(reset):
                what = (
                    "the engine ends now, and the clone's process with it; the clone is "
                    "launched again and resumes the engine's session at {at}"
                )
            self._scheduled(reset, what)
            # A task of its own: the engine hanging up cancels this request's handling, and
            # must not cancel the stop with it.
            self._ending = asyncio.create_task(session.stop(), name="end for the usage limit")
            await asyncio.shield(self._ending)
            return False
        return await self._hold_request(reset)

    def _scheduled(self, reset: datetime, what: str) -> None:
        """Say the clone is scheduled until `reset` (`what` names the time as {at}), and hold
        the caps' clock meanwhile."""
        wait = max(0.0, (reset - now()).total_seconds())
        at = f"{reset.astimezone():%H:%M:%S} (in {wait:.0f} s)"
        self.progress.scheduled(
            f"the {self.request.login} login's usage limit is reached: {what.format(at=at)}",
            reset,
        )
        self.caps.watch.pause()

    async def until_reset(self, reset: datetime, since: datetime) -> None:
        """Return at `reset`, or earlier when the owner stops the clone or resumes it after
        `since` (when the owner was told it is scheduled)."""
        left = max(0.0, (reset - now()).total_seconds())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.resume_or_stop(since), left)

    async def _hold_request(self, reset: datetime) -> bool:
        """Hold a model request at the proxy until `reset` (or the owner's resume); a stop
        ends the wait. True: send it again."""
        since = now()
        if not self.held:
            self._scheduled(reset, "the engine waits until {at} and then goes on")
        self.held += 1
        try:
            await self.until_reset(reset, since)
        finally:
            self.held -= 1
            if not self.held:
                self.caps.watch.resume()
                if not self.stop.is_set():
                    self.progress.scheduled("the usage limit has reset: the engine goes on", None)
        return not self.stop.is_set()


class ModelAccess:
    """The engine's login: the model proxy where it serves the login (started beside the first
    steps), so that the engine never holds the credential; else the login's values."""

    def __init__(
        self,
        request: Request,
        secrets: Secrets,
        identity: EngineIdentity,
        progress: ProgressWriter,
        limits: UsageLimits,
        *,
        egress_proxy: str | None,
        login_state: Path | None,
        credentials: CredentialWatch,
    ) -> None:
        self.request = request
        self.secrets = secrets
        self.identity = identity
        self.progress = progress
        self.limits = limits
        self.egress_proxy = egress_proxy
        """How a network-off clone reaches the model's host; only the run program holds it."""
        self.login_state = login_state
        self.credentials = credentials
        """What the redactor learns from: the login's state (the proxy's rotated tokens) and
        the login files of each engine's state folder."""
        if login_state is not None:
            credentials.own(login_state / LOGIN_STATE_FILE)
        self.proxy: ModelProxy | None = None
        self._ready: asyncio.Task[ModelProxy] | None = None
        self._noted = False

    def start_early(self, registry: Registry) -> None:
        """Start the model proxy beside the first steps, where the login is one it serves."""
        try:
            engine = registry.engine(self.request.engine)
            login = registry.secret_provider(self.request.login)
        except ShadowcloneError:
            return  # said when the engine starts
        upstream = self.request.base_url or engine.default_base_url
        if login.name in PROXIED_LOGINS and engine.base_url_env and upstream:
            self._ready = asyncio.create_task(self._start(login, upstream))

    async def login_env(
        self, engine: EngineRegistration, login: SecretProviderRegistration, state_dir: Path
    ) -> dict[str, str]:
        """The engine's login: placeholders and the model proxy's address where the proxy
        serves the login, so that the engine never holds the credential; else the values."""
        given = tuple(secret.file for secret in login.secrets if secret.file)
        self.credentials.engines(state_dir, (*engine.credential_files, *given))
        upstream = self.request.base_url or engine.default_base_url
        if login.name not in PROXIED_LOGINS or not engine.base_url_env or not upstream:
            env = self.secrets.engine_env(login, state_dir)
            if self.request.base_url and engine.base_url_env:
                env[engine.base_url_env] = self.request.base_url
            if self.egress_proxy:  # no proxy between: the engine goes out the clone's way
                env.update({name: self.egress_proxy for name in PROXY_VARIABLES})
            return env
        if self.proxy is None:
            if self._ready is None:
                self._ready = asyncio.create_task(self._start(login, upstream))
            self.proxy = await self._ready
        env = {secret.env: PLACEHOLDERS[secret.key] for secret in login.secrets if secret.env}
        for name, text in engine_files(self.proxy.credential).items():
            (state_dir / name).write_text(text, encoding="utf-8")
        self.identity.share(state_dir)
        env[engine.base_url_env] = self.proxy.engine_base_url
        return env

    async def _start(self, login: SecretProviderRegistration, upstream: str) -> ModelProxy:
        outbound = self.egress_proxy or outbound_proxy(upstream)
        credential = credential_for_login(
            login.name,
            self.secrets.values,
            state_dir=self.login_state,
            token_url=self.request.token_url,
            outbound_proxy=outbound,
        )
        proxy = ModelProxy(upstream, credential, outbound_proxy=outbound)
        proxy.on_usage_limit = self.limits.on_usage_limit
        proxy.on_overload = self.limits.on_overload
        proxy.gate = self.limits.caps.admit
        await proxy.start_tcp()
        return proxy

    def prepare_upstream(self) -> None:
        """The model proxy's client to the provider, needed from the engine's first request on
        (made in a thread; not before the engine starts: the first steps need the CPU)."""
        if self.proxy is not None:
            self.proxy.prepare_client()

    def note(self) -> None:
        """Say once, as the first session starts, that the engine goes through the proxy."""
        if self.proxy is not None and not self._noted:
            self._noted = True
            self.progress.note(
                Step.ENGINE,
                f"the engine reaches {self.proxy.upstream_base} through the model proxy, "
                "which holds the login",
            )

    def login_problem(self) -> str:
        """What is wrong with the login, as the proxy found it ("" if nothing, or no proxy)."""
        return (self.proxy.credential.problem or "") if self.proxy is not None else ""

    async def close(self) -> None:
        """Close the proxy, one still starting too."""
        if self.proxy is None and self._ready is not None:
            self._ready.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                self.proxy = await self._ready
        if self.proxy is not None:
            await self.proxy.close()
