"""The `shadowclone` MCP server (stdio): start, list, get, follow, send, answer and stop.

As thin as the CLI: each call loads the config and makes the node afresh (`local_node()`), so an
edited config counts from the next call and no state lives in the server. A result is the data
`--json` prints, as structured content and as the same JSON text. A `ShadowcloneError` becomes a
tool error whose whole text is the CLI's line without its `shadowclone: ` prefix (the tools build
their own results because the SDK would put `Error executing tool NAME: ` before a `ToolError`'s
text), and arguments that miss the input schema are one line naming the argument. Anything
else is a bug, which the SDK reports as a bare tool error and logs with its
traceback.

stdout is the MCP channel: logging goes to stderr.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from shadowclone import __version__
from shadowclone.config import Paths, load_config
from shadowclone.errors import ShadowcloneError
from shadowclone.mcp import INSTRUCTIONS, SERVER_NAME
from shadowclone.mcp.shapes import listing_shape, typed_dict
from shadowclone.node.local import DEFAULT_LIST_LIMIT, CloneView
from shadowclone.node.schemas import CONVERTER, Caps, InboxLine, State, Via
from shadowclone.node.scrub import scrubbed_line
from shadowclone.plugin.node import LocalNode, local_node, reading_node

log = logging.getLogger(__name__)

# Each tool's result is built by the tool (see on_node), with the output schema of the data.
CloneResult = Annotated[CallToolResult, typed_dict(CloneView)]
ListResult = Annotated[CallToolResult, listing_shape(CloneView)]
InboxResult = Annotated[CallToolResult, typed_dict(InboxLine)]

FOLLOW_LIMIT_S = 3600.0
FOLLOW_POLL_S = 1.0

START = """\
Queue a clone on one GitHub issue or pull request.

An issue becomes work on a new branch and a pull request; the owner's own pull request in the \
repository is continued on its branch; any other pull request is reviewed. The clone starts \
when the owner's `shadowclone serve` has room for it.

Refused, with one line saying why: a repository not set up on this machine (the owner runs \
`shadowclone setup OWNER/REPO`), or set up under an older config; a second active clone on the \
same issue or pull request; more clones in 24 hours than the config's `daily_clones`; a target \
that is not `owner/repo#N` or an issue or pull request URL.

Returns the clone in state `queued`; its `id` is what get, send, answer and stop take."""

LIST = """\
List clones: every active one (queued, running, waiting) and the most recent others, newest \
first.

Each clone has its `id`, `state`, `target`, `engine`, times, open `question` and `pr_url`. \
`problems` names run-folder files that could not be read, if any."""

GET = """\
Show one clone, with its last progress lines.

`state` is queued, running, waiting (it has asked the owner a question), done, failed or \
stopped. `question` is the open question, if any: its `id` (for `answer`), `text`, `options` \
and `recommended` option. `last_progress` holds the last `lines` progress lines, the clone's \
log; the final one carries the `outcome` and `report`. `pr_url` is the pull request. Call again \
to follow a clone."""

SEND = """\
Send the owner's message to an active clone (queued, running or waiting).

A running clone's engine gets it as a new instruction mid-work; a queued clone gets it when it \
starts. To answer a clone's question, use `answer`. Refused for a clone that has ended or is \
stopping. Returns the inbox line written."""

ANSWER = """\
Answer a clone's open question.

Take `question_id` from `get`: the `question.id` of a clone in state `waiting`. `choice` is one \
of the question's `options`, or its number (1 for the first); words of the owner's own only \
where the question's `free_text` is true. Refused: an unknown question, one already answered, \
or one that expired (the clone took its recommended option). Returns the inbox line written; \
the clone goes on when it reads it."""

FOLLOW = """\
Follow a clone until it needs the owner or ends, without polling.

Returns the clone (as `get` does) as soon as it is `waiting` (it has asked the owner a \
question: answer it, then follow again), has ended (done, failed or stopped), or after \
`timeout_s` seconds. Meanwhile each new progress line arrives as a progress notification, if \
the call asked for them (a progress token)."""

STOP = """\
Stop a clone: a queued one never starts; a running one is stopped, its work saved, and it ends \
as `stopped`.

Refused for a clone that has already ended. Returns the clone, with `stop_requested` true."""

