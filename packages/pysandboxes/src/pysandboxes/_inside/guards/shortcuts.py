"""Judged wrappers with a way round their ``_before``, for names judged before.

A name judged in a stable part (see ``workdir``) keeps its verdict: the file guard puts
it in the working directory's ``seen``, and the wrappers of ``stat``-like looks,
``listdir`` and ``open`` for reading then call the original straight away. Each wrapper
here is ``audit.sealed_wrapper``'s, with one difference: before ``_before`` is called, the
exact string the program passed is looked up in ``seen``. The look-up reads nothing the
program made (``type``, ``str``, ``frozenset`` and the kind are constants; only an exact
``str`` is hashed), and it starts with the original and the working directory already
off the frame's locals, as ``_before`` does in the generic wrapper. Anything else (bytes,
a path object, options, a name not seen) goes through ``_before`` as ever.

An ``open`` taken this way is still looked at after it returned (``settled``): another
thread may have changed directory while it ran, and ``seen`` is then another one.
"""

from __future__ import annotations

import sys

from pysandboxes._inside.guards.audit import WRAPPER_END, WRAPPER_FILE, dressed, sealed_function

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FunctionType
    from typing import Any

    from pysandboxes._inside.guards.audit import Call
    from pysandboxes._inside.guards.workdir import WorkingDirectory

# "@1": ``type``, "@2": ``str``, "@3": the kind the name was judged for (``follow`` for a
# look, ``listings.LISTED`` for a listing).
_LOOK_SOURCE = (
    """
def wrapper(path=None, *args, _original=None, _before=None, _workdir=None, **kwargs):
    call = None
    try:
        result = (
            _original,
            (_original := None),
            (
                call := (None, (path,), kwargs, (_before := None))
                if (_workdir, (_workdir := None))[0].seen.names.__contains__(
                    (path if "@1"(path) is "@2" and not args and not kwargs else None, "@3")
                )
                else (_before, (_before := None))[0](path, *args, **kwargs)
            ),"""
    + WRAPPER_END
)

# "@1": ``type``, "@2": ``str``, "@3": the modes that only read, "@4": the access they
# were judged for, "@5": ``_settled``. A name seen goes on with a 5-tuple, which says
# that ``_settled`` has the last look; ``_before`` answers with 4-tuples.
_OPEN_SOURCE = """
def wrapper(file=None, mode="r", *args, _original=None, _before=None, _workdir=None, **kwargs):
    call = None
    try:
        result = (
            _original,
            (_original := None),
            (
                call := (None, (file, mode), kwargs, (_before := None), "@5")
                if (_workdir, (_workdir := None))[0].seen.names.__contains__(
                    (
                        file
                        if "@1"(file) is "@2"
                        and "@1"(mode) is "@2"
                        and mode in "@3"
                        and not args
                        and not kwargs
                        else None,
                        "@4",
                    )
                )
                else (_before, (_before := None))[0](file, mode, *args, **kwargs)
            ),""" + WRAPPER_END.replace(
    "    return result if call[3] is None else call[3](result, None)\n",
    "    if call[3] is not None:\n"
    "        return call[3](result, None)\n"
    "    return result if call.__len__() == 4 else call[4](result, file)\n",
)

# The last look of an ``open`` taken the short way: the name is looked up again in what
# the working directory's ``seen`` is *now*; when a change of directory made it another
# one, the hook judges the descriptor, as for ``open()``'s others ("@1": the access,
# "@2": ``sys.audit``, "@0": ``BaseException``). In the program's hands it does no more
# than ``sys.audit`` would: it holds no state, and its constants are public.
_SETTLED_SOURCE = """
def settled(handle, file, *, _workdir=None):
    if (_workdir, (_workdir := None))[0].seen.names.__contains__((file, "@1")):
        return handle
    try:
        "@2"("pysandboxes.opened", handle.fileno(), file, False)
    except "@0":
        handle.close()
        raise
    return handle
"""

#: The modes an ``open`` taken the short way may have: reading, text or binary.
READING_MODES = frozenset({"r", "rb", "rt", "br", "tr"})


def seen_look(
    original: Callable[..., Any],
    before: Callable[..., Call],
    globals_: dict[str, object],
    workdir: WorkingDirectory,
    kind: object,
) -> FunctionType:
    """The judged wrapper of a look at one path (``stat``, ``lstat``, ``listdir``...),
    round ``before`` for a name ``workdir`` saw judged for ``kind``."""
    constants = (BaseException, type, str, kind)
    return _wrapper(_LOOK_SOURCE, constants, original, before, globals_, workdir, (None,))


def seen_open(
    original: Callable[..., Any],
    before: Callable[..., Call],
    globals_: dict[str, object],
    workdir: WorkingDirectory,
    read: object,
) -> FunctionType:
    """The judged wrapper of ``open()``, round ``before`` for a name ``workdir`` saw
    judged for reading (``read``: ``Access.READ``), opened to read, with no options."""
    settled = sealed_function(
        _SETTLED_SOURCE,
        (BaseException, read, sys.audit),
        globals_,
        WRAPPER_FILE,
        {"_workdir": workdir},
    )
    constants = (BaseException, type, str, READING_MODES, read, settled)
    return _wrapper(_OPEN_SOURCE, constants, original, before, globals_, workdir, (None, "r"))


def _wrapper(
    source: str,
    constants: tuple[object, ...],
    original: Callable[..., Any],
    before: Callable[..., Call],
    globals_: dict[str, object],
    workdir: WorkingDirectory,
    defaults: tuple[object, ...],
) -> FunctionType:
    hidden: dict[str, object] = {"_original": original, "_before": before, "_workdir": workdir}
    made = sealed_function(
        source, constants, globals_, WRAPPER_FILE, hidden, original.__name__, defaults
    )
    return dressed(original, made)
