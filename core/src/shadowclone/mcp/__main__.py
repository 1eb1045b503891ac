"""`python -m shadowclone.mcp`: the MCP server over stdio, as `shadowclone mcp` runs it."""

from __future__ import annotations

if __name__ == "__main__":
    from shadowclone.mcp.early import main

    raise SystemExit(main())
