"""An MCP server (stdio) whose tools run in sandboxes: python server.py.

The server holds a token (NOTES_API_TOKEN) and uses it for its own work; the tools run
in sandboxed children that never see it: fetch_url may reach only the hosts
.py-sandboxes names, calculate has no network and no files (calculator.py-sandboxes).
"""

import os
from pathlib import Path

import arithmetic
import fetching
from mcp.server.mcpserver import MCPServer

from pysandboxes import sandboxes
from pysandboxes.mcp import sandboxed_tool

HERE = Path(__file__).parent
TOKEN = os.environ.get("NOTES_API_TOKEN", "")  # the server's own secret

server = MCPServer("fetcher")
sandboxed_tool(server)(fetching.fetch_url)  # profile "web", 10 s: as @sandbox says
sandboxed_tool(server)(arithmetic.calculate)  # profile "calculator", 2 s


@server.tool()
def token_configured() -> bool:
    """Whether the server has its API token (the server's own tool, not sandboxed)."""
    return bool(TOKEN)


if __name__ == "__main__":
    with (
        sandboxes(profile="web", sandboxes_config=HERE / ".py-sandboxes"),
        sandboxes(profile="calculator", sandboxes_config=HERE / "calculator.py-sandboxes"),
    ):
        server.run()
