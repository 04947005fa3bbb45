"""The only place that decodes what a sandboxed process sends.

The child is untrusted: whatever it wrote, the functions here return only well-formed
values, with bounded sizes, and never run code the child chose.

- Learning events (``decode_events``): JSON lines of known fields, parsed, never
  evaluated. An event only ever *describes* an access: what becomes a rule, and in which
  file, is the trusted side's decision (``_host.learning.rules``).
- Decisions of the Python layer (``decode_decisions``): wire lines of known fields,
  which the trusted side writes to the decision log.
- Permission requests (``decode_ask``): one message of known fields, which the trusted
  side judges itself before it asks anybody (``_host.prompts``).
- Partial mode's results and exceptions (``decode_value``): pickles read opcode by
  opcode before anything is built (``prescan``), then rebuilt from the allowlist of
  value types, each through a maker that checks its arguments (``makers``), and with
  ``remote-result-mode=objects`` instances of allowed classes written as data
  (``objects``); nothing is imported but the value types' own modules.
"""

from __future__ import annotations

import io
import json
from collections import deque as _DEQUE
from time import struct_time as _STRUCT_TIME

from pysandboxes._wire import asks as _asks
from pysandboxes._wire import decisions as _decisions
from pysandboxes._wire.events import (
    FAMILIES,
    FIELDS,
    MAX_ADDRESSES,
    MAX_EVENTS,
    MAX_LINE,
    MAX_TEXT,
    Event,
)
from pysandboxes._wire.frames import LARGE, InPlace
from pysandboxes._wire.values import (
    CONTAINERS,
    MAX_BYTES,
    MAX_DEPTH,
    MAX_ITEMS,
    SCALARS,
    RefusedValue,
    value_types,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any, ClassVar


def _text(value: object, *, limit: int = MAX_TEXT) -> str | None:
    if type(value) is not str or len(value) > limit or "\0" in value:
        return None  # a NUL names nothing the system knows, and os.path refuses it
    try:
        value.encode("utf-8")  # lone surrogates (a name that is not UTF-8): no rule holds it
    except UnicodeEncodeError:
        return None
    return value


def _json_object(line: bytes, limit: int) -> dict[str, object] | None:
    """The JSON object a line of at most ``limit`` bytes holds, else ``None``."""
    if len(line) > limit:
        return None
    try:
        parsed: object = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return parsed if type(parsed) is dict else None  # type: ignore[return-value]


def decode_event(line: bytes) -> Event | None:
    """The event a line holds, or ``None`` when it is not a well-formed known event."""
    fields = _json_object(line, MAX_LINE)
    if fields is None:
        return None
    if not FIELDS.issuperset(fields):
        return None
    family, name, access = _text(fields.get("f")), _text(fields.get("n")), _text(fields.get("a"))
    if family not in FAMILIES or not name or access not in FAMILIES[family]:
        return None
    proto, port, where = fields.get("p", ""), fields.get("port", 0), _text(fields.get("w", ""))
    if proto not in ("", "tcp", "udp") or type(port) is not int or not 0 <= port <= 65535:
        return None
    if (family in ("net", "lookup")) != bool(proto or family == "lookup") or where is None:
        return None
    ips = fields.get("ips", [])
    if type(ips) is not list:
        return None
    items: list[object] = ips  # type: ignore[assignment]
    addresses = [_text(ip, limit=64) for ip in items[: MAX_ADDRESSES + 1]]
    if len(addresses) > MAX_ADDRESSES:
        return None
    kept = tuple(a for a in addresses if a is not None)
    if len(kept) != len(addresses):
        return None
    return Event(family, name, access, str(proto), port, kept, where)


def decode_events(chunks: Iterable[bytes]) -> tuple[list[Event], int]:
    """Split a byte stream into events; return them and the number of lines dropped
    (malformed, and past ``MAX_EVENTS``: see ``read_events`` to tell them apart)."""
    events, malformed, beyond = read_events(chunks)
    return events, malformed + beyond


def read_events(chunks: Iterable[bytes]) -> tuple[list[Event], int, int]:
    """Split a byte stream into events; return them, the number of malformed lines (a
    line cut short because the child died while writing it, or not an event), and the
    number of events past ``MAX_EVENTS``, which are not read."""
    events: list[Event] = []
    malformed = beyond = 0
    pending = b""
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")  # one pass per chunk, never per byte
        if len(pending) > MAX_LINE:
            pending, malformed = b"", malformed + 1  # an endless line: never one event
        for line in lines:
            if len(events) >= MAX_EVENTS:
                beyond += bool(line.strip())
                continue
            event = decode_event(line)
            if event is None:
                malformed += bool(line.strip())
            else:
                events.append(event)
    if pending.strip():
        malformed += 1  # the last line had no end: the child died while writing it
    return events, malformed, beyond


def _decision_text(value: object) -> str | None:
    return _text(value, limit=_decisions.MAX_TEXT)


def decode_decision(line: bytes) -> _decisions.Decision | None:
    """The decision a wire line holds, or ``None`` when it is not a well-formed one."""
    fields = _json_object(line, _decisions.MAX_LINE)
    if fields is None:
        return None
    if not _decisions.WIRE_FIELDS.issuperset(fields):
        return None
    kind, target = _decision_text(fields.get("k")), _decision_text(fields.get("t"))
    access, rule = _decision_text(fields.get("a")), _decision_text(fields.get("r"))
    texts = [_decision_text(fields.get(name, "")) for name in ("x", "w", "f")]
    verdict, count, process = fields.get("v"), fields.get("n"), fields.get("p", 0)
    surfaced = fields.get("s", 0)
    if kind not in _decisions.KINDS or not target or access is None or not rule:
        return None
    if not _decisions.known_access(kind, access) or None in texts:
        return None
    if verdict not in (0, 1) or surfaced not in (0, 1) or (surfaced and verdict):
        return None
    if type(count) is not int or not 0 < count < 1 << 62:
        return None
    if type(process) is not int or not 0 <= process < 1 << 31:
        return None
    text, where, fix = (t or "" for t in texts)
    allowed = verdict == 1
    return _decisions.Decision(
        kind, target, access, allowed, rule, text, where, count, fix, process, surfaced == 1
    )


def decode_decisions(data: bytes) -> tuple[list[_decisions.Decision], bytes, int]:
    """Split bytes read from the decision pipe into decisions; return them, the last line
    when it is not complete yet (to prepend to the next read), and the lines dropped."""
    *lines, pending = data.split(b"\n")
    if len(pending) > _decisions.MAX_LINE:
        pending = b""
    found: list[_decisions.Decision] = []
    dropped = 0
    for line in lines:
        decision = decode_decision(line)
        if decision is None:
            dropped += bool(line.strip())
        else:
            found.append(decision)
    return found, pending, dropped


def decode_ask(data: bytes) -> _asks.Ask | None:
    """The permission request a message holds, or ``None`` when it is not a well-formed
    one (``_wire.asks``): the trusted side then refuses it, asking nobody."""
    fields = _json_object(data, _asks.MAX_ASK)
    if fields is None or not _asks.FIELDS.issuperset(fields):
        return None
    call, kind, operation = fields.get("c"), _text(fields.get("k")), _text(fields.get("a"))
    resource, where = _text(fields.get("n"), limit=_asks.MAX_TEXT), _text(fields.get("w", ""))
    flags, proto, port = fields.get("o", 0), fields.get("p", ""), fields.get("port", 0)
    target = _text(fields.get("t", ""), limit=_asks.MAX_TEXT)
    if type(call) is not int or not 0 <= call < 1 << 62 or not resource or where is None:
        return None
    if kind not in _asks.KINDS or operation is None or target is None:
        return None
    if kind == "call":
        from pysandboxes._policy.registry import CATEGORIES

        if operation not in CATEGORIES:
            return None
    elif operation not in _asks.KINDS[kind]:
        return None
    if type(flags) is not int or not 0 <= flags < 1 << 31:
        return None
    # flags: the open flags of a file, the mode of a directory made; else none
    mode = operation == "mkdir" and flags <= 0o7777
    if flags and (kind != "file" or not (operation in _asks.OPENS or mode)):
        return None
    if bool(target) != (kind == "file" and operation == "rename"):
        return None
    if type(port) is not int or not 0 <= port <= 65535 or proto not in ("", "tcp"):
        return None
    if (kind == "net") != (proto == "tcp" and (port > 0 or operation == "lookup")):
        return None
    if operation == "lookup" and port:
        return None
    if kind == "net" and not _net_target(resource, lookup=operation == "lookup"):
        return None
    return _asks.Ask(call, kind, resource, operation, where, flags, str(proto), port, target)


def _net_target(text: str, *, lookup: bool) -> bool:
    """Whether a routed request names what a connection can go to: a host name as the
    rules spell them (``netrules.is_host_name``: ASCII, at most 253 characters) or, for
    ``route``, an address. Checked here, once, so that no resolver on the trusted side
    ever sees a hostile child's oversize or non-ASCII text (IDNA, its own errors)."""
    from pysandboxes._policy.netrules import is_host_name

    if len(text) > 253:
        return False
    if is_host_name(text):
        return True
    from pysandboxes._policy import netaddr

    return not lookup and netaddr.parse_address(text) is not None


def decode_value(
    payload: bytes | bytearray,
    *,
    objects: Callable[[str, str], type | None] | None = None,
    max_depth: int = MAX_DEPTH,
    max_items: int = MAX_ITEMS,
    max_bytes: int = MAX_BYTES,
) -> object:
    """The value a child pickled, rebuilt from values and allowlisted classes only.

    First the opcodes are read without building anything (``prescan``: only what the
    child's encoder writes for values, within the bounds); then the C unpickler builds
    it, every class name giving a maker that checks its arguments (``makers``), never
    the class; then, unless it is a plain tree of scalars and containers, every object
    of the result is checked to be a value.

    ``objects`` (``remote-result-mode=objects``) gets the module and qualified name of
    each object description the stream holds and returns the class to rebuild it with,
    or ``None`` (refused); see ``objects``. Nothing is imported but the standard modules
    of the value classes.

    Raises:
        RefusedValue: a class off the list, a value nested deeper than ``max_depth``,
            holding more than ``max_items`` objects or taking more than ``max_bytes``
            to rebuild, or a stream that is not a pickle of values.
    """
    if not _prescan:
        from pysandboxes._wire import prescan as _module

        _prescan.append(_module)
    scan = _prescan[0]
    try:
        found = scan.prescan(
            payload,
            objects=objects is not None,
            max_depth=max_depth,
            max_items=max_items,
            max_bytes=max_bytes,
        )
    except RefusedValue as refused:
        named = _named_class(payload) if " uses " in str(refused) else None
        if named is None:
            raise
        raise RefusedValue(named) from None  # the class says more than the opcode
    # io.BytesIO copies a bytearray whole: a large payload is read where it is.
    stream = InPlace(payload) if len(payload) >= LARGE else io.BytesIO(payload)
    reader = _reader(census=bool(found & scan.CENSUS))(stream)
    reader.allowed = objects
    try:
        value = reader.load()
    except RefusedValue:
        raise
    except Exception as exc:  # a malformed stream: any error the unpickler raises
        raise RefusedValue(f"not a valid result stream ({type(exc).__name__}: {exc})") from None
    if found & scan.WALK:
        _check(value, max_depth, max_items, reader.built)
    return value


#: ``prescan``, imported at the first result (it costs a start-up, and calls are many).
_prescan: list[Any] = []


def _named_class(payload: bytes | bytearray) -> str | None:
    """The first class a refused stream names that is not a value class, for the
    message (``prescan.classes`` reads the opcodes; nothing is built)."""
    from pysandboxes._wire.makers import MAKERS
    from pysandboxes._wire.prescan import classes

    for module, qualname in classes(payload):
        if (module, qualname) not in MAKERS:
            return f"{module}.{qualname}"
    return None


_readers: list[type[Any]] = []
#: Keys of one dict or set that may share one hash: past it, each insertion would walk
#: all the others, quadratic work the stream chose (equal big ints, crafted tuples).
MAX_COLLISIONS = 64


def _reader(*, census: bool = False) -> type[Any]:
    """The unpickler class, made once: its names give makers, its persistent ids objects.

    With ``census`` the Python unpickler, which counts the hashes of the keys of each
    dict and set before inserting them (``prescan`` asks for it only when some key's
    hash is the stream's choice: a tuple, a float, a long, a maker's value)."""
    if _readers:
        return _readers[census]
    import pickle

    from pysandboxes._wire.makers import MAKERS
    from pysandboxes._wire.objects import rebuild

    class Names:
        allowed: Callable[[str, str], type | None] | None = None
        built: dict[type, bool]

        def find_class(self, module: str, name: str) -> Any:
            maker = MAKERS.get((module, name))
            if maker is None:
                raise RefusedValue(f"{module}.{name}")
            return maker

        def persistent_load(self, pid: Any) -> Any:
            if self.allowed is None:
                raise RefusedValue("persistent ids are not values")
            return rebuild(pid, self.allowed, self.built)

    class ValueUnpickler(Names, pickle.Unpickler):
        def __init__(self, file: io.BytesIO) -> None:
            super().__init__(file)
            self.built = {}

    class CensusUnpickler(Names, pickle._Unpickler):  # pyright: ignore[reportPrivateUsage]
        dispatch: ClassVar[dict[int, Any]] = dict(pickle._Unpickler.dispatch)  # pyright: ignore[reportPrivateUsage]

        def __init__(self, file: io.BytesIO) -> None:
            super().__init__(file)
            self.built = {}
            self.counts: dict[int, tuple[object, dict[int, int]]] = {}

    def counted(self: Any, target: object, keys: Iterable[object]) -> None:
        # The target is kept with its counts: its id is not reused while loading.
        counts = self.counts.setdefault(id(target), (target, {}))[1]
        for key in keys:
            seen = counts.get(code := hash(key), 0)
            if seen >= MAX_COLLISIONS:
                raise RefusedValue(
                    f"a dict or set of more than {MAX_COLLISIONS} keys sharing one hash (the "
                    "decoder's fixed bound: building it would take the square of their number)"
                )
            counts[code] = seen + 1

    def inserted(self: Any, items: list[Any]) -> None:
        counted(self, self.stack[-1], items[::2])
        for key, value in zip(items[::2], items[1::2], strict=True):
            self.stack[-1][key] = value

    def setitems(self: Any) -> None:
        inserted(self, self.pop_mark())

    def setitem(self: Any) -> None:
        items = self.stack[-2:]
        del self.stack[-2:]
        inserted(self, items)

    def additems(self: Any) -> None:
        items = self.pop_mark()
        counted(self, self.stack[-1], items)
        for item in items:
            self.stack[-1].add(item)

    def frozen(self: Any) -> None:
        items = self.pop_mark()
        counted(self, object(), items)
        self.append(frozenset(items))

    table: Any = CensusUnpickler.dispatch
    table.update({0x75: setitems, 0x73: setitem})
    table.update({0x90: additems, 0x91: frozen})
    _readers.extend((ValueUnpickler, CensusUnpickler))
    return _readers[census]


_SCALARS = frozenset(SCALARS)
_CONTAINERS = frozenset(CONTAINERS)


def _check(value: object, max_depth: int, max_items: int, built: dict[type, bool]) -> None:
    """Refuse a value holding anything but values (and instances of ``built``), nested
    deeper than ``max_depth`` or larger than ``max_items``."""
    if type(value) in _SCALARS:
        return
    from pysandboxes._wire.objects import held

    allowed = value_types()
    stack: list[tuple[object, int]] = [(value, 0)]
    seen: set[int] = set()
    items = 0
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind in _SCALARS or id(item) in seen:
            continue
        seen.add(id(item))
        if depth >= max_depth:
            raise RefusedValue(f"a value nested deeper than {max_depth} levels")
        members: list[object]
        # By its exact type only: isinstance() would ask a rebuilt object its __class__.
        if kind is dict or (kind in allowed and issubclass(kind, dict)):
            mapping: dict[object, object] = item  # type: ignore[assignment]
            members = [*mapping.keys(), *mapping.values()]
        elif kind in _CONTAINERS or kind is _DEQUE or kind is _STRUCT_TIME:
            members = list(item)  # type: ignore[call-overload]
        elif kind is slice:
            members = [item.start, item.stop, item.step]  # type: ignore[attr-defined]
        elif kind in allowed:
            continue  # an atomic value: its parts were checked by its maker
        elif kind in built:
            if not built[kind]:
                continue  # an enum member: the application's own object, not made here
            members = held(item)
        else:
            raise RefusedValue(f"{kind.__module__}.{kind.__qualname__}")
        items += len(members)
        if items > max_items:
            raise RefusedValue(f"a value of more than {max_items} objects")
        if set(map(type, members)) <= _SCALARS:
            continue
        stack.extend((member, depth + 1) for member in members if type(member) not in _SCALARS)


__all__ = [
    "RefusedValue",
    "decode_decision",
    "decode_decisions",
    "decode_event",
    "decode_events",
    "decode_value",
]
