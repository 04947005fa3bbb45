"""Permission requests: what the sandboxed side asks when prompting is on, and the answer.

With prompting on (``sandboxes(on_request=...)``, ``python-sb --prompt``), a refusal
of the Python layer becomes a request sent to the trusted side over a socket of its own
(``SOCK_SEQPACKET``: one message per request, its bounds kept by the kernel). The request
only *describes* the access; the trusted side decodes it (``codec.decode_ask``), asks,
and, if allowed, performs it itself: a file is opened there and its descriptor handed
back (``SCM_RIGHTS``), a socket connected there and handed back the same way, a
directory listed or a file's ``stat`` taken there and sent as data (a listing in a
sealed memory file, a ``stat`` as its fields), a name removed, made or renamed there, a
variable's value (partial mode) sent as data. The kernel wall compiled at start never
widens.

The answer comes from the trusted side, which the child trusts: one JSON object, at
most one value (``v``: a ``stat``'s fields, a variable's value) and at most one
descriptor.
"""

from __future__ import annotations

from pysandboxes._record import record
from pysandboxes._wire.flatjson import flat_json

#: The operations of a file request that open it (``flags``: the ``os.open`` flags).
OPENS = frozenset({"read", "write", "create"})
#: The ones that look (``list``: a directory's names; ``stat``, ``lstat``) and the ones
#: that change a name (``delete`` a file, ``rmdir``, ``mkdir`` with ``flags`` its mode,
#: ``rename`` to ``target``).
LOOKS = frozenset({"list", "stat", "lstat"})
CHANGES = frozenset({"delete", "rmdir", "mkdir", "rename"})
#: What may be asked, and the operations each kind has. ``file``: see above; ``net``:
#: ``OUT`` (a connection); ``import``: ``module`` or ``native``; ``call``: a sensitive
#: call's category (checked against the registry); ``env``: ``read`` (partial mode).
#: ``net`` has two more, which the rules decide and nobody is asked about (the broker
#: of ``_host.egressroutes``): ``route``, a connection the rules allow, made by the
#: trusted side; ``lookup``, a name a rule names, resolved there (``port`` 0).
ROUTED = frozenset({"route", "lookup"})
KINDS: dict[str, frozenset[str]] = {
    "file": OPENS | LOOKS | CHANGES,
    "net": frozenset({"OUT"}) | ROUTED,
    "import": frozenset({"module", "native"}),
    "call": frozenset(),  # the registry's categories: see ``codec.decode_ask``
    "env": frozenset({"read"}),
}
#: The largest request the trusted side reads: one path, one location, a few numbers.
MAX_ASK = 8192
MAX_TEXT = 4096
#: The largest answer the child reads (a variable's value is at most ``MAX_VALUE``).
MAX_ANSWER = 65536
MAX_VALUE = 32768
#: The most entries, and bytes of names, a listing handed over holds; a larger one is
#: refused (the rule lets the program list it itself).
MAX_LISTED = 20_000
MAX_LISTING = 4 << 20
FIELDS = frozenset({"c", "k", "n", "a", "w", "o", "p", "port", "t"})
#: The fields of a ``stat`` sent as data, in ``os.stat_result``'s order.
STAT_FIELDS = (
    "st_mode",
    "st_ino",
    "st_dev",
    "st_nlink",
    "st_uid",
    "st_gid",
    "st_size",
    "st_atime_ns",
    "st_mtime_ns",
    "st_ctime_ns",
    "st_blksize",
    "st_blocks",
    "st_rdev",
)
#: The answers on the wire.
ONCE, RUN, ALWAYS, DENY = "once", "run", "always", "deny"


@record
class Ask:
    """One request of the sandboxed side.

    Attributes:
        call: the partial-mode call that asked (0 in complete mode).
        kind: ``file``, ``net``, ``import``, ``call`` or ``env`` (see ``KINDS``).
        resource: a real path, a host, a top-level module, a function's qualified name,
            a variable's name.
        operation: how (see ``KINDS``).
        where: the program's line that asked (``pkg/mod.py:42``), or ``""``.
        flags: the ``os.open`` flags of a file opened, the mode of a directory made.
        proto: ``tcp`` for a connection, else ``""``.
        port: a connection's port, else 0.
        target: the new name of a ``rename`` (a real path), else ``""``.
    """

    call: int
    kind: str
    resource: str
    operation: str
    where: str = ""
    flags: int = 0
    proto: str = ""
    port: int = 0
    target: str = ""


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
    if ask.target:
        fields["t"] = ask.target
    data = flat_json(fields).encode()
    return data if len(data) <= MAX_ASK else b""


@record
class Answer:
    """What the trusted side answered (``decision``: one of ``ONCE``... ``DENY``).

    Attributes:
        decision: the answer.
        note: why, when the trusted side has something to say (a request refused
            unasked, the rest of a kind denied): added to the refusal's message.
        value: what was allowed, as data: a variable's value, a ``stat``'s fields
            (``STAT_FIELDS``), or ``None``.
    """

    decision: str
    note: str = ""
    value: str | tuple[int, ...] | None = None


def encode_answer(answer: Answer) -> bytes:
    """The trusted side's answer, for the child."""
    fields: dict[str, object] = {"d": answer.decision, "m": answer.note[:1024]}
    if answer.value is None:
        return flat_json(fields).encode()
    import json  # the trusted side's: a value may be a list of numbers

    fields["v"] = list(answer.value) if type(answer.value) is tuple else answer.value
    return json.dumps(fields, separators=(",", ":")).encode()  # ASCII: surrogates escaped


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
    decision, note, value = known.get("d"), known.get("m", ""), known.get("v")
    if decision not in (ONCE, RUN, ALWAYS, DENY) or type(note) is not str:
        return Answer(DENY, "the answer could not be read")
    if type(value) is list:
        numbers: list[object] = value  # type: ignore[assignment]
        if len(numbers) != len(STAT_FIELDS) or any(type(n) is not int for n in numbers):
            return Answer(DENY, "the answer could not be read")
        value = tuple(numbers)
    elif value is not None and type(value) is not str:
        return Answer(DENY, "the answer could not be read")
    return Answer(str(decision), note, value)  # type: ignore[arg-type]
