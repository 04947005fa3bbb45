"""The only place that decodes what a sandboxed process sends.

The child is untrusted: whatever it wrote, the functions here return only well-formed
values, with bounded sizes, and never run code the child chose.

- Learning events (``decode_events``): JSON lines of known fields, parsed, never
  evaluated. An event only ever *describes* an access: what becomes a rule, and in which
  file, is the trusted side's decision (``_host.learning.rules``).
- Partial mode's results and exceptions (``decode_value``): pickles whose every class is
  on an allowlist of value types (``values``), looked up without importing anything.
"""

from __future__ import annotations

import json

from pysandboxes._wire.events import (
    FAMILIES,
    FIELDS,
    MAX_ADDRESSES,
    MAX_EVENTS,
    MAX_LINE,
    MAX_TEXT,
    Event,
)
from pysandboxes._wire.values import CONTAINERS, MAX_DEPTH, MAX_ITEMS, SCALARS, VALUE_CLASSES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any


def _text(value: object, *, limit: int = MAX_TEXT) -> str | None:
    if type(value) is not str or len(value) > limit or "\0" in value:
        return None  # a NUL names nothing the system knows, and os.path refuses it
    try:
        value.encode("utf-8")  # lone surrogates (a name that is not UTF-8): no rule holds it
    except UnicodeEncodeError:
        return None
    return value


def decode_event(line: bytes) -> Event | None:
    """The event a line holds, or ``None`` when it is not a well-formed known event."""
    if len(line) > MAX_LINE:
        return None
    try:
        parsed: object = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if type(parsed) is not dict:
        return None
    fields: dict[str, object] = parsed  # type: ignore[assignment]
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
    """Split a byte stream into events; return them and the number of lines dropped.

    A line cut short (the child died while writing it) or malformed is dropped, and so
    is everything past ``MAX_EVENTS``.
    """
    events: list[Event] = []
    dropped = 0
    pending = b""
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")  # one pass per chunk, never per byte
        if len(pending) > MAX_LINE:
            pending, dropped = b"", dropped + 1  # an endless line: never one event
        for line in lines:
            event = decode_event(line) if len(events) < MAX_EVENTS else None
            if event is None:
                dropped += bool(line.strip())
            else:
                events.append(event)
    if pending.strip():
        dropped += 1  # the last line had no end: the child died while writing it
    return events, dropped


class RefusedValue(Exception):
    """What a child sent is not a value the caller accepts (class, size or depth)."""


def decode_value(
    payload: bytes | bytearray,
    *,
    objects: Callable[[str, str], type | None] | None = None,
    max_depth: int = MAX_DEPTH,
    max_items: int = MAX_ITEMS,
) -> object:
    """The value a child pickled, rebuilt from the allowlisted classes only.

    ``objects`` (``remote-result-mode=objects``) may allow more classes: it gets the
    module and name the stream asks for and returns the class, or ``None``. Nothing is
    imported but the standard modules of the allowlist.

    Raises:
        RefusedValue: a class off the list, a value nested deeper than ``max_depth`` or
            holding more than ``max_items`` objects, or a stream that is not a pickle.
    """
    import io
    import pickle

    class ValueUnpickler(pickle.Unpickler):
        def find_class(self, module: str, name: str, /) -> Any:
            return _find_class(module, name, objects)

        def persistent_load(self, pid: Any, /) -> Any:
            raise RefusedValue("persistent ids are not values")

    try:
        value = ValueUnpickler(io.BytesIO(payload)).load()
    except RefusedValue:
        raise
    except Exception as exc:  # a malformed stream: any error the unpickler raises
        raise RefusedValue(f"not a valid result stream ({type(exc).__name__}: {exc})") from exc
    _check_bounds(value, max_depth, max_items)
    return value


def _find_class(module: str, name: str, objects: Callable[[str, str], type | None] | None) -> Any:
    if (module, name) in VALUE_CLASSES:
        import importlib

        found: Any = importlib.import_module(module)  # one of the allowlist's own modules
        for part in name.split("."):
            found = getattr(found, part)
        return found
    if objects is not None:
        allowed = objects(module, name)
        if allowed is not None:
            return allowed
    raise RefusedValue(f"{module}.{name}")


_SCALARS = frozenset(SCALARS)


def _check_bounds(value: object, max_depth: int, max_items: int) -> None:
    """Refuse a value nested deeper than ``max_depth`` or larger than ``max_items``."""
    stack: list[tuple[object, int]] = [(value, 0)]
    seen: set[int] = set()
    items = 0
    while stack:
        item, depth = stack.pop()
        if type(item) in _SCALARS or id(item) in seen:
            continue
        seen.add(id(item))
        if depth >= max_depth:
            raise RefusedValue(f"a value nested deeper than {max_depth} levels")
        members: list[object]
        if isinstance(item, dict):
            mapping: dict[object, object] = item  # type: ignore[assignment]
            members = [*mapping.keys(), *mapping.values()]
        elif isinstance(item, CONTAINERS):
            members = list(item)  # type: ignore[call-overload]
        else:
            state: Any = getattr(item, "__dict__", None)
            members = list(state.values()) if type(state) is dict else []  # pyright: ignore[reportUnknownArgumentType]
        kinds = set(map(type, members))
        items += len(members)
        if items > max_items:
            raise RefusedValue(f"a value of more than {max_items} objects")
        if kinds <= _SCALARS:
            continue
        stack.extend((member, depth + 1) for member in members if type(member) not in _SCALARS)
