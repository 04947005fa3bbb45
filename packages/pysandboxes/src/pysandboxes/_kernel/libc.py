"""The C functions every start calls (``syscall``, ``prctl``, ``unshare``, ``capset``),
through ``_ctypes`` alone.

Importing the ``ctypes`` package builds its dozens of types and imports ``struct``: a
millisecond and more of each start of ``python-sb`` (which only asks the kernel's Landlock
version) and of the processes in front of the program, for calls that pass integers and
two small arrays. Here each integer goes as a C ``long`` (the width a system call reads:
an ``int`` would leave the register's upper half unset); ``syscall`` returns a ``long``,
the others an ``int``. Mechanism only.
"""

from __future__ import annotations

import _ctypes as _native

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: Typeshed types ``_ctypes`` as the ``ctypes`` package uses it, not as used here.
_c: Any = _native


class _Long(_c._SimpleCData):
    _type_ = "l"


class _Int(_c._SimpleCData):
    _type_ = "i"


class _UInt32(_c._SimpleCData):
    _type_ = "I"


class _Function(_c.CFuncPtr):
    _flags_ = _c.FUNCFLAG_CDECL | _c.FUNCFLAG_USE_ERRNO
    _restype_ = _Int


class _LongFunction(_c.CFuncPtr):
    _flags_ = _c.FUNCFLAG_CDECL | _c.FUNCFLAG_USE_ERRNO
    _restype_ = _Long


class _Process:
    """The process's own symbols (``dlopen(NULL)``), as ``ctypes.CDLL(None)`` opens them."""

    _handle = _c.dlopen(None, 0)


_FUNCTIONS: dict[str, Callable[..., int]] = {}


def call(name: str, *args: int | object) -> int:
    """Call the C function ``name`` of the process with ``args``: integers as C longs,
    ``None`` as a null pointer, arrays (``uint32s``) as pointers to their first item."""
    function = _FUNCTIONS.get(name)
    if function is None:
        kind = _LongFunction if name == "syscall" else _Function
        function = _FUNCTIONS[name] = kind((name, _Process))
    return function(*(_Long(arg) if type(arg) is int else arg for arg in args))


def errno() -> int:
    """The ``errno`` the last ``call`` left."""
    return _c.get_errno()


def uint32s(*values: int) -> object:
    """A C array of ``uint32_t`` holding ``values``, to pass to ``call``."""
    kind = _ARRAYS.get(len(values))
    if kind is None:
        kind = _ARRAYS[len(values)] = type(
            f"uint32_{len(values)}", (_c.Array,), {"_type_": _UInt32, "_length_": len(values)}
        )
    return kind(*values)


_ARRAYS: dict[int, type] = {}


class _Byte(_c._SimpleCData):
    _type_ = "B"


def pinned(data: bytes) -> tuple[object, int]:
    """A copy of ``data`` at an address that stays put while the first item returned is
    kept: for structures that point to a buffer (a seccomp program)."""
    kind = type("bytes_n", (_c.Array,), {"_type_": _Byte, "_length_": len(data)})
    copy = kind.from_buffer_copy(data)
    return copy, _c.addressof(copy)
