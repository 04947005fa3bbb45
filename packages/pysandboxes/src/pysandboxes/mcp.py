"""MCP tools that run in a sandbox: ``sandboxed_tool(server, profile=..., timeout=...)``.

A tool of an MCP server (the ``mcp`` SDK's ``MCPServer``, or ``FastMCP`` of mcp 1.x)
runs model-chosen arguments, often model-written code. Decorated with
``sandboxed_tool``, it runs in the ``sandboxes(profile=...)`` child the server entered,
with the rules' rights only::

    from mcp.server.mcpserver import MCPServer
    from pysandboxes.mcp import sandboxed_tool

    server = MCPServer("tools")

    @sandboxed_tool(server, profile="web", timeout=10)
    def fetch_url(url: str) -> str:
        '''Fetch a page from the hosts the web profile names.'''
        ...

The SDK sees the function's own signature and docstring (its input schema and
description). A refusal comes back to the client as a tool error naming what was
refused and the rule line that would allow it; a call past ``timeout`` seconds is
stopped (the child replaced when it cannot be interrupted) and reported as a tool
error; a request the client cancels cancels the call in the child. What the function
prints goes to the server's standard error, never to the protocol on standard output.
Under ``python-sb`` (the whole server sandboxed) the function runs inline.
"""

from __future__ import annotations

import sys

