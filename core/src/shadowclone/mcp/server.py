"""The `shadowclone` MCP server (stdio): start, list, get, send, answer and stop as tools.

As thin as the CLI: each call loads the config and makes the node afresh (`local_node()`), so an
edited config counts from the next call and no state lives in the server. A result is the data
`--json` prints, as structured content and as the same JSON text. A `ShadowcloneError` becomes a
tool error whose whole text is the CLI's line without its `shadowclone: ` prefix (the tools build
their own results because the SDK would put `Error executing tool NAME: ` before a `ToolError`'s
text). Anything else is a bug, which the SDK reports as a bare tool error and logs with its
traceback.

stdout is the MCP channel: logging goes to stderr.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from shadowclone import __version__
from shadowclone.config import Paths
from shadowclone.errors import ShadowcloneError
from shadowclone.mcp import SERVER_NAME
from shadowclone.node.local import DEFAULT_LIST_LIMIT, LocalNode, local_node
from shadowclone.node.schemas import CONVERTER

log = logging.getLogger(__name__)

Result = Annotated[CallToolResult, dict[str, Any]]
"""A tool's result: built by the tool, with the output schema of a JSON object."""

INSTRUCTIONS = """\
shadowclone runs clones on the owner's machine: Claude Code or Codex working as the owner, in a \
container, on one GitHub issue or pull request, ending with a pull request and a report. \
`start` queues a clone and returns its id; the owner's `shadowclone serve` runs it. `get` shows \
where a clone is: its state, last progress lines, open question and pull request. A clone in \
state `waiting` has asked the owner a question: put it to the owner, then call `answer` with the \
question's id from `get`. `send` gives an active clone a message; `stop` ends one. A refusal is \
one line saying why and what to do (often a command the owner runs, such as `shadowclone setup \
OWNER/REPO`); tell the owner rather than retrying."""

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

STOP = """\
Stop a clone: a queued one never starts; a running one is stopped, its work saved, and it ends \
as `stopped`.

Refused for a clone that has already ended. Returns the clone, with `stop_requested` true."""

CloneId = Annotated[
    str,
    Field(description="The clone's id as `start` or `list` gave it, or a unique prefix of it."),
]


def build_server(paths: Paths | None = None) -> MCPServer:
    """The server, ready for `run("stdio")`; `paths` as the CLI settles them (None: default)."""
    server = MCPServer(
        SERVER_NAME, instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )

    def on_node(operation: Callable[[LocalNode], object]) -> CallToolResult:
        try:
            value = operation(local_node(paths))
        except ShadowcloneError as error:
            log.info("refused: %s", error)
            return CallToolResult(
                content=[TextContent(type="text", text=str(error))], is_error=True
            )
        data = _plain(value)
        text = json.dumps(data, indent=2, ensure_ascii=False)
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=data
        )

    @server.tool(
        name="start",
        title="Start a clone",
        description=START,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False
        ),
    )
    def start(
        target: Annotated[
            str,
            Field(
                description="The issue or pull request: `owner/repo#N`, or its GitHub URL "
                "(https://github.com/owner/repo/issues/N or .../pull/N)."
            ),
        ],
        engine: Annotated[
            str | None,
            Field(description="`claude` or `codex`; leave it out for the config's engine."),
        ] = None,
        instructions: Annotated[
            str,
            Field(description="Extra instructions from the owner, beside the issue itself."),
        ] = "",
    ) -> Result:
        return on_node(lambda node: node.start(target, engine=engine, instructions=instructions))

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
    ) -> Result:
        def listed(node: LocalNode) -> dict[str, object]:
            listing = node.list(include_all=include_all, limit=limit)
            return {"clones": listing.clones, "problems": listing.problems}

        return on_node(listed)

    @server.tool(
        name="get",
        title="Show a clone",
        description=GET,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def get(
        clone_id: CloneId,
        lines: Annotated[int, Field(description="How many of the last progress lines.")] = 20,
    ) -> Result:
        return on_node(lambda node: node.get(clone_id, lines=lines))

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
    ) -> Result:
        return on_node(lambda node: node.send(clone_id, text))

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
    ) -> Result:
        return on_node(lambda node: node.answer(clone_id, question_id, choice))

    @server.tool(
        name="stop",
        title="Stop a clone",
        description=STOP,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True
        ),
    )
    def stop(clone_id: CloneId) -> Result:
        return on_node(lambda node: node.stop(clone_id))

    return server


def _plain(value: object) -> Any:
    """What `--json` prints for `value`, as JSON data: the same converter and the same
    fallback to text for anything JSON has no form for."""
    return json.loads(json.dumps(CONVERTER.unstructure(value), ensure_ascii=False, default=str))


def main(paths: Paths | None = None) -> int:
    """Serve over stdio until the client closes the channel."""
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format=f"{SERVER_NAME} mcp: %(levelname)s %(name)s: %(message)s",
    )
    build_server(paths).run("stdio")
    return 0
