"""Learning events: what the sandboxed recorder reports, and how it writes one.

While learning, the sandboxed interpreter sends one event per access its rules would
refuse, as soon as it happens, over a pipe it inherited. Each event is one line of JSON
(a flat object of known fields), written with a single atomic ``os.write`` so that a
child killed by SIGKILL loses at most the event it was writing, never the ones before.
Decoding them is ``codec``'s job, on the trusted side.
"""

from __future__ import annotations

from pysandboxes._policy.registry import CATEGORIES
from pysandboxes._record import record
from pysandboxes._wire.flatjson import flat_json

#: The families of events, and the ``access`` values each accepts.
FAMILIES: dict[str, frozenset[str]] = {
    # "link": a symbolic link the program named a file by (learned with its file).
    "file": frozenset({"read", "write", "create", "delete", "execute", "list", "link"}),
    "env": frozenset({"read"}),
    "net": frozenset({"IN", "OUT"}),
    "lookup": frozenset({"OUT"}),
    "import": frozenset({"module", "native"}),
    "call": frozenset(CATEGORIES),
    # A construct an evaluated source used, by the eval-* key that allows it.
    "eval": frozenset({"syntax", "call", "attribute", "import", "magic"}),
    # Partial mode: a result held an object (of the application's own class, or of
    # another). Reported by the trusted side only: the same family from a child is dropped.
    "result": frozenset({"own", "named"}),
}
#: Longest line accepted; a longer one is dropped whole. PIPE_BUF: a write of at most
#: this size is atomic, so events written by several threads never interleave.
MAX_LINE = 4096
#: Most events read from one run (a program reading 25,000 files sends one event each);
#: the rest are not read, and counted.
MAX_EVENTS = 100_000
MAX_TEXT = 4096
MAX_ADDRESSES = 32
FIELDS = frozenset({"f", "n", "a", "p", "port", "ips", "w"})


@record
class Event:
    """One access the rules in force would have refused.

    Attributes:
        family: ``file``, ``env``, ``net``, ``lookup``, ``import``, ``call``, ``eval`` or
            ``result``.
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
        fields["ips"] = list(event.addresses[:MAX_ADDRESSES])
    if event.where:
        fields["w"] = event.where[:512]  # a location, not a payload: the line stays short
    line = flat_json(fields).encode() + b"\n"
    return line if len(line) <= MAX_LINE else b""
