"""The only constructors a result stream can reach, each checking its arguments first.

Part of the decoder (``codec``), on the trusted side. A pickle names a callable and the
arguments to call it with; here the name never yields the class itself but a *maker*
for it: an immutable callable that accepts exactly the argument shapes the standard
library pickles that class with (``deque`` gets a tuple and a bound, never a ``range``
of 10**12 to iterate), then builds the value. So a stream cannot call anything but a
value's own constructor, cannot reach a class object to set attributes on it, and
cannot turn a constructor into a memory bomb.

Instances of ``remote-result-mode=objects`` classes never come through here: see
``objects``.
"""

from __future__ import annotations

import re

from pysandboxes._wire.values import RefusedValue

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: Zone names as the tz database writes them: no absolute path, no "..".
_ZONE = re.compile(r"[A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+)*")
_PATHS = ("PurePath", "PurePosixPath", "PureWindowsPath", "Path", "PosixPath")


class Maker:
    """A value class as a stream sees it: callable with checked arguments, nothing else."""

    __slots__ = ("_build", "_name")
    _build: Callable[..., object]
    _name: str

    def __init__(self, name: str, build: Callable[..., object]) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_build", build)

    def __setattr__(self, name: str, value: object) -> None:
        raise RefusedValue(f"{self._name} cannot be changed")

    def __call__(self, *args: object) -> object:
        return self._build(*args)

    def __repr__(self) -> str:
        return f"<maker of {self._name}>"


def _refuse(name: str, args: tuple[object, ...]) -> RefusedValue:
    shapes = ", ".join(type(a).__name__ for a in args)
    return RefusedValue(f"{name}({shapes}): not the arguments it is pickled with")


def _kinds(args: tuple[object, ...], *kinds: tuple[type, ...]) -> bool:
    return len(args) == len(kinds) and all(type(a) in k for a, k in zip(args, kinds, strict=True))


_INT = (int,)
_STR = (str,)
_OPT_INT = (int, type(None))
_NUMBER = (int, float)


def _complex(*args: object) -> object:
    if not _kinds(args, _NUMBER, _NUMBER):
        raise _refuse("complex", args)
    return complex(*args)  # type: ignore[arg-type]


def _range(*args: object) -> object:
    if not _kinds(args, _INT, _INT, _INT):
        raise _refuse("range", args)
    return range(*args)  # type: ignore[arg-type]


def _slice(*args: object) -> object:
    if len(args) != 3:
        raise _refuse("slice", args)
    return slice(*args)


def _ordered_dict(*args: object) -> object:
    from collections import OrderedDict

    if args:  # pickled empty, then filled item by item
        raise _refuse("OrderedDict", args)
    made: OrderedDict[object, object] = OrderedDict()
    return made


def _counter(*args: object) -> object:
    from collections import Counter

    if args and not _kinds(args, (dict,)):
        raise _refuse("Counter", args)
    made: Counter[Any] = Counter()
    if args:
        dict.update(made, args[0])  # type: ignore[arg-type]
    return made


def _deque(*args: object) -> object:
    from collections import deque

    empty = args[0] if args else ()
    if type(empty) is not tuple or empty != () or len(args) > 2:
        raise _refuse("deque", args)  # filled afterwards by APPENDS, never from an iterable
    bound = args[1] if len(args) == 2 else None
    if type(bound) not in _OPT_INT or (bound is not None and bound < 0):  # type: ignore[operator]
        raise _refuse("deque", args)
    return deque(maxlen=bound)  # type: ignore[arg-type]


def _from_state(name: str, size: int) -> Callable[..., object]:
    """``date``, ``time``, ``datetime``: their packed bytes, and for the last two a zone."""

    def build(*args: object) -> object:
        import datetime

        kind: Any = getattr(datetime, name)
        state = args[0] if args else None
        zone = args[1] if len(args) == 2 else None
        zones = (datetime.timezone, _zoneinfo_class())
        if (
            not 1 <= len(args) <= (1 if name == "date" else 2)
            or type(state) is not bytes
            or len(state) != size
            or (zone is not None and type(zone) not in zones)
        ):
            raise _refuse(name, args)
        return kind(state) if zone is None else kind(state, zone)

    return build


def _timedelta(*args: object) -> object:
    import datetime

    if not _kinds(args, _INT, _INT, _INT):
        raise _refuse("timedelta", args)
    return datetime.timedelta(*args)  # type: ignore[arg-type]


def _timezone(*args: object) -> object:
    import datetime

    if not (_kinds(args, (datetime.timedelta,)) or _kinds(args, (datetime.timedelta,), _STR)):
        raise _refuse("timezone", args)
    return datetime.timezone(*args)  # type: ignore[arg-type]


def _zoneinfo_class() -> type:
    import zoneinfo

    return zoneinfo.ZoneInfo


