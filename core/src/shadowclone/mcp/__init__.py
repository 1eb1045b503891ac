"""The `shadowclone` MCP server: the owner's own assistant starts and steers clones.

Like the CLI it is a thin layer over the node. `server.py` imports the MCP SDK, so it is loaded
only by `shadowclone mcp` and `python -m shadowclone.mcp`; this package holds only the name.
Absolute imports keep `import mcp` meaning the SDK, inside this package too.
"""

from __future__ import annotations

SERVER_NAME = "shadowclone"
"""The MCP server's name; Claude Code shows its tools as `mcp__shadowclone__start` and so on."""
