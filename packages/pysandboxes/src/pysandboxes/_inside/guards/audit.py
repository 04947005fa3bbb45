"""The one PEP 578 audit hook of the sandbox, installed before any program code.

An audit hook cannot be removed once added, and CPython calls it from C after each API has
converted its arguments, so it sees what the system call will use. It dispatches the events
the guards know to their handlers; a handler raises to refuse.

The hook is sealed, because a refusal's traceback hands the program the hook's frame:
its function is built with no globals it reads and no closure, and it clears the
traceback and context of what it raises. The dispatcher is a keyword-only default of the
function, moved onto the evaluation stack and its local cleared before it is called: a
frame's code (``f_code.co_consts``, which the standard library may read for tracebacks)
and its locals (``f_locals``, never audited) then show the program only the event and
its arguments.
"""

from __future__ import annotations

import sys
from types import CodeType, FrameType, FunctionType, MappingProxyType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    Handler = Callable[[tuple[Any, ...]], None]

# "@0" is a placeholder, replaced in the code object by BaseException: a constant cannot
# be rebound through the frame's globals or builtins. The dispatcher is never a constant
# (code objects reach the program: the standard library reads a traceback's f_code, and
# so does whatever it calls with getattr): it is the default of ``_dispatch``, taken onto
# the stack and the local set to None before the call, so f_locals does not show it.
_SEALED_SOURCE = """
def hook(event, args, *, _dispatch=None):
    try:
        (_dispatch, (_dispatch := None))[0](event, args)
    except "@0" as refusal:
        refusal.__context__ = None
        refusal.__cause__ = None
        raise refusal.with_traceback(None)
"""
#: The file name of the sealed hook's code, as tracebacks show it.
HOOK_FILENAME = "<pysandboxes audit hook>"


class AuditHook:
    """Collects the guards' handlers, then installs the sealed hook."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}
        self.globals: dict[str, object] = {}

    def add(self, handlers: Mapping[str, Handler]) -> None:
        """Route more events; several guards may watch one event, in order."""
        for event, handler in handlers.items():
            known = self._handlers.get(event)
            self._handlers[event] = handler if known is None else _chain(known, handler)

    def install(self) -> FunctionType:
        """Add the hook to the interpreter, for good; return it (for tests only)."""
        hook = seal(_dispatcher(MappingProxyType(dict(self._handlers))), self.globals)
        sys.addaudithook(hook)
        return hook


def _dispatcher(handlers: Mapping[str, Handler]) -> Callable[[str, tuple[Any, ...]], None]:
    # No "busy" mark that skips events raised while a handler runs: a signal handler, a
    # garbage-collector callback or a finalizer of the program can run in that window,
    # and its accesses must be judged like any other. The handlers' own events (frame
    # reads) are simply judged too, and pass.
    def dispatch(event: str, args: tuple[Any, ...]) -> None:
        if type(event) is not str:
            return  # sys.audit() with an odd name from the program: nothing happens
        handler = handlers.get(event)
        if handler is not None:
            handler(args)

    return dispatch


class _Probe(Exception):
    pass


def current_frame() -> FrameType:
    """The caller's frame, without ``sys._getframe`` (refused into the guards' frames)."""
    try:
        raise _Probe
    except _Probe as probe:
        frame = probe.__traceback__.tb_frame  # type: ignore[union-attr]
    caller = frame.f_back
    return caller if caller is not None else frame


def seal(
    dispatch: Callable[[str, tuple[Any, ...]], None], globals_: dict[str, object]
) -> FunctionType:
    """Build the sealed hook around ``dispatch`` (see the module docstring)."""
    return sealed_function(
        _SEALED_SOURCE, (BaseException,), globals_, HOOK_FILENAME, {"_dispatch": dispatch}
    )


def sealed_function(
    source: str,
    objects: tuple[object, ...],
    globals_: dict[str, object],
    filename: str,
    hidden: dict[str, object] | None = None,
) -> FunctionType:
    """The one function ``source`` defines, its string constants ``"@0"``, ``"@1"``...
    replaced by ``objects``: no closure, and globals the integrity guard watches (reading
    ``__code__`` or ``__kwdefaults__`` of it is refused).

    Constants are for harmless objects only: the code of a frame reaches the program (the
    standard library reads ``f_code`` of a traceback's frames). What must stay out of
    reach goes in ``hidden``, the keyword-only defaults, which the source takes onto the
    stack and clears (``(_x, (_x := None))[0](...)``) before anything can fail or run
    code of the program, so that the frame's locals never show it."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "'str' object is not callable": on purpose
        module = compile(source, filename, "exec")
    code = next(c for c in module.co_consts if isinstance(c, CodeType))
    placeholders = {f"@{i}": value for i, value in enumerate(objects)}
    consts = tuple(
        placeholders[c] if (type(c) is str and c in placeholders) else c for c in code.co_consts
    )
    made = FunctionType(code.replace(co_consts=consts), globals_, code.co_name)
    if hidden:
        made.__kwdefaults__ = dict(hidden)
    return made


def _chain(first: Handler, second: Handler) -> Handler:
    def both(args: tuple[Any, ...]) -> None:
        first(args)
        second(args)

    return both


def detached(
    function: Callable[..., Any], name: str, doc: str | None, builtins: object = None
) -> FunctionType:
    """``function`` rebound to globals of its own (``builtins`` only: an empty namespace
    by default), so nothing leads from it to the module that made it. Defaults and closure
    are kept; it is named ``name`` with the docstring ``doc``."""
    code: CodeType = function.__code__  # type: ignore[attr-defined]
    namespace: dict[str, object] = {"__builtins__": {} if builtins is None else builtins}
    defaults = function.__defaults__  # type: ignore[attr-defined]
    made = FunctionType(code, namespace, name, defaults, function.__closure__)  # type: ignore[attr-defined]
    made.__qualname__ = name
    made.__doc__ = doc
    return made
