"""The only place that decodes what a sandboxed process sends: learning events.

While learning, the sandboxed interpreter sends one event per access its rules would
refuse, as soon as it happens, over a pipe it inherited. Each event is one line of JSON
(a flat object of known fields), written with a single atomic ``os.write`` so that a
child killed by SIGKILL loses at most the event it was writing, never the ones before.

The child is untrusted: whatever it wrote, ``decode_events`` returns only well-formed
events of the known families, with bounded sizes, and counts what it dropped. JSON is
parsed, never evaluated; nothing is unpickled. An event only ever *describes* an access:
what becomes a rule, and in which file, is the trusted side's decision (``_host.learning.rules``).
"""

from __future__ import annotations

import json

from pysandboxes._policy.registry import CATEGORIES
from pysandboxes._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

#: The families of events, and the ``access`` values each accepts.
FAMILIES: dict[str, frozenset[str]] = {
    "file": frozenset({"read", "write", "create", "delete", "execute", "list"}),
    "env": frozenset({"read"}),
    "net": frozenset({"IN", "OUT"}),
    "lookup": frozenset({"OUT"}),
    "import": frozenset({"module", "native"}),
    "call": frozenset(CATEGORIES),
}
#: Longest line accepted; a longer one is dropped whole. PIPE_BUF: a write of at most
#: this size is atomic, so events written by several threads never interleave.
MAX_LINE = 4096
#: Most events read from one run; the rest are dropped (and counted).
MAX_EVENTS = 20_000
_MAX_TEXT = 4096
_MAX_ADDRESSES = 32
_FIELDS = frozenset({"f", "n", "a", "p", "port", "ips", "w"})


@record
class Event:
    """One access the rules in force would have refused.

    Attributes:
        family: ``file``, ``env``, ``net``, ``lookup``, ``import`` or ``call``.
        name: what was accessed: a real path, a variable name, the host as the program
            named it, a top-level module, a function's qualified name.
        access: how (see ``FAMILIES``): a file access or ``list``, a direction, a call's
            category, ``module`` or ``native`` for imports.
        proto: ``tcp`` or ``udp`` for the network, else ``""``.
        port: the port for the network, else 0.
        addresses: the addresses a host name led to, or the address connected to.
        where: the program's line that did it (``app/db.py:12``), or ``""``.
    """

    family: str
    name: str
    access: str
    proto: str = ""
    port: int = 0
    addresses: tuple[str, ...] = ()
    where: str = ""


def encode_event(event: Event) -> bytes:
    """One event as one line, for the child to write in a single ``os.write``."""
    fields: dict[str, object] = {"f": event.family, "n": event.name, "a": event.access}
    if event.proto:
        fields["p"] = event.proto
    if event.port:
        fields["port"] = event.port
    if event.addresses:
        fields["ips"] = list(event.addresses[:_MAX_ADDRESSES])
    if event.where:
        fields["w"] = event.where[:512]  # a location, not a payload: the line stays short
    line = json.dumps(fields, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"
    return line if len(line) <= MAX_LINE else b""


def _text(value: object, *, limit: int = _MAX_TEXT) -> str | None:
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
    if not _FIELDS.issuperset(fields):
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
    addresses = [_text(ip, limit=64) for ip in items[: _MAX_ADDRESSES + 1]]
    if len(addresses) > _MAX_ADDRESSES:
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
