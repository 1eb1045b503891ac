"""The files of a run folder and of a setup: frozen attrs classes with a schema version.

One cattrs converter turns them to and from JSON. Reading never crashes on a bad file: it
raises `MalformedFile`, naming the file, which callers report and skip.
"""

from __future__ import annotations

import enum
import json
import math
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.errors import BaseValidationError

from shadowclone.config.schema import LONG_WAIT_S
from shadowclone.errors import MalformedFile
from shadowclone.files import MAX_DOCUMENT_BYTES, read_bounded, relative_parts, write_atomic
from shadowclone.node.lifecycle import NO_LIFECYCLE, Lifecycle
from shadowclone.node.target import Target

SCHEMA_VERSION = 1
MAX_DEPTH = 32
"""No file of ours nests deeper; a reader refuses deeper JSON before it is structured."""


class Outcome(enum.StrEnum):
    """How a clone ended; the final progress line carries it."""

    DONE = "done"
    FAILED = "failed"
    STOPPED = "stopped"
    STALLED = "stalled"


class NetworkMode(enum.StrEnum):
    """What a clone may reach."""

    OPEN = "open"
    MODEL_ONLY = "model-only"
    """Only the model provider's API: reviews of code the owner did not write."""


def _finite(_instance: object, attribute: attrs.Attribute[float], value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{attribute.name}: expected a finite number of at least 0, got {value}")


def now() -> datetime:
    return datetime.now(UTC)


class State(enum.StrEnum):
    QUEUED = "queued"
    PREPARING = "preparing"
    """Admitted: its launcher makes ready what the launch needs (the repository's environment
    image, built when it is missing); progress lines say how far."""
    RUNNING = "running"
    WAITING = "waiting"
    """Running, with a question open for the owner."""
    SCHEDULED = "scheduled"
    """Its engine waiting for its login's usage limit to reset (`scheduled_until`): in its
    launcher for a short wait; for a long one nothing of it runs until serve launches it again
    at the reset (`Resume.SESSION`)."""
    DONE = "done"
    FAILED = "failed"
    STOPPED = "stopped"

    @property
    def active(self) -> bool:
        return self in (
            State.QUEUED,
            State.PREPARING,
            State.RUNNING,
            State.WAITING,
            State.SCHEDULED,
        )

    @property
    def launched(self) -> bool:
        """Launched, whatever it waits for (a clone scheduled for a long wait has nothing
        running until it is launched again)."""
        return self in (State.RUNNING, State.WAITING, State.SCHEDULED)

    @property
    def admitted(self) -> bool:
        """Holding one of serve's slots: launched, or being prepared for its launch."""
        return self is State.PREPARING or self.launched


class Step(enum.StrEnum):
    """The steps of a clone, in order: serve's preparation, then the run program's."""

    PREPARE = "prepare"
    TARGET = "target"
    WORKSPACE = "workspace"
    HOOKS = "hooks"
    ENGINE = "engine"
    REVIEW = "review"
    SAVE = "save"
    FINISH = "finish"


INBOX_CLOSED = "the clone takes no more messages: it is saving its work"
"""The note (step `save`) the run program writes, under the inbox lock, once every message it
accepted has reached the engine (or can no longer): `send` refuses from then on."""


class ProgressKind(enum.StrEnum):
    NOTE = "note"
    """A step began or did something worth telling."""
    TEXT = "text"
    """The model's own words."""
    TOOL = "tool"
    USAGE = "usage"
    QUESTION = "question"
    ANSWER = "answer"
    """A question was settled, by the owner or by the timeout."""
    MESSAGE = "message"
    """An owner's message reached the engine."""
    REVIEW = "review"
    ERROR = "error"
    FINAL = "final"
    SCHEDULED = "scheduled"
    """The login's usage limit is reached: the engine waits until `until`; a line of this kind
    with no `until` says the wait is over."""
    OVERLOADED = "overloaded"
    """The provider answered "overloaded" (or could not be reached): the request is sent again
    after a wait, and serve starts fewer clones on the login for a while."""


class ChosenBy(enum.StrEnum):
    OWNER = "owner"
    TIMEOUT = "timeout"
    WITHDRAWN = "withdrawn"
    """Nobody chose: the engine stopped waiting (an interrupted turn), so no answer is wanted."""


class Via(enum.StrEnum):
    """How the owner's answer or message came: the record says who answered, and how."""

    CLI = "cli"
    MCP = "mcp"
    DASHBOARD = "dashboard"
    NOTIFICATION = "notification"


@attrs.frozen
class Question:
    id: str
    text: str
    options: tuple[str, ...]
    recommended: str
    free_text: bool = False
    """True if the owner may answer with words of their own, not only an option."""
    timeout_s: float = attrs.field(default=30 * 60.0, validator=_finite)
    cap: bool = False
    """Asked because the clone reached a cap: raise it and go on, or finish."""


@attrs.frozen
class Answer:
    question_id: str
    choice: str
    chosen_by: ChosenBy = ChosenBy.OWNER
    via: Via | None = None
    """How the owner answered (None: the timeout, or nobody)."""


@attrs.frozen
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = attrs.field(default=None, validator=_finite)


@attrs.frozen
class ProgressLine:
    """One line of a clone's log, appended by the run program inside the clone."""

    step: Step
    kind: ProgressKind
    text: str = ""
    at: datetime = attrs.field(factory=now)
    question: Question | None = None
    answer: Answer | None = None
    usage: Usage | None = None
    outcome: Outcome | None = None
    pr_url: str | None = None
    report: str | None = None
    until: datetime | None = None
    v: int = SCHEMA_VERSION

    @property
    def final(self) -> bool:
        return self.kind is ProgressKind.FINAL

    @property
    def words(self) -> str:
        """The line as the owner reads it (in `get`, `follow` and the dashboard)."""
        if self.kind is ProgressKind.QUESTION and self.question is not None:
            q = self.question
            return f"question {q.id}: {q.text} options: " + ", ".join(
                f"{o} (recommended)" if o == q.recommended else o for o in q.options
            )
        if self.kind is ProgressKind.ANSWER and self.answer is not None:
            answer = self.answer
            by = f"{answer.chosen_by} via {answer.via}" if answer.via else f"{answer.chosen_by}"
            return f"answer to {answer.question_id}: {answer.choice} (by {by})"
        if self.final:
            return f"finished: {self.outcome}" + (f"  {self.pr_url}" if self.pr_url else "")
        return self.text


class RunMode(enum.StrEnum):
    CLONE = "clone"
    """Work on the target: the whole run program."""
    CHECK = "check"
    """`setup`'s check clone: read the secrets and ask GitHub about the repository, nothing
    more."""


@attrs.frozen
class Caps:
    """Where a clone pauses to ask the owner whether to go on (None: no such cap)."""

    minutes: float | None = attrs.field(default=None, validator=_finite)
    turns: int | None = None
    cost_usd: float | None = attrs.field(default=None, validator=_finite)

    def describe(self) -> str:
        parts = [
            f"{self.minutes:g} minutes" if self.minutes is not None else "",
            f"{self.turns} turns" if self.turns is not None else "",
            f"${self.cost_usd:g}" if self.cost_usd is not None else "",
        ]
        return ", ".join(part for part in parts if part) or "none"


NO_CAPS = Caps()


@attrs.frozen
class Price:
    """US dollars per million tokens, for an engine that reports no cost of its own."""

    input_usd_per_mtok: float = attrs.field(validator=_finite)
    output_usd_per_mtok: float = attrs.field(validator=_finite)

    def of(self, input_tokens: int, output_tokens: int) -> float:
        return (
            input_tokens * self.input_usd_per_mtok + output_tokens * self.output_usd_per_mtok
        ) / 1e6


@attrs.frozen
class Request:
    """What `start` asks for; all the run program needs besides the secrets file."""

    id: str
    target: Target
    engine: str
    login: str
    launcher: str
    image: str
    github_url: str
    github_api_url: str
    requested_at: datetime = attrs.field(factory=now)
    base_url: str | None = None
    model: str | None = None
    one_at_a_time: bool = False
    """The login allows one clone at a time (a ChatGPT plan): serve runs these one by one."""
    model_host: str | None = None
    """host[:port] of the model provider's API: all a network-off review may reach."""
    token_url: str | None = None
    """Where the login renews its tokens (a ChatGPT plan): the run program's side reaches it,
    network-off or not."""
    instructions: str = ""
    """Extra words from the owner for the engine, beside the issue itself."""
    ask_timeout_s: float = attrs.field(default=30 * 60.0, validator=_finite)
    stall_timeout_s: float = attrs.field(default=20 * 60.0, validator=_finite)
    check_commands: tuple[str, ...] = ()
    fix_rounds: int = 0
    """How often failing checks go back to the engine (`[limits] fix_rounds`)."""
    caches: tuple[str, ...] = ()
    """The cache paths the repository's environment declares, besides the defaults."""
    lifecycle: Lifecycle = NO_LIFECYCLE
    """The lifecycle commands the repository's dev container configuration declares."""
    environment: str | None = None
    """Where the repository declares its environment, when setup found a declaration: the
    clone runs in an image made from it on `image` (the launcher makes it before the launch,
    when it runs images)."""
    mode: RunMode = RunMode.CLONE
    strangers_network: NetworkMode = NetworkMode.MODEL_ONLY
    """The engine's network on an issue written by someone who cannot push (`[security]
    strangers`): their text may tell the engine to send what it can reach."""
    omit_strangers_text: bool = False
    """Comments and reviews by people who cannot push are left out of the engine's prompt
    (`[security] strangers_text = "omitted"`), not fenced."""
    allow_secrets: bool = False
    """The owner allowed this clone to push what looks like a secret (`start --allow-secrets`);
    otherwise a secret found in its commits stops the push."""
    caps: Caps = attrs.field(factory=Caps)
    price: Price | None = None
    """From the provider's config: how the run program prices usage reported without cost."""
    long_wait_s: float = attrs.field(default=LONG_WAIT_S, validator=_finite)
    """A usage limit's wait longer than this is a long wait: the clone saves its engine's
    session and exits, and serve launches it again at the reset (`Resume.SESSION`)."""
    v: int = SCHEMA_VERSION


@attrs.frozen
class Record:
    """What serve knows of a clone; serve alone writes it."""

    id: str
    state: State
    updated_at: datetime = attrs.field(factory=now)
    started_at: datetime | None = None
    ended_at: datetime | None = None
    exit_code: int | None = None
    last_progress: ProgressLine | None = None
    question: Question | None = None
    pr_url: str | None = None
    outcome: Outcome | None = None
    report: str | None = None
    scheduled_until: datetime | None = None
    """While the engine waits for its login's usage limit to reset: until when."""
    output_tail: str = ""
    """The clone's last output, kept when it ended without a final line."""
    launching_at: datetime | None = None
    """Set, with state `queued`, just before serve hands the clone to its launcher: after a
    crash of serve it says the launch may have happened, so the launcher is asked first."""
    reason: str = ""
    """Why serve ended the clone as it did, where the final line does not say (no final line, a
    failed launch, a clone the launcher lost, a stall)."""
    handoffs: int = 0
    """How many times the clone asked to be launched again for its next phase."""
    image: str | None = None
    """The image the launcher prepared for the clone (its repository's environment), which
    every phase runs in; None: the request's."""
    usage: Usage = attrs.field(factory=Usage)
    """The engine's usage so far, summed over its turns' usage lines (cost: where the engine
    reports one)."""
    turns: int = 0
    """How many turns the engine ended (one usage line each)."""
    v: int = SCHEMA_VERSION


class InboxKind(enum.StrEnum):
    MESSAGE = "message"
    ANSWER = "answer"


@attrs.frozen
class InboxLine:
    """A message or an answer from the owner, appended by `send` or `answer`."""

    id: str
    kind: InboxKind
    text: str
    question_id: str | None = None
    at: datetime = attrs.field(factory=now)
    via: Via | None = None
    v: int = SCHEMA_VERSION


class Resume(enum.StrEnum):
    """Where the next launch of a clone picks up its work."""

    ENGINE = "engine"
    SAVE = "save"
    SESSION = "session"
    """The engine's working session, ended for a long usage limit, goes on (`not_before`)."""


@attrs.frozen
class Handoff:
    """Written by a clone that ends one phase of its work and needs the next one launched on
    another network: a review of code the owner did not write fetches with the network
    on, reviews with nothing but the model's API, and posts its review with the network on.
    Or by a clone whose login's usage limit resets a long wait away: it saved its engine's
    session and exits, and is launched again (on the same network) at `not_before`, at once
    when the owner resumes it (a resume marker written at or after `at`) or stops it.
    The next launch deletes it when it starts."""

    network: NetworkMode
    resume: Resume
    at: datetime = attrs.field(factory=now)
    not_before: datetime | None = None
    """For `Resume.SESSION`: when the login's usage limit resets."""
    v: int = SCHEMA_VERSION

    @property
    def waits(self) -> bool:
        """A long wait for a usage limit: the next launch comes at `not_before`, not at once."""
        return self.resume is Resume.SESSION


@attrs.frozen
class StopMarker:
    at: datetime = attrs.field(factory=now)
    reason: str = "the owner asked to stop"
    v: int = SCHEMA_VERSION


@attrs.frozen
class ResumeMarker:
    """The owner's word that a scheduled clone goes on now, not at its login's reset."""

    at: datetime = attrs.field(factory=now)
    v: int = SCHEMA_VERSION


@attrs.frozen
class Throttles:
    """serve's word on the logins whose provider is overloaded: how many clones of each may
    run for now. Only serve writes it (`Paths.throttles_file`), when it changes."""

    limits: dict[str, int] = attrs.field(factory=dict)
    at: datetime = attrs.field(factory=now)
    v: int = SCHEMA_VERSION


def _session_id(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not SESSION_ID.fullmatch(value):
        raise ValueError(f"{attribute.name} is not a session id: {value[:80]!r}")


def _session_names(_: object, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    for name in value:
        relative_parts(name)  # raises ValueError for anything but a plain relative path


SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
"""What an engine's session id may look like to be resumed (both engines' are UUIDs): it goes
on the engine's command line, where nothing the engine printed may be read as an option."""


@attrs.frozen
class SavedSession:
    """An engine's session kept in a run folder for a later clone to go on with: the run
    program saves its working session there once its pull request exists, and serve copies it
    into the run folder of the next clone on that pull request. The files' copies sit beside
    this document, as `file-0`, `file-1`..., in `names`' order."""

    engine: str
    login: str
    session_id: str = attrs.field(validator=_session_id)
    names: tuple[str, ...] = attrs.field(validator=_session_names)
    """Each file's place in the engine's state folder (`KeepsSessions.session_files`)."""
    clone_id: str = ""
    """In a session serve gave a clone: the clone that saved it."""
    v: int = SCHEMA_VERSION


@attrs.frozen
class SessionPointer:
    """serve's word on which clone last saved an engine session for a pull request."""

    clone_id: str
    v: int = SCHEMA_VERSION


@attrs.frozen
class SetupRecord:
    """A repository prepared on this machine, and the config version it was prepared under."""

    repo: str
    config_version: int
    engine: str
    login: str
    visibility: str = "private"
    default_branch: str = "main"
    can_push: bool = True
    check_commands: tuple[str, ...] = ()
    checked_at: datetime = attrs.field(factory=now)
    image: str | None = None
    """The clone image chosen at setup (`setup --image`); None: the config's."""
    environment: str | None = None
    """The repository's environment declaration setup found (its files are kept beside this
    record, `node.setups.environment_dir`), or None."""
    caches: tuple[str, ...] = ()
    """The cache paths the environment declares."""
    lifecycle: Lifecycle = NO_LIFECYCLE
    """The lifecycle commands the environment declares."""
    v: int = SCHEMA_VERSION


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=False)
    converter.register_unstructure_hook(datetime, lambda d: d.isoformat())

    def structure_datetime(value: Any, _type: type[datetime]) -> datetime:
        if not isinstance(value, str):
            raise ValueError(f"expected an ISO time, got {value!r}")
        parsed = datetime.fromisoformat(value)
        try:  # kept in UTC: a time at the edge of the calendar fails here, not when shown
            return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        except OverflowError:
            raise ValueError(f"time {value!r} is out of range") from None

    converter.register_structure_hook(datetime, structure_datetime)
    return converter


CONVERTER = _make_converter()
T = TypeVar("T")


def dumps(value: object) -> bytes:
    return json.dumps(
        CONVERTER.unstructure(value), ensure_ascii=False, separators=(",", ":")
    ).encode()


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number JSON allows")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object that says a key twice is ambiguous: which one did its writer mean?"""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"the key {key!r} appears twice in one object")
        found[key] = value
    return found


def _check_tree(raw: object) -> None:
    """Refuse nesting deeper than `MAX_DEPTH` and strings that cannot be written back as
    UTF-8 (lone surrogates); iterative, so no hostile depth reaches the recursion limit."""
    stack: list[tuple[object, int]] = [(raw, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("a string holds a lone surrogate (\\ud800 and the like)") from None
        elif isinstance(value, dict | list):
            if depth >= MAX_DEPTH:
                raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
            items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
            stack.extend((item, depth + 1) for item in items)


def loads(data: bytes | str, kind: type[T], source: Path) -> T:
    """Parse one JSON document as `kind`, or raise `MalformedFile` naming `source`.

    Total: whatever the bytes, the result is a `kind` or `MalformedFile` (size, depth,
    encoding, NaN, numbers and times out of range, wrong types)."""
    if len(data) > MAX_DOCUMENT_BYTES:
        raise MalformedFile(source, f"{len(data)} bytes; at most {MAX_DOCUMENT_BYTES} are read")
    try:
        raw = json.loads(data, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)
        _check_tree(raw)
    except RecursionError:
        raise MalformedFile(source, f"not valid JSON (nested deeper than {MAX_DEPTH})") from None
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise MalformedFile(source, f"not valid JSON ({error})") from None
    if not isinstance(raw, dict):
        raise MalformedFile(source, f"expected a JSON object for a {kind.__name__}")
    version = raw.get("v", SCHEMA_VERSION)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise MalformedFile(
            source, f"schema version {version!r} is newer than this shadowclone reads"
        )
    try:
        return CONVERTER.structure(raw, kind)
    except BaseValidationError as error:
        detail = "; ".join(cattrs.transform_error(error))
    except Exception as error:  # noqa: BLE001 - hostile data: any failure names the file
        detail = f"{type(error).__name__}: {error}"
    raise MalformedFile(source, f"not a valid {kind.__name__}: {detail}")


def read(path: Path, kind: type[T]) -> T:
    """A run-folder or setup file as `kind`; FileNotFoundError if there is none, else
    `MalformedFile` for anything but a plain, well-formed file (see `files`)."""
    return loads(read_bounded(path), kind, path)


def write(path: Path, value: object) -> None:
    write_atomic(path, dumps(value) + b"\n", plain_folder=True)