def _zone(*args: object) -> object:
    key = args[0] if len(args) == 1 else None
    if type(key) is not str or len(key) > 255 or not _ZONE.fullmatch(key) or ".." in key:
        raise _refuse("ZoneInfo", args)
    try:
        return _zoneinfo_class()(key)
    except (ValueError, OSError) as exc:  # ZoneInfoNotFoundError is a KeyError
        raise RefusedValue(f"ZoneInfo({key!r}): {exc}") from None
    except KeyError:
        raise RefusedValue(f"ZoneInfo({key!r}): no such zone here") from None


def _one(
    name: str, kinds: tuple[type, ...], make: Callable[[Any], object]
) -> Callable[..., object]:
    def build(*args: object) -> object:
        if not _kinds(args, kinds):
            raise _refuse(name, args)
        try:
            return make(args[0])
        except (ValueError, TypeError, ArithmeticError) as exc:
            raise RefusedValue(f"{name}: {exc}") from None

    return build


def _fraction(*args: object) -> object:
    from fractions import Fraction

    if not (_kinds(args, _INT, _INT) or _kinds(args, _STR)):
        raise _refuse("Fraction", args)
    try:
        return Fraction(*args)  # type: ignore[arg-type]
    except (ValueError, ZeroDivisionError) as exc:
        raise RefusedValue(f"Fraction: {exc}") from None


def _uuid(*args: object) -> object:
    import uuid

    # The sandboxed side sends a UUID as UUID(None, None, None, None, int): its value.
    number = args[4] if len(args) == 5 else None
    if args[:4] != (None, None, None, None) or type(number) is not int:
        raise _refuse("UUID", args)
    if not 0 <= number < 1 << 128:  # type: ignore[operator]
        raise RefusedValue("UUID: the value is out of range")
    return uuid.UUID(int=number)  # type: ignore[arg-type]


def _safe_uuid(*args: object) -> object:
    import uuid

    if len(args) != 1 or type(args[0]) not in _OPT_INT or args[0] not in (0, -1, None):
        raise _refuse("SafeUUID", args)
    return uuid.SafeUUID(args[0])


def _struct_time(*args: object) -> object:
    import time

    fields: Any = args[0] if args else None
    extra: Any = args[1] if len(args) == 2 else {}
    if (
        not 1 <= len(args) <= 2
        or type(fields) not in (tuple,)
        or len(fields) != 9
        or any(type(f) is not int for f in fields)
        or type(extra) not in (dict,)
        or not set(extra) <= {"tm_zone", "tm_gmtoff"}
        or any(type(v) not in (str, int, type(None)) for v in extra.values())
    ):
        raise _refuse("struct_time", args)
    return time.struct_time(fields, extra)


def _path(name: str) -> Callable[..., object]:
    def build(*args: object) -> object:
        import pathlib

        if any(type(a) is not str for a in args) or any("\0" in a for a in args):  # type: ignore[operator]
            raise _refuse(name, args)
        return getattr(pathlib, name)(*args)

    return build


def _address(name: str) -> Callable[..., object]:
    def make(value: object) -> object:
        import ipaddress

        return getattr(ipaddress, name)(value)

    return _one(name, (int, str), make)


def _decimal(value: object) -> object:
    from decimal import Decimal

    return Decimal(value)  # type: ignore[arg-type]


_BUILDERS: dict[tuple[str, str], Callable[..., object]] = {
    ("builtins", "complex"): _complex,
    ("builtins", "range"): _range,
    ("builtins", "slice"): _slice,
    ("collections", "OrderedDict"): _ordered_dict,
    ("collections", "Counter"): _counter,
    ("collections", "deque"): _deque,
    ("datetime", "date"): _from_state("date", 4),
    ("datetime", "time"): _from_state("time", 6),
    ("datetime", "datetime"): _from_state("datetime", 10),
    ("datetime", "timedelta"): _timedelta,
    ("datetime", "timezone"): _timezone,
    ("decimal", "Decimal"): _one("Decimal", _STR, _decimal),
    ("fractions", "Fraction"): _fraction,
    ("uuid", "UUID"): _uuid,
    ("uuid", "SafeUUID"): _safe_uuid,
    ("time", "struct_time"): _struct_time,
    ("zoneinfo", "ZoneInfo"): _zone,
    **{
        ("ipaddress", name): _address(name)
        for name in (
            "IPv4Address",
            "IPv6Address",
            "IPv4Network",
            "IPv6Network",
            "IPv4Interface",
            "IPv6Interface",
        )
    },
    **{(module, name): _path(name) for module in ("pathlib", "pathlib._local") for name in _PATHS},
}

#: The makers, by the (module, name) a stream uses for them.
MAKERS: dict[tuple[str, str], Maker] = {
    key: Maker(f"{key[0]}.{key[1]}", build) for key, build in _BUILDERS.items()
}
