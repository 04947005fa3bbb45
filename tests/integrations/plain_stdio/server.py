"""An MCP stdio server in the plain pattern: tools that await @sandbox functions inside
`with sandboxes():`, without pysandboxes.mcp's helper. Runs with mcp 1.x and 2.x."""

try:
    from mcp.server.mcpserver import MCPServer as Server  # mcp 2.x
except ImportError:
    from mcp.server.fastmcp import FastMCP as Server  # mcp 1.x

import chatty

from pysandboxes import sandboxes

server = Server("plain")


@server.tool()
async def shout(text: str) -> str:
    """Upper-case the text (and talk on every stream on the way)."""
    return await chatty.shout(text)


@server.tool()
async def whisper(text: str) -> str:
    """Lower-case the text (a sync sandboxed function, and an unfinished line)."""
    return chatty.whisper(text)


with sandboxes():
    server.run()
