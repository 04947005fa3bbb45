"""Permission requests: what the sandboxed side asks when prompting is on, and the answer.

With prompting on (``sandboxes(on_request=...)``, ``python-sb --prompt``), a refusal
of the Python layer becomes a request sent to the trusted side over a socket of its own
(``SOCK_SEQPACKET``: one message per request, its bounds kept by the kernel). The request
only *describes* the access; the trusted side decodes it (``codec.decode_ask``), asks,
and, if allowed, performs it itself: a file is opened there and its descriptor handed
back (``SCM_RIGHTS``), a socket connected there and handed back the same way. The kernel
wall compiled at start never widens.

The answer comes from the trusted side, which the child trusts: one short JSON object,
and at most one descriptor.
"""

from __future__ import annotations

from pysandboxes._record import record
from pysandboxes._wire.flatjson import flat_json

#: What may be asked, and the operations each kind has. ``file``: ``read``, ``write``
#: (an existing file), ``create``; ``net``: ``OUT`` (a connection); ``import``: ``module``
#: or ``native``; ``call``: a sensitive call's category (checked against the registry).
KINDS: dict[str, frozenset[str]] = {
    "file": frozenset({"read", "write", "create"}),
    "net": frozenset({"OUT"}),
    "import": frozenset({"module", "native"}),
    "call": frozenset(),  # the registry's categories: see ``codec.decode_ask``
}
#: The largest request the trusted side reads: one path, one location, a few numbers.
MAX_ASK = 8192
MAX_TEXT = 4096
#: The largest answer the child reads.
MAX_ANSWER = 4096
FIELDS = frozenset({"c", "k", "n", "a", "w", "o", "p", "port"})
#: The answers on the wire.
ONCE, RUN, ALWAYS, DENY = "once", "run", "always", "deny"


@record
class Ask:
    """One request of the sandboxed side.

    Attributes:
        call: the partial-mode call that asked (0 in complete mode).
        kind: ``file``, ``net``, ``import`` or ``call`` (see ``KINDS``).
        resource: a real path, a host, a top-level module, a function's qualified name.
        operation: how (see ``KINDS``).
        where: the program's line that asked (``pkg/mod.py:42``), or ``""``.
        flags: the ``os.open`` flags of a file request.
        proto: ``tcp`` for a connection, else ``""``.
        port: a connection's port, else 0.
    """

    call: int
    kind: str
    resource: str
    operation: str
    where: str = ""
    flags: int = 0
    proto: str = ""
    port: int = 0


def encode_ask(ask: Ask) -> bytes:
    """One request as one message (``b""`` when too long to send: refused unasked)."""
    fields: dict[str, object] = {"c": ask.call, "k": ask.kind, "n": ask.resource}
    fields["a"] = ask.operation
    if ask.where:
        fields["w"] = ask.where[:512]
    if ask.flags:
        fields["o"] = ask.flags
    if ask.proto:
        fields["p"] = ask.proto
    if ask.port:
        fields["port"] = ask.port
    data = flat_json(fields).encode()
    return data if len(data) <= MAX_ASK else b""


@record
class Answer:
    """What the trusted side answered (``decision``: one of ``ONCE``... ``DENY``).

    Attributes:
        decision: the answer.
        note: why, when the trusted side has something to say (a request refused
            unasked, the rest of a kind denied): added to the refusal's message.
    """

    decision: str
    note: str = ""


def encode_answer(answer: Answer) -> bytes:
    """The trusted side's answer, for the child."""
    fields = {"d": answer.decision, "m": answer.note[:1024]}
    return flat_json(fields).encode()


def parse_answer(data: bytes) -> Answer:
    """The child reads the trusted side's answer; anything unexpected is a denial."""
    import json

    try:
        fields = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return Answer(DENY, "the answer could not be read")
    if type(fields) is not dict:
        return Answer(DENY, "the answer could not be read")
    known: dict[str, object] = fields  # type: ignore[assignment]
    decision, note = known.get("d"), known.get("m", "")
    if decision not in (ONCE, RUN, ALWAYS, DENY) or type(note) is not str:
        return Answer(DENY, "the answer could not be read")
    return Answer(str(decision), note)
