"""Plain copies of the values a guard judges.

A subclass of ``str``, ``bytes`` or ``int`` can override the very methods a guard would
call (``==``, hashing, ``startswith``, ``__index__``...), and an object can claim a
``__class__`` it does not have. C reads the raw value, so a guard judges a copy made the
way C reads it, found by the object's real type, and no code of the program runs while
the copy is made.
"""

from __future__ import annotations

import sys
from types import MethodDescriptorType, ModuleType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# Read now: os.fsdecode looks os.fspath up when called, and the program may replace it.
_ENCODING, _ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()


def plain_str(value: object) -> str | None:
    """``value``'s characters as an exact ``str``, or ``None`` if it is not a str."""
    kind = type(value)
    if kind is str:
        return value  # type: ignore[return-value]
    if issubclass(kind, str):
        return str.__add__("", value)  # type: ignore[arg-type]
    return None


def plain_bytes(value: object) -> bytes | None:
    """``value``'s bytes as exact ``bytes``, or ``None`` if it is not bytes."""
    kind = type(value)
    if kind is bytes:
        return value  # type: ignore[return-value]
    if issubclass(kind, bytes):
        return bytes.__add__(b"", value)  # type: ignore[arg-type]
    return None


def plain_int(value: object) -> int | None:
    """``value`` as an exact ``int`` (a subclass's own value), or ``None``."""
    kind = type(value)
    if kind is int:
        return value  # type: ignore[return-value]
    if issubclass(kind, int):
        return int.__add__(0, value)  # type: ignore[arg-type]
    return None


def plain_path_text(value: object) -> str | None:
    """A ``str`` or ``bytes`` path as the exact text C reads (bytes decoded as the file
    system does), or ``None`` for anything else."""
    text = plain_str(value)
    if text is not None:
        return text
    raw = plain_bytes(value)
    return None if raw is None else raw.decode(_ENCODING, _ERRORS)


def unix_address(value: object) -> bytes | None:
    """The bytes an AF_UNIX address puts in ``sun_path``, read as C reads them, or ``None``
    when they cannot be known without running the program's code.

    CPython takes a ``str`` (encoded as the file system does) or any buffer (``bytes``,
    ``bytearray``, ``memoryview``, ``array.array``...), read through the buffer protocol.
    Those types are read with their own C methods; a subclass that defines ``__buffer__``
    and any other buffer type (``mmap``, ctypes arrays...) could answer the guard
    differently than it answered ``connect``.
    """
    kind = type(value)
    text = plain_str(value)
    if text is not None:
        return text.encode(_ENCODING, _ERRORS)
    try:
        if kind is memoryview:
            return memoryview.tobytes(value)  # type: ignore[arg-type]
        for base, read in _BUFFERS:
            if issubclass(kind, base):
                return read(value) if _own_buffer(kind, base) else None
        klass = _array_class()
        if klass is not None and kind is klass:
            return vars(klass)["tobytes"](value)  # type: ignore[no-any-return]
    except (ValueError, TypeError):
        return None  # released, or not a buffer C accepted
    return None


_BUFFERS: tuple[tuple[type, Callable[[Any], bytes]], ...] = (
    (bytes, lambda value: bytes.__add__(b"", value)),
    (bytearray, lambda value: bytes(bytearray.copy(value))),
)
_MRO = vars(type)["__mro__"]


def _own_buffer(kind: type, base: type) -> bool:
    """Whether ``kind`` (a subclass of ``base``) gives C its base's buffer."""
    for klass in _MRO.__get__(kind):
        if klass is base:
            return True
        if "__buffer__" in vars(klass):
            return False
    return False


def _array_class() -> type | None:
    """The real ``array.array``, if the program imported it (an array exists only then):
    looked up without importing array at start, and without running the program's code
    (a class of the program's that merely looks like it has no C ``tobytes`` of its own)."""
    module = sys.modules.get("array")
    if type(module) is not ModuleType:
        return None
    klass = vars(module).get("array")
    if type(klass) is not type:
        return None
    method = vars(klass).get("tobytes")
    if type(method) is not MethodDescriptorType or method.__objclass__ is not klass:
        return None
    return klass
