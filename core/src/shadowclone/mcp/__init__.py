"""The `shadowclone` MCP server: the owner's own assistant starts and steers clones.

Like the CLI it is a thin layer over the node. `server.py` imports the MCP SDK, so it is loaded
only once the server's first answer is written (`early.py`); this package holds its name and
the instructions it gives the assistant.
Absolute imports keep `import mcp` meaning the SDK, inside this package too.
"""

from __future__ import annotations

SERVER_NAME = "shadowclone"
"""The MCP server's name; Claude Code shows its tools as `mcp__shadowclone__start` and so on."""

INSTRUCTIONS = """\
shadowclone runs clones on the owner's machine: Claude Code or Codex working as the owner, in a \
container, on one GitHub issue or pull request, ending with a pull request and a report. \
`start` queues a clone and returns its id; the owner's `shadowclone serve` runs it. `get` shows \
where a clone is: its state, last progress lines, open question and pull request; `follow` \
waits, without polling, until the clone asks a question or ends. A clone in state `waiting` \
has asked the owner a question: put it to the owner, then call `answer` with the \
question's id from `get`. `send` gives an active clone a message; `stop` ends one. A refusal is \
one line saying why and what to do (often a command the owner runs, such as `shadowclone setup \
OWNER/REPO`); tell the owner rather than retrying."""
