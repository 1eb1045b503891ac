"""A stdio MCP server that stands in for `shadowclone.run.ask` in the engine scenarios.

It offers the same tool name, `ask`, and answers at once with the recommended option, so the
scenarios exercise each driver's MCP wiring (server name, config, tool timeout) on its own. The
ask scenarios proper run the real `shadowclone.run.ask`.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

ANSWER_PREFIX = "stand-in answer: "

server = MCPServer("shadowclone_ask")


@server.tool()
def ask(question: str, options: list[str], recommended: str) -> str:
    """Ask the owner a question; this stand-in answers with the recommended option."""
    return f"{ANSWER_PREFIX}{recommended}"


if __name__ == "__main__":
    server.run()
