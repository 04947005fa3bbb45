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

import opcode
import sys
from types import CodeType, FrameType, FunctionType

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
# ``_dispatch`` is the ``get`` of a dict of the handlers that nothing else holds (a
# ``MappingProxyType`` would look ``get`` up by name on every event): the hook calls the
# handler it returns, or "@1" (``len`` of the arguments: nothing, and no event of its
# own, which ``id`` would raise) for an event no guard watches.
# No Python frame stands between the hook and a handler: every audit event of the
# process, watched or not, pays for the hook alone.
_SEALED_SOURCE = """
def hook(event, args, *, _dispatch=None):
    try:
        (_dispatch, (_dispatch := None))[0](event, "@1")(args)
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
        """Add the hook to the interpreter, for good; return it (for tests only).

        No "busy" mark skips the events raised while a handler runs: a signal handler, a
        garbage-collector callback or a finalizer of the program can run in that window,
        and its accesses must be judged like any other. The handlers' own events (frame
        reads) are simply judged too, and pass. An event named by a ``str`` subclass of
        the program's is looked up as the string it claims to be: it can only ask for
        what ``sys.audit`` with that name would."""
        hook = seal(dict(self._handlers).get, self.globals)
        sys.addaudithook(hook)
        return hook


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
    dispatch: Callable[[str, Callable[[object], object]], Callable[[tuple[Any, ...]], object]],
    globals_: dict[str, object],
) -> FunctionType:
    """Build the sealed hook around ``dispatch``, which gives the handler of an event or
    the default it is passed (see the module docstring)."""
    return sealed_function(
        _SEALED_SOURCE, (BaseException, len), globals_, HOOK_FILENAME, {"_dispatch": dispatch}
    )


def sealed_function(
    source: str,
    objects: tuple[object, ...],
    globals_: dict[str, object],
    filename: str,
    hidden: dict[str, object] | None = None,
    name: str | None = None,
    defaults: tuple[object, ...] | None = None,
) -> FunctionType:
    """The one function ``source`` defines, its string constants ``"@0"``, ``"@1"``...
    replaced by ``objects``: no closure, and globals the integrity guard watches (changing
    its code or reading its defaults is refused).

    Constants are for harmless objects only: the code of a frame reaches the program (the
    standard library reads ``f_code`` of a traceback's frames). What must stay out of
    reach goes in ``hidden``, the keyword-only defaults, which the source takes onto the
    stack and clears (``(_x, (_x := None))[0](...)``) before anything can fail or run
    code of the program, so that the frame's locals never show it. ``name`` renames the
    function and its code (tracebacks show the code's name); ``defaults`` are those of
    its positional parameters (the source's own are not kept)."""
    code = _compiled(source, filename)
    placeholders = {f"@{i}": value for i, value in enumerate(objects)}
    consts = tuple(
        placeholders[c] if (type(c) is str and c in placeholders) else c for c in code.co_consts
    )
    name = name or code.co_name
    code = code.replace(
        co_consts=consts, co_name=name, co_qualname=name, co_code=_uninterrupted(code.co_code)
    )
    made = FunctionType(code, globals_, name, defaults)
    if hidden:
        made.__kwdefaults__ = dict(hidden)
    return made


_COMPILED: dict[tuple[str, str], CodeType] = {}
_RESUME = opcode.opmap["RESUME"]


def _uninterrupted(bytecode: bytes) -> bytes:
    """The function's code, entered without running signal handlers.

    CPython runs pending signal handlers where a function starts (its first ``RESUME``),
    and a handler is handed the frame it interrupted: the hidden defaults are then still
    in that frame's locals, before the first instructions clear them. ``RESUME``'s
    argument says where execution resumes; "after ``yield from``" (2) skips that check
    (3.11 to 3.13), and nothing else in the first instructions runs a handler."""
    raw = bytearray(bytecode)
    for offset in range(0, len(raw), 2):
        if raw[offset] == _RESUME:
            raw[offset + 1] = (raw[offset + 1] & ~3) | 2
            break
    return bytes(raw)


def _compiled(source: str, filename: str) -> CodeType:
    """The code of the one function ``source`` defines, compiled once per source."""
    known = _COMPILED.get((source, filename))
    if known is None:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "'str' object is not callable": on purpose
            module = compile(source, filename, "exec")
        known = next(c for c in module.co_consts if isinstance(c, CodeType))
        _COMPILED[(source, filename)] = known
    return known


# A wrapper of a function the guards judge. ``_before`` takes the call's arguments,
# converts and judges them, and says how to go on: ``(instead, args, kwargs, after)``.
# The original (or ``instead``, when it is not None) is called with ``args`` and
# ``kwargs``; then ``after(result, None)`` gives the result, or ``after(None, error)``
# tidies up after a failure. Neither the original nor ``_before`` (whose closure holds
# the wrapper's state) stays in the frame's locals (see sealed_function); what
# ``_before`` returns holds no original and may show there.
#: How every judged wrapper goes on once ``call`` is known (the tuple under way holds the
#: original, already off the locals): the call, the ``after`` of a failure, and the
#: ``return`` line, which ``shortcuts`` replaces for ``open``.
WRAPPER_END = """
            call[0],
        )[0 if call[0] is None else 3](*call[1], **call[2])
    except "@0" as error:
        if call is not None and call[3] is not None:
            call[3](None, error)
        raise
    return result if call[3] is None else call[3](result, None)
"""
_WRAPPER_SOURCE = (
    """
def wrapper(*args, _original=None, _before=None, **kwargs):
    call = None
    try:
        result = (
            _original,
            (_original := None),
            (call := (_before, (_before := None))[0](*args, **kwargs)),"""
    + WRAPPER_END
)
#: The file the wrappers' code is named after: tracebacks cut the sandbox's own frames.
WRAPPER_FILE = __file__.rpartition("/")[0] + "/<judged wrapper>"

if TYPE_CHECKING:
    #: What a wrapper's ``_before`` returns: ``(instead, args, kwargs, after)``.
    Call = tuple[
        "Callable[..., Any] | None",
        tuple[Any, ...],
        dict[str, Any],
        "Callable[[Any, BaseException | None], Any] | None",
    ]


def sealed_wrapper(
    original: Callable[..., Any],
    before: Callable[..., Call],
    globals_: dict[str, object],
    name: str | None = None,
) -> FunctionType:
    """A judged wrapper of ``original``, which only its ``_before`` decides how to call
    (see ``_WRAPPER_SOURCE``): the original is reachable from nothing the program holds.

    It looks like the original to ``help()`` and IPython: same name, docstring and
    signature (``__text_signature__``, which ``inspect`` reads before any code)."""
    return dressed(
        original,
        sealed_function(
            _WRAPPER_SOURCE,
            (BaseException,),
            globals_,
            WRAPPER_FILE,
            {"_original": original, "_before": before},
            name or original.__name__,
        ),
    )


def dressed(original: Callable[..., Any], made: FunctionType) -> FunctionType:
    """``made``, looking like ``original`` to ``help()`` and IPython."""
    name = made.__name__
    made.__qualname__ = getattr(original, "__qualname__", name)
    made.__doc__ = original.__doc__
    made.__module__ = getattr(original, "__module__", None) or "posix"
    signature = getattr(original, "__text_signature__", None)
    if type(signature) is str:
        # "($module, /, path...)": the module is the builtin's bound first argument.
        signature = signature.replace("($module, /, ", "(", 1).replace("($module, ", "(", 1)
        made.__text_signature__ = signature  # type: ignore[attr-defined]
    return made


def _chain(first: Handler, second: Handler) -> Handler:
    def both(args: tuple[Any, ...]) -> None:
        first(args)
        second(args)

    return both
