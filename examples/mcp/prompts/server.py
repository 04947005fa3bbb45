"""An MCP server (stdio) whose sandboxed tool asks the client's user before it reads a
file the rules refuse: python server.py.

read_note runs in a sandboxed child (notes.py, .py-sandboxes). When its read is refused,
sandboxes(on_request=...) asks here, in the server: the answer comes from the user of the
MCP client, through the protocol's elicitation request (Context.elicit). Allowed, the file
is opened by this process and handed to the child; the child's kernel wall is unchanged.
"""

from contextvars import ContextVar
from pathlib import Path

import notes
from pydantic import BaseModel

try:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x: the same server, under its former name
    from mcp.server.fastmcp import Context
    from mcp.server.fastmcp import FastMCP as MCPServer
    from mcp.server.fastmcp.exceptions import ToolError

from pysandboxes import Decision, PermissionRequest, sandboxes

HERE = Path(__file__).parent
#: The tool call being served: the request of its sandboxed function is its user's to answer.
ASKING: ContextVar[Context] = ContextVar("asking")

server = MCPServer("notes")


class Permission(BaseModel):
    """What the user is asked to fill in."""

    allow: bool


async def on_request(request: PermissionRequest) -> Decision:
    """Ask the user of the tool call that asked (it runs in that call's context)."""
    ctx = ASKING.get()
    message = f"The tool wants to {request.operation} {request.resource}. Allow it once?"
    answer = await ctx.elicit(message, Permission)
    if answer.action == "accept" and answer.data.allow:
        return Decision.ONCE
    return Decision.DENY


@server.tool()
async def read_note(path: str, ctx: Context) -> str:
    """The text of the note at ``path``; the user is asked before any file is read."""
    ASKING.set(ctx)
    try:
        return await notes.read_note(path)
    except OSError as refused:  # declined: today's refusal, which names the rule to add
        raise ToolError(str(refused)) from None


if __name__ == "__main__":
    with sandboxes(sandboxes_config=HERE / ".py-sandboxes", on_request=on_request):
        server.run()
