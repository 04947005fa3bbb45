"""Plain copies of the values a guard judges.

A subclass of ``str``, ``bytes`` or ``int`` can override the very methods a guard would
call (``==``, hashing, ``startswith``, ``__index__``...), and an object can claim a
``__class__`` it does not have. C reads the raw value, so a guard judges a copy made the
way C reads it, found by the object's real type, and no code of the program runs while
the copy is made.
"""

from __future__ import annotations

import sys

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
