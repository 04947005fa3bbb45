"""The value types that cross from a sandboxed child to its caller, and their bounds.

A result travels as a pickle, and unpickling runs whatever callables the stream names:
the caller only ever rebuilds the classes listed here (``VALUE_CLASSES``), each a plain
value whose constructor has no effect but making the value. Containers and scalars are
pickle opcodes of their own and need no class. ``remote-result-mode=objects`` widens the
list to the application's own classes (``codec``), never to the standard library's
tools.
"""

from __future__ import annotations

_PATHS = ("PurePath", "PurePosixPath", "PureWindowsPath", "Path", "PosixPath")

#: (module, name) of every class a result may name, as pickle writes them (pathlib's
#: classes moved to ``pathlib._local`` in 3.13).
VALUE_CLASSES: frozenset[tuple[str, str]] = frozenset(
    {
        ("builtins", "complex"),
        ("builtins", "range"),
        ("builtins", "slice"),
        ("collections", "OrderedDict"),
        ("collections", "Counter"),
        ("collections", "deque"),
        ("datetime", "date"),
        ("datetime", "time"),
        ("datetime", "datetime"),
        ("datetime", "timedelta"),
        ("datetime", "timezone"),
        ("decimal", "Decimal"),
        ("fractions", "Fraction"),
        ("uuid", "UUID"),
        ("uuid", "SafeUUID"),
        ("time", "struct_time"),
        ("zoneinfo", "ZoneInfo._unpickle"),
        ("ipaddress", "IPv4Address"),
        ("ipaddress", "IPv6Address"),
        ("ipaddress", "IPv4Network"),
        ("ipaddress", "IPv6Network"),
        ("ipaddress", "IPv4Interface"),
        ("ipaddress", "IPv6Interface"),
        *((module, name) for module in ("pathlib", "pathlib._local") for name in _PATHS),
    }
)

#: Types a decoded value may hold (checked after loading, iteratively).
SCALARS: tuple[type, ...] = (type(None), bool, int, float, complex, str, bytes, bytearray)
CONTAINERS: tuple[type, ...] = (list, tuple, dict, set, frozenset)

#: Default bounds of one decoded value: nesting depth and number of objects.
MAX_DEPTH = 256
MAX_ITEMS = 10_000_000
