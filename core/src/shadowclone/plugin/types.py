"""What a plugin hands to shadowclone: registration objects and the protocols they build.

Each collecting hook yields small frozen registration objects. A registration carries a
checked `name`, a one-line `summary` and, where work is done, a `factory` that imports the heavy
code only when that name is selected, so that listing plugins stays cheap and one broken
driver cannot stop the others from loading.
"""

from __future__ import annotations

import enum
import re
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

# Defined in the layers below, where the run-folder contract and the config need them; a
# plugin finds them here.
from shadowclone.config.schema import NotifyEvent as NotifyEvent  # noqa: PLC0414
from shadowclone.environment.recipe import EnvironmentRecipe as EnvironmentRecipe  # noqa: PLC0414
from shadowclone.node.schemas import NetworkMode as NetworkMode  # noqa: PLC0414
from shadowclone.node.schemas import Outcome as Outcome  # noqa: PLC0414

if TYPE_CHECKING:
    from shadowclone.config.schema import Config

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,39}$")


def _check_name(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise ValueError(
            f"{attribute.name} {value!r} is not a plugin name "
            "(expected lowercase letters, digits and '-', starting with a letter)"
        )


def _check_summary(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value.strip() or "\n" in value:
        raise ValueError(f"{attribute.name} must be one non-empty line")


class Family(enum.StrEnum):
    """The five kinds of plugin the core knows."""

    ENGINE = "engine"
    LAUNCHER = "launcher"
    REVIEW_STAGE = "review stage"
    SECRET_PROVIDER = "secret provider"
    NOTIFIER = "notifier"


# --------------------------------------------------------------------------- engines


@attrs.frozen
class EngineLimits:
    """Bounds the engine must honour, so no tool call or turn is cut short by the engine's own
    defaults (the ask tool may wait 30 minutes)."""

    ask_timeout_s: float = 30 * 60
    max_turns: int | None = None


@attrs.frozen
class EngineTask:
    """Everything an engine needs to start working on one clone."""

    workspace: Path
    """The repository checkout the engine works in (its current directory)."""
    prompt: str
    """The first user turn (of the resumed session, with `resume`)."""
    ask_command: tuple[str, ...]
    """argv that starts the `shadowclone_ask` MCP server over stdio (for an engine that cannot
    use `ask_url`)."""
    env: Mapping[str, str]
    """Variables for the engine process: the secrets its login needs, base URLs, proxies."""
    state_dir: Path
    """A private folder for the engine's own config and session files (CODEX_HOME...)."""
    model: str | None = None
    web_tools: bool = True
    """False for reviews of code the owner did not write: no web fetch or search tools."""
    project_settings: bool = True
    """False when the workspace's head is not the owner's (a review of someone else's pull
    request): load no configuration from the workspace that can run a command or add a tool
    (project settings, hooks, MCP servers, plugins, skills, agents, commands), so that no file
    of a stranger's makes anything run. The run program has put the base branch's versions of
    the engines' settings and instruction files in the workspace before the engine starts
    (run/engine_settings.py); an instruction file may still be read."""
    limits: EngineLimits = EngineLimits()
    ask_url: str = ""
    """Where the `shadowclone_ask` MCP server already runs (streamable HTTP), when the run
    program serves it: connect there, with `ask_headers`, rather than start `ask_command`, so
    the engine's first model request never waits for a server to start."""
    ask_headers: Mapping[str, str] = attrs.field(factory=dict)
    run_as: tuple[str, ...] = ()
    """An argv prefix that starts a program as the engine's own user, apart from the run
    program that holds the secrets (`setpriv ... --`); empty where the launcher gives the engine
    no user of its own. Put it before the engine's program and every command the driver runs
    itself (`spawn_engine` does)."""
    resume: str = ""
    """An earlier session to go on with (its `EngineSession.session_id`, its files in the same
    `state_dir`): the model sees that conversation, and `prompt` comes next. Empty: a new
    session."""


@attrs.frozen
class TextEvent:
    """Text the model wrote for the owner."""

    text: str


@attrs.frozen
class ToolUseEvent:
    """The engine ran a tool; `detail` is a one-line summary (a command, a file path)."""

    name: str
    detail: str = ""


@attrs.frozen
class UsageEvent:
    """Tokens and cost so far for the turn that just ended, where the engine reports them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


@attrs.frozen
class TurnEndedEvent:
    """The engine finished a turn and waits for input: `send` starts the next one."""

    interrupted: bool = False


@attrs.frozen
class FinishedEvent:
    """The engine process is gone; always the last event of a session."""

    outcome: Outcome
    detail: str = ""
    """For a failure: the last output of the engine process."""


EngineEvent = TextEvent | ToolUseEvent | UsageEvent | TurnEndedEvent | FinishedEvent


class EngineSession(Protocol):
    """One running engine process, driven by `superviseEngine`."""

    @property
    def session_id(self) -> str | None:
        """The engine's own name for the conversation (Claude Code's session id, Codex's
        thread id) once it has one: a later `EngineTask.resume` goes on with it."""
        ...

    def events(self) -> AsyncIterator[EngineEvent]:
        """Normalized events until, and including, one `FinishedEvent`."""
        ...

    async def send(self, message: str) -> None:
        """Give the model a message from the owner: interrupts or steers a running turn, or
        starts the next turn between turns. Never drops the message."""
        ...

    async def close(self) -> None:
        """No more input: let the engine finish its work and exit."""
        ...

    async def stop(self) -> None:
        """End the engine now, with its whole process tree, within seconds."""
        ...


class Engine(Protocol):
    """Starts sessions of one engine program."""

    async def launch(self, task: EngineTask) -> EngineSession: ...


class EarlyStart(Protocol):
    """An engine program started before its clone's workspace and prompt exist
    (`StartsEarly.start_early`)."""

    async def launch(self, task: EngineTask) -> EngineSession:
        """Open the session on `task` in the program already running. A task that differs from
        the early one in more than `workspace`'s content and `prompt` is launched anew."""
        ...

    async def discard(self) -> None:
        """End the program unused: the clone went another way or stopped."""
        ...


@runtime_checkable
class StartsEarly(Protocol):
    """An `Engine` that can start its program while the run program still reads the target and
    clones the workspace, so that the program's own start is off the way to the first model
    request. Optional: the run program launches any other engine once the workspace is ready."""

    async def start_early(self, task: EngineTask) -> EarlyStart:
        """Start the program for `task`, whose `workspace` does not exist yet and whose `prompt`
        is empty: read neither before `EarlyStart.launch`. The run program cancels a start
        still under way when the clone ends first: a cancelled start leaves no process."""
        ...


@runtime_checkable
class KeepsSessions(Protocol):
    """An `Engine` whose session a later clone can go on with: a clone that continues a pull
    request an earlier clone of the same engine and login made resumes that clone's session,
    so the engine remembers the work. Optional: any other engine starts afresh each time.

    The run program does the file work, never following a link, and keeps the files in the run
    folder between the clones; the engine only names them. Names are relative to
    `EngineTask.state_dir`, `/`-separated, of letters, digits, `.`, `_` and `-`."""

    def session_files(self, task: EngineTask, session_id: str) -> Sequence[str]:
        """The files that hold session `session_id` in `task.state_dir`, enough for
        `EngineTask.resume` to go on with it; no login or other secret among them. Empty when
        the session left none."""
        ...

    def session_place(self, task: EngineTask, session_id: str, name: str) -> str:
        """Where a file `session_files` named (for another task: another state folder and
        workspace) goes in `task.state_dir` for `task` with `resume=session_id` to find it."""
        ...


@attrs.frozen
class EngineRegistration:
    """An engine a plugin offers: `claude`, `codex`..."""

    name: str = attrs.field(validator=_check_name)
    summary: str = attrs.field(validator=_check_summary)
    factory: Callable[[], Engine]
    logins: tuple[str, ...] = ()
    """Names of the secret providers this engine can log in with, in order of preference."""
    base_url_env: str | None = None
    """The variable through which the engine takes a provider's API base URL (a gateway, or a
    fake model server in tests): the run program sets it from `[providers.NAME] base_url`."""
    default_base_url: str | None = None
    """The provider's API when the config names none; its host is all a network-off review
    may reach."""
    credential_files: tuple[str, ...] = ()
    """Where, in its state folder, the engine keeps a login it may renew or be given (relative
    paths): the run program learns every credential in them, so none is ever let out."""


# --------------------------------------------------------------------------- launchers


@attrs.frozen
class RelayAccess:
    """Where a clone reaches serve's relay, and its credential there (never the engine's)."""

    url: str
    """`http://HOST:PORT`, at the launcher's `host_address()`."""
    credential: str


@attrs.frozen
class LaunchSpec:
    """One clone to launch: what folders it sees and what it may reach."""

    clone_id: str
    run_folder: Path
    """Mounted read-write at the same place the run program expects it."""
    secrets_file: Path
    """Mounted read-only; the host never reads it."""
    image: str
    network: NetworkMode = NetworkMode.OPEN
    model_host: str | None = None
    """With MODEL_ONLY: the host[:port] of the provider's API, the only reachable address."""
    auth_host: str | None = None
    """With MODEL_ONLY: the host[:port] where the login renews its tokens, if it does; reachable
    by the run program's side only, as the model's host is."""
    login_state: Path | None = None
    """The login's state folder (it outlives the clone: a ChatGPT plan keeps its rotated tokens
    there): mounted read-write where the run program finds it, never opened by the host."""
    labels: Mapping[str, str] = attrs.field(factory=dict)
    cpus: float | None = None
    memory: str | None = None
    env: Mapping[str, str] = attrs.field(factory=dict)
    """Non-secret variables for the run program (never a secret: those stay in the file)."""
    caches: Mapping[str, str] = attrs.field(factory=dict)
    """Package caches kept per repository: volume name -> absolute path in the clone, mounted
    read-write (a launcher that cannot keep them leaves them out). Empty for a clone whose
    engine works for a stranger: what it leaves there would reach the owner's next clones."""
    environment: EnvironmentRecipe | None = None
    """The repository's environment, which `Launcher.prepare` makes the clone's image of."""
    repo_cache: Path | None = None
    """The repository's cache on the host (a bare mirror of its branches, which outlives the
    clone): shared read-write where `contract.REPO_CACHE_VARIABLE` tells the run program, at
    the same path in every launch of the clone (its workspace borrows the mirror's objects).
    The run program keeps it; the engine's user may read it, never write it. None: every
    clone clones from GitHub."""
    relay: RelayAccess | None = None
    """Given to a `RelayingLauncher` only: the run folder is not shared with the clone's
    machine, which keeps its own and gives the run program these (`contract.RELAY_VARIABLE`,
    `contract.RELAY_CREDENTIAL_VARIABLE`); `run_folder` is then serve's copy, never mounted."""


class LaunchState(enum.StrEnum):
    """Where a clone stands with its launcher (not its record's `State`, which serve keeps)."""

    RUNNING = "running"
    EXITED = "exited"
    MISSING = "missing"


@attrs.frozen
class CloneStatus:
    """What a launcher knows of one clone it launched."""

    clone_id: str
    state: LaunchState
    exit_code: int | None = None
    output_tail: str = ""
    """The last lines the clone printed, kept for a clone that failed."""


class Launcher(Protocol):
    """Runs clones somewhere (Docker, a local process) and finds them again by label."""

    def check(self) -> None:
        """Raise `PluginUnavailable` with what to do if this launcher cannot run clones now."""
        ...

    def prepare(
        self, spec: LaunchSpec, say: Callable[[str], None], cancel: threading.Event
    ) -> LaunchSpec:
        """Make ready what the launch of `spec` needs and may take long, and return the spec
        to launch: for a spec with an `environment`, its image (built when missing, found
        by its tag otherwise). serve calls it on a thread of its own before the first launch
        and shows the clone `preparing`; `say` takes progress lines; a set `cancel` (the clone
        was stopped) asks it to give up soon, raising. A launcher that runs no image returns
        `spec` as it is."""
        ...

    def launch(self, spec: LaunchSpec) -> None: ...

    def status(self, clone_id: str) -> CloneStatus: ...

    def stop(self, clone_id: str, grace_s: float = 10.0) -> None:
        """Ask the clone to end, then force it after `grace_s` seconds."""
        ...

    def remove(self, clone_id: str) -> None:
        """Forget a clone once its ending is recorded (no container left behind)."""
        ...

    def running(self) -> Sequence[CloneStatus]:
        """Every clone this launcher is running or has not yet removed, found by label."""
        ...

    def reap_strays(self) -> list[str]:
        """Remove what launches that died half-way left behind in this launcher's scope (a
        container never started, a helper or volume whose clone is gone), as serve starts;
        returns what was removed, for its log. A launcher that leaves nothing returns []."""
        ...

    def host_address(self) -> str:
        """The address at which a clone reaches a server on this machine that listens there
        only (the demo's fake GitHub): 127.0.0.1 for a clone that runs here, the host's
        address on the container network for a clone in a container."""
        ...


@attrs.frozen
class LauncherSettings:
    """What a launcher's factory gets from the owner's config."""

    clones_dir: Path
    """The clones folder serve works on: the launcher's scope (its labels name it)."""
    image: str | None = None
    """The config's clone image, which `check` looks for; None: do not look."""
    options: Mapping[str, Any] = attrs.field(factory=dict)
    """The launcher's own table of the config, `[launchers.NAME]` (as TOML gave it: the
    launcher checks it, refusing what it cannot use in one line naming the key)."""

    @classmethod
    def of(cls, config: Config, clones_dir: Path, image: str | None = None) -> LauncherSettings:
        """The settings of the config's launcher."""
        return cls(clones_dir, image, config.launchers.get(config.launcher, {}))


@attrs.frozen
class LauncherRegistration:
    """A launcher a plugin offers: `docker`, `fake`..."""

    name: str = attrs.field(validator=_check_name)
    summary: str = attrs.field(validator=_check_summary)
    factory: Callable[[LauncherSettings], Launcher]


# --------------------------------------------------------------------------- review stages


@attrs.frozen
class ReviewContext:
    """What a review stage may use, inside the clone after the engine has worked."""

    workspace: Path
    base_ref: str
    """The commit the clone's work started from; `git diff base_ref` is the change."""
    owner_wrote: bool
    """True only for work on the owner's own branch in this repository: only then may a stage
    run the repository's code."""
    check_commands: tuple[str, ...] = ()
    """The repository's configured check commands (from its setup)."""
    consult: Callable[[str], str] | None = None
    """Ask the clone's engine in a fresh session (web tools off) and get its last words; None
    where no engine is at hand. Stages run in a worker thread, so this may block."""
    run_as: tuple[str, ...] = ()
    """An argv prefix that runs a command as the engine's user. Whatever reads or runs what the
    engine wrote (the repository's checks, git in the workspace, whose config and hooks the
    engine controls) must go through it."""
    env: Mapping[str, str] = attrs.field(factory=dict)
    """The variables for such commands: the engine's home, none of the run program's own."""


@attrs.frozen
class ReviewResult:
    stage: str
    passed: bool
    summary: str
    details: str = ""


class ReviewStage(Protocol):
    def run(self, context: ReviewContext) -> ReviewResult: ...


@attrs.frozen
class ReviewStageRegistration:
    """A review stage; stages run in ascending `order` after the engine."""

    name: str = attrs.field(validator=_check_name)
    summary: str = attrs.field(validator=_check_summary)
    factory: Callable[[], ReviewStage]
    order: int = 100
    runs_code: bool = False
    """True if the stage runs the repository's code: then it runs only when `owner_wrote`."""


# --------------------------------------------------------------------------- secret providers


@attrs.frozen
class Secret:
    """One key of the secrets file and how it reaches the engine inside the clone."""

    key: str
    """The key in the secrets file."""
    description: str
    """The comment above the key in the template: what to paste and where to get it."""
    env: str | None = None
    """Passed to the engine as this variable..."""
    file: str | None = None
    """...or written to this path (relative to the engine's state folder), mode 0600."""


@attrs.frozen
class SecretProviderRegistration:
    """A login or token: what the owner pastes, and its limits."""

    name: str = attrs.field(validator=_check_name)
    summary: str = attrs.field(validator=_check_summary)
    secrets: tuple[Secret, ...]
    engine: str | None = None
    """The engine this login is for; None for secrets every clone needs (the GitHub token)."""
    one_at_a_time: bool = False
    """At most one clone at a time may use this login (a ChatGPT plan's rotating tokens)."""
    private_repos_only: bool = False
    """Never used on a public repository."""
    base_url: str | None = None
    """The API this login reaches when the config names none, where it is not the engine's
    default (a ChatGPT plan reaches ChatGPT's backend, not the OpenAI API)."""
    token_url: str | None = None
    """Where this login renews its tokens, for a login that does (the run program's side
    only; a network-off clone may reach its host too)."""


# --------------------------------------------------------------------------- notifiers


@attrs.frozen
class Notification:
    """One thing to tell the owner, its text already redacted."""

    event: NotifyEvent
    clone_id: str
    target: str
    """owner/repo#number."""
    title: str
    """One short line."""
    text: str
    question_id: str | None = None
    options: tuple[str, ...] = ()
    recommended: str = ""
    pr_url: str | None = None
    url: str | None = None
    """The clone's page on the dashboard, when the config gives the dashboard an address."""
    answer_urls: Mapping[str, str] = attrs.field(factory=dict)
    """For a question, by option: a URL that answers it with that option when POSTed to (a
    link signed for that one answer, needing no token), when the dashboard has an address."""


class Notifier(Protocol):
    """Delivers notifications somewhere the owner sees them."""

    def notify(self, notification: Notification) -> None:
        """Deliver it, or raise: serve tries again later, with backoff, a few times."""
        ...


@attrs.frozen
class NotifierContext:
    """What a notifier's factory gets: its settings and a folder of its own."""

    options: Mapping[str, object]
    """The config's `[notify.NAME]` table (empty when there is none)."""
    folder: Path
    """A private folder (0700) for what the notifier keeps, a signing key for instance."""


@attrs.frozen
class NotifierRegistration:
    """A notifier a plugin offers: `desktop`, `webhook`, `ntfy`..."""

    name: str = attrs.field(validator=_check_name)
    summary: str = attrs.field(validator=_check_summary)
    factory: Callable[[NotifierContext], Notifier]
    """Builds the notifier; raises `PluginUnavailable` (or `BadInput` for its settings) with
    what to do when it cannot work here."""


Registration = (
    EngineRegistration
    | LauncherRegistration
    | ReviewStageRegistration
    | SecretProviderRegistration
    | NotifierRegistration
)