# Only the public names: under python-sb the server imports this module, and the
# sandbox's private modules are out of its reach there.
from pysandboxes import (
    RemoteError,
    SandBoxError,
    SandboxTimeout,
    is_in_sandbox,
    sandbox,
    sandbox_denials,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any, TypeVar

    F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["sandboxed_tool", "tool_error"]


def sandboxed_tool(
    server: Any,
    *,
    profile: str | None = None,
    timeout: float | None = None,
    **tool_options: Any,
) -> Callable[[F], F]:
    """Register the decorated function as a tool of ``server`` that runs sandboxed.

    Args:
        server: the SDK's server (``mcp.server.mcpserver.MCPServer``, or mcp 1.x's
            ``FastMCP``): anything with ``add_tool(fn, name=..., ...)``.
        profile: the ``sandboxes(profile=...)`` the calls go to (entered by the server
            around ``server.run()``); ``None`` is the default ``sandboxes()``.
        timeout: seconds a call may take, instead of the rules' ``sandbox-timeout=``.
        **tool_options: passed to ``server.add_tool`` (``name``, ``title``,
            ``description``, ``annotations``, ``structured_output``).

    Returns the ``@sandbox`` function itself: the function must be at the top level of
    an importable module (the child imports it by name), and stays callable there. A
    function marked ``@sandbox`` already (``sandboxed_tool(server)(tools.fetch)``) keeps
    its own profile and timeout unless given here: its module then needs no import of
    the SDK, which the child would otherwise import too.

    Raises:
        TypeError: the function cannot be found by name in the child (see ``@sandbox``).
    """

    def decorate(function: F) -> F:
        given: Any = function
        sandboxed: Any
        if getattr(given, "__pysandboxes_sandbox__", False):  # @sandbox already: its own
            sandboxed, original = given, given.__wrapped__  # profile and timeout apply
            box_profile = given.__pysandboxes_profile__ if profile is None else profile
            seconds = given.__pysandboxes_timeout__ if timeout is None else timeout
        elif is_in_sandbox():  # python-sb: it runs inline, even from __main__
            sandboxed, original, box_profile, seconds = function, function, profile, timeout
        else:
            sandboxed = sandbox(profile=profile, timeout=timeout)(function)
            original, box_profile, seconds = function, profile, timeout
        module, name = str(original.__module__), str(original.__qualname__)
        is_async = bool(getattr(original, "__code__", None) and original.__code__.co_flags & 0x80)

        async def tool(*args: Any, **kwargs: Any) -> Any:
            if is_in_sandbox():  # python-sb: the whole server is sandboxed already
                done, outcome = await _inline(original, args, kwargs, seconds, name)
            else:
                from pysandboxes._api.partial import active

                try:
                    box = active(box_profile, module, name)
                except SandBoxError as exc:
                    raise tool_error(str(exc)) from None
                streams = (sys.stderr, sys.stderr)  # standard output is the protocol's
                done, outcome = await box.acall(
                    module, name, args, kwargs, seconds, streams, sync=not is_async
                )
            if done:
                return outcome
            raise _reported(outcome, name) from None

        for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(tool, attribute, getattr(original, attribute, None))
        tool.__signature__ = _signature(original)  # type: ignore[attr-defined]
        server.add_tool(tool, **tool_options)
        kept: F = sandboxed
        return kept

    return decorate


def tool_error(message: str) -> Exception:
    """The SDK's ``ToolError`` (mcp 2's, else mcp 1.x's): the client reads its message
    as the tool's failure, and the server goes on."""
    for where in ("mcp.server.mcpserver.exceptions", "mcp.server.fastmcp.exceptions"):
        try:
            module: Any = __import__(where, fromlist=["ToolError"])
        except ImportError:  # mcp 2 has the first, mcp 1.x the second
            continue
        error: Exception = module.ToolError(message)
        return error
    return RuntimeError(message)  # no SDK: the caller is not a server


def _reported(raised: BaseException, name: str) -> BaseException:
    """What the client gets for a failed call: a tool error for a refusal, a timeout, a
    crash of the sandbox, or an exception of a class named ``ToolError`` raised by the
    function (its own class: the SDK's cannot be imported in a child without rules for
    it); anything else as the SDK reports an unexpected failure (mcp 2: the name only)."""
    if isinstance(raised, SandboxTimeout):
        return tool_error(f"the tool {name} was stopped: {raised}")
    if type(raised).__name__ == "ToolError":
        return tool_error(str(raised.args[0]) if raised.args else str(raised))
    denials = [d for d in sandbox_denials(raised) if d.startswith("Rule")]
    if denials:
        return tool_error(f"the sandbox refused what the tool {name} did: {'; '.join(denials)}")
    if isinstance(raised, SandBoxError) and not isinstance(raised, RemoteError):
        return tool_error(str(raised))
    return raised


def _signature(function: Callable[..., Any]) -> Any:
    """The function's signature with its annotations evaluated in its own module (the
    SDK would look names up in this module's globals)."""
    inspect = _loaded("inspect")
    try:
        return inspect.signature(function, eval_str=True)
    except (NameError, TypeError, SyntaxError):
        return inspect.signature(function)


async def _inline(
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    seconds: float | None,
    name: str,
) -> tuple[bool, Any]:
    """Run the function here (under python-sb), its prints on standard error. A sync
    function runs in a thread: past ``timeout`` the client gets its tool error at once,
    but nothing can stop the thread (partial mode's child can be killed)."""
    asyncio = _loaded("asyncio")

    async def call() -> Any:
        with _stdout_to_stderr():
            if _loaded("inspect").iscoroutinefunction(function):
                return await function(*args, **kwargs)
            return await asyncio.to_thread(function, *args, **kwargs)

    try:
        return True, await asyncio.wait_for(call(), seconds)
    except TimeoutError:
        limit = seconds or 0.0
        message = f"{name} did not finish within {limit:g} s (sandboxed_tool(timeout=...))"
        return False, SandboxTimeout(message, timeout=limit)
    except Exception as exc:
        return False, exc


def _loaded(name: str) -> Any:
    """A standard module the SDK has imported already (``inspect``, ``asyncio``): taken as
    it is, since an import here would be the program's own under python-sb, and need a
    rule of its own."""
    module = sys.modules.get(name)
    if module is None:
        module = __import__(name)
    return module


_redirected: list[Any] = []  # the standard output saved, once per inline call running


def _stdout_to_stderr() -> Any:
    """``sys.stdout`` points at ``sys.stderr`` while any inline call runs (the calls
    start and end on the event loop's thread: no lock is needed)."""

    @_loaded("contextlib").contextmanager
    def redirect() -> Iterator[None]:
        _redirected.append(sys.stdout if not _redirected else _redirected[0])
        sys.stdout = sys.stderr
        try:
            yield
        finally:
            saved = _redirected.pop()
            if not _redirected:
                sys.stdout = saved

    return redirect()