RESUME = """\
Resume a clone whose engine waits for its login's usage limit to reset (state `scheduled`): its \
request goes to the model now (should the provider still refuse, it is scheduled again).

Refused for a clone that is not scheduled."""

CloneId = Annotated[
    str,
    Field(description="The clone's id as `start` or `list` gave it, or a unique prefix of it."),
]


class _Server(MCPServer):
    """Arguments that fail their schema are one line, as the CLI's usage errors are."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            if not isinstance(error.__cause__, ValidationError):
                raise
            return CallToolResult(
                content=[TextContent(type="text", text=_one_line(name, error.__cause__))],
                is_error=True,
            )


def _one_line(tool: str, error: ValidationError) -> str:
    problems = []
    for detail in error.errors():
        where = ".".join(str(part) for part in detail["loc"]) or "arguments"
        problems.append(f"{where}: {detail['msg']}")
    return f"{tool}: " + "; ".join(problems)


def _engine_names(paths: Paths | None) -> list[str]:
    """The installed engines, for `start`'s choice; none known: any name (the node refuses
    an unknown one in its own line)."""
    from shadowclone.plugin.manager import load_registry
    from shadowclone.plugin.types import Family

    try:
        config, _ = load_config(paths)
    except ShadowcloneError:  # no config yet: every call says so in the CLI's line
        return load_registry().names(Family.ENGINE)
    return load_registry(config.plugins.disabled).names(Family.ENGINE)


def build_server(paths: Paths | None = None) -> MCPServer:
    """The server, ready for `run("stdio")`; `paths` as the CLI settles them (None: default)."""
    server = _Server(
        SERVER_NAME, instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )
    engines = _engine_names(paths)

    def on_node(operation: Callable[[LocalNode], object], reading: bool = False) -> CallToolResult:
        """`operation` on a node made afresh; one that only `reading` works with the defaults
        before the owner's `config init`, as the CLI's reading commands do."""
        try:
            node = reading_node(paths)[0] if reading else local_node(paths)
            value = operation(node)
        except ShadowcloneError as error:
            return _refused(error)
        return _result(value)

    # The engine is a choice of the engines installed here, known only now.
    engine_choice: Any = Literal[tuple(engines)] if engines else str
    engine_help = "An installed engine" + (f" ({', '.join(engines)})" if engines else "")
    start_engine: Any = Annotated[
        engine_choice | None,
        Field(description=f"{engine_help}; leave it out for the config's engine."),
    ]

    def start(
        target: Annotated[
            str,
            Field(
                description="The issue or pull request: `owner/repo#N`, or its GitHub URL "
                "(https://github.com/owner/repo/issues/N or .../pull/N)."
            ),
        ],
        engine: str | None = None,
        instructions: Annotated[
            str,
            Field(description="Extra instructions from the owner, beside the issue itself."),
        ] = "",
        max_minutes: Annotated[
            float | None,
            Field(
                gt=0,
                allow_inf_nan=False,
                description="Pause and ask after this many minutes of work.",
            ),
        ] = None,
        max_turns: Annotated[
            int | None, Field(gt=0, description="Pause and ask after this many turns.")
        ] = None,
        max_cost: Annotated[
            float | None,
            Field(
                gt=0, allow_inf_nan=False, description="Pause and ask at this cost in US dollars."
            ),
        ] = None,
    ) -> CloneResult:
        caps = Caps(minutes=max_minutes, turns=max_turns, cost_usd=max_cost)
        return on_node(
            lambda node: node.start(target, engine=engine, instructions=instructions, caps=caps)
        )

    start.__annotations__["engine"] = start_engine
    server.tool(
        name="start",
        title="Start a clone",
        description=START,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False
        ),
    )(start)

    @server.tool(
        name="list",
        title="List clones",
        description=LIST,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def list_clones(
        include_all: Annotated[
            bool, Field(description="Every clone ever run here, not only recent ones.")
        ] = False,
        limit: Annotated[
            int, Field(description="How many recent clones to show, besides the active ones.")
        ] = DEFAULT_LIST_LIMIT,
    ) -> ListResult:
        def listed(node: LocalNode) -> dict[str, object]:
            listing = node.list(include_all=include_all, limit=limit)
            return {"clones": listing.clones, "problems": listing.problems}

        return on_node(listed, reading=True)

    @server.tool(
        name="get",
        title="Show a clone",
        description=GET,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def get(
        clone_id: CloneId,
        lines: Annotated[int, Field(description="How many of the last progress lines.")] = 20,
    ) -> CloneResult:
        return on_node(lambda node: node.get(clone_id, lines=lines), reading=True)

    @server.tool(
        name="follow",
        title="Follow a clone",
        description=FOLLOW,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def follow(
        clone_id: CloneId,
        ctx: Context[Any, Any],
        timeout_s: Annotated[
            float,
            Field(
                description="Return after this many seconds at most, even if nothing happened.",
                gt=0,
                le=FOLLOW_LIMIT_S,
            ),
        ] = 600.0,
        lines: Annotated[
            int, Field(description="How many of the last progress lines to return.", ge=0)
        ] = 20,
    ) -> CloneResult:
        try:
            node, _ = reading_node(paths)
            view = await _follow(node, clone_id, timeout_s, ctx)
            return _result(node.get(view.id, lines=lines))
        except ShadowcloneError as error:
            return _refused(error)

    @server.tool(
        name="send",
        title="Message a clone",
        description=SEND,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False
        ),
    )
    def send(
        clone_id: CloneId,
        text: Annotated[str, Field(description="The message, as the owner would write it.")],
    ) -> InboxResult:
        return on_node(lambda node: node.send(clone_id, text, via=Via.MCP))

    @server.tool(
        name="answer",
        title="Answer a clone's question",
        description=ANSWER,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False
        ),
    )
    def answer(
        clone_id: CloneId,
        question_id: Annotated[
            str, Field(description="The open question's id: `question.id` from `get`.")
        ],
        choice: Annotated[
            str,
            Field(
                description="One of the question's options (or its number, 1 for the first); "
                "free text only where the question allows it."
            ),
        ],
    ) -> InboxResult:
        return on_node(lambda node: node.answer(clone_id, question_id, choice, via=Via.MCP))

    @server.tool(
        name="stop",
        title="Stop a clone",
        description=STOP,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True
        ),
    )
    def stop(clone_id: CloneId) -> CloneResult:
        return on_node(lambda node: node.stop(clone_id))

    @server.tool(
        name="resume",
        title="Resume a scheduled clone",
        description=RESUME,
        annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True),
    )
    def resume(clone_id: CloneId) -> CloneResult:
        return on_node(lambda node: node.resume(clone_id))

    return server


def _result(value: object) -> CallToolResult:
    data = _plain(value)
    text = json.dumps(data, indent=2, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _refused(error: ShadowcloneError) -> CallToolResult:
    log.info("refused: %s", error)
    return CallToolResult(content=[TextContent(type="text", text=str(error))], is_error=True)


async def _follow(
    node: LocalNode, clone_id: str, timeout_s: float, ctx: Context[Any, Any]
) -> CloneView:
    """Wait for the clone to need the owner or end, telling each new progress line on the way;
    the run folder's changes wake it (a second at most between looks)."""
    from watchfiles import awatch

    folder = node.resolve(clone_id)
    _, _, offset = folder.progress()
    told = 0
    if _settled(node.get(clone_id, lines=0)):
        return node.get(clone_id, lines=0)
    with anyio.move_on_after(timeout_s):
        async for _changes in awatch(
            folder.path, rust_timeout=int(FOLLOW_POLL_S * 1000), yield_on_timeout=True, debounce=50
        ):
            new, _, offset = folder.progress(offset)
            for line in new:
                told += 1
                await ctx.report_progress(told, message=scrubbed_line(line).text)
            if _settled(view := node.get(clone_id, lines=0)):
                return view
    return node.get(clone_id, lines=0)


def _settled(view: CloneView) -> bool:
    """The clone needs the owner (a question) or has ended."""
    return view.state is State.WAITING or not view.state.active


def _plain(value: object) -> Any:
    """What `--json` prints for `value`, as JSON data: the same converter and the same
    fallback to text for anything JSON has no form for."""
    return json.loads(json.dumps(CONVERTER.unstructure(value), ensure_ascii=False, default=str))
