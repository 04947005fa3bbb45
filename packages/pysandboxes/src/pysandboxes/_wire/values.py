"""The value types that cross from a sandboxed child to its caller, and their bounds.

A result travels as a pickle, and unpickling runs whatever callables the stream names:
the caller only ever rebuilds the classes listed here (``VALUE_CLASSES``), each a plain
value whose constructor has no effect but making the value, and only through a maker
that checks its arguments (``makers``). Containers and scalars are pickle opcodes of
their own and need no class. ``remote-result-mode=objects`` adds instances of the
application's own classes (``objects``), never the standard library's tools.
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
        ("zoneinfo", "ZoneInfo"),
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

#: Default bounds of one decoded value: nesting depth, number of objects, and the memory
#: rebuilding it may take (estimated from its opcodes before anything is built).
MAX_DEPTH = 256
MAX_ITEMS = 10_000_000
MAX_BYTES = 256 << 20


_types: list[frozenset[type]] = []


def value_types() -> frozenset[type]:
    """The exact types a decoded value may hold, besides scalars and containers (the
    trusted side's view; imports their modules once)."""
    if _types:
        return _types[0]
    import collections
    import datetime
    import decimal
    import fractions
    import ipaddress
    import pathlib
    import time
    import uuid
    import zoneinfo

    found = frozenset(
        {
            range,
            slice,
            collections.OrderedDict,
            collections.Counter,
            collections.deque,
            datetime.date,
            datetime.time,
            datetime.datetime,
            datetime.timedelta,
            datetime.timezone,
            decimal.Decimal,
            fractions.Fraction,
            uuid.UUID,
            uuid.SafeUUID,
            time.struct_time,
            zoneinfo.ZoneInfo,
            *(getattr(ipaddress, n) for n in ("IPv4Address", "IPv6Address", "IPv4Network")),
            *(getattr(ipaddress, n) for n in ("IPv6Network", "IPv4Interface", "IPv6Interface")),
            *(getattr(pathlib, n) for n in _PATHS),
        }
    )
    _types.append(found)
    return found


class RefusedValue(Exception):
    """What a child sent is not a value the caller accepts (class, size or depth)."""
