"""The decision log's format: what the sandboxed process reports, what the log holds.

Two forms of one record, ``Decision``:

- **on the wire** (child to trusted side): a line of JSON with short keys, written by the
  child in batches of whole lines, each batch one ``os.write`` of at most ``MAX_LINE``
  bytes (atomic on a pipe). The child counts repeated decisions and sends a line only for
  a decision first seen, or for the repeats of one since its last line. Decoding it is
  ``codec.decode_decisions``' job, on the trusted side.
- **in the log** (``log_line``): one line of JSON per decision, written by the trusted
  side only. Version ``FORMAT`` (documented in ``docs/audit-log.md``)::

    {"v": 1, "time": "2026-12-01T18:00:00.123Z", "process": 4242, "kind": "file",
     "target": "/srv/app/data/in.csv", "access": "read", "verdict": "allowed",
     "rule": ".py-sandboxes:3", "rule_text": "expose-ro=./data", "where": "app.py:12",
     "count": 1}

  ``rule`` is ``"no rule"`` when nothing matched (the default refusal) and ``"implicit"``
  for what the sandbox grants without a rule (the interpreter's files, the private
  temporary directory); a refusal adds ``fix``, the rule line that would allow it.
  ``count`` is how many identical decisions the line stands for since the previous line
  of the same decision: a reader sums them.
"""

from __future__ import annotations

from pysandboxes._record import record
from pysandboxes._wire.flatjson import flat_json

#: The version of the log's format: a reader refuses lines of another.
FORMAT = 1
#: The kinds of decision, and the ``access`` values each accepts (``*``: any short word).
KINDS: dict[str, frozenset[str]] = {
    # "search": the import system's look into a directory of sys.path it may not read;
    # "probe": a library's look at a file (os.stat...) whose failure it catches.
    "file": frozenset({"read", "write", "create", "delete", "execute", "search", "probe"}),
    "env": frozenset({"read"}),
    # "probe": a bind to any free port whose failure its caller catches (see _host.auditlog).
    "net": frozenset({"IN", "OUT", "probe"}),
    "lookup": frozenset({"OUT"}),
    # "fallback": a native module refused, whose importer goes on without it.
    "import": frozenset({"module", "native", "fallback"}),
    "call": frozenset({"*"}),
    "eval": frozenset({"*"}),
}
VERDICTS = ("allowed", "refused")
NO_RULE = "no rule"
IMPLICIT = "implicit"
#: The longest wire line, and the most a batch writes at once (PIPE_BUF).
MAX_LINE = 4096
MAX_TEXT = 1024
#: Most distinct decisions a child reports; later new ones are counted in one line.
MAX_DISTINCT = 50_000
WIRE_FIELDS = frozenset({"k", "t", "a", "v", "r", "x", "w", "n", "f", "p", "s"})
LOG_FIELDS = frozenset(
    {"v", "time", "process", "kind", "target", "access", "verdict", "rule", "rule_text"}
    | {"where", "count", "fix", "mode"}
)


@record
class Decision:
    """One decision of the Python layer (or several identical ones, counted).

    Attributes:
        kind: ``file``, ``env``, ``net``, ``lookup``, ``import``, ``call`` or ``eval``.
        target: a real path, a variable, ``proto:host:port`` (``tcp:example.org:443``), a
            host name, a module, a function.
        access: how (see ``KINDS``); a call's category.
        allowed: the verdict.
        rule: ``file:line`` of the deciding rule, ``NO_RULE`` or ``IMPLICIT``.
        rule_text: the deciding rule as written, ``""`` when none.
        where: the program's line that made the first of these decisions, or ``""``.
        count: how many identical decisions this stands for.
        fix: for a refusal, the rule line that would allow it, ``""`` when none would.
        process: the sandboxed process that decided (its pid as the sandbox sees it).
        surfaced: on the wire only: this refusal, sent before, ended the program as its
            uncaught exception (its traceback is on the terminal): no line of the log,
            and the summary at exit need not repeat it.
    """

    kind: str
    target: str
    access: str
    allowed: bool
    rule: str = NO_RULE
    rule_text: str = ""
    where: str = ""
    count: int = 1
    fix: str = ""
    process: int = 0
    surfaced: bool = False


def encode_decision(decision: Decision) -> bytes:
    """One decision as one wire line (``b""`` when too long to send)."""
    fields: dict[str, object] = {
        "k": decision.kind,
        "t": decision.target[:MAX_TEXT],
        "a": decision.access,
        "v": 1 if decision.allowed else 0,
        "r": decision.rule,
        "n": decision.count,
        "p": decision.process,
    }
    if decision.rule_text:
        fields["x"] = decision.rule_text[:MAX_TEXT]
    if decision.where:
        fields["w"] = decision.where[:512]
    if decision.fix:
        fields["f"] = decision.fix[:MAX_TEXT]
    if decision.surfaced:
        fields["s"] = 1
    line = flat_json(fields).encode() + b"\n"
    return line if len(line) <= MAX_LINE else b""


def known_access(kind: str, access: str) -> bool:
    """Whether ``access`` is one ``kind`` has (``kind`` must be one of ``KINDS``)."""
    accepted = KINDS[kind]
    return access in accepted or ("*" in accepted and 0 < len(access) <= 64)


def log_line(decision: Decision, time: str, mode: str) -> str:
    """One decision as a line of the log (``time``: ISO 8601, UTC; ``mode``: ``complete``
    or ``partial``), ending with a newline."""
    fields: dict[str, object] = {
        "v": FORMAT,
        "time": time,
        "mode": mode,
        "process": decision.process,
        "kind": decision.kind,
        "target": decision.target,
        "access": decision.access,
        "verdict": "allowed" if decision.allowed else "refused",
        "rule": decision.rule,
    }
    if decision.rule_text:
        fields["rule_text"] = decision.rule_text
    fields["where"] = decision.where
    fields["count"] = decision.count
    if decision.fix:
        fields["fix"] = decision.fix
    return flat_json(fields) + "\n"


def origin_fields(source: str | None, line: int, text: str) -> tuple[str, str]:
    """``(rule, rule_text)`` of a deciding rule's origin (``source`` ``None``: no rule)."""
    if source is None:
        return NO_RULE, ""
    if source.startswith("<") and source != "<arg>":
        return IMPLICIT, text
    return f"{source}:{line}", text


def read_log_line(line: str) -> Decision:
    """A line of a decision log, read back by the replay: the trusted side wrote it, but a
    user may have edited it. Raises ``ValueError`` saying what is wrong."""
    import json  # the trusted side's: the child only writes lines (flatjson)

    try:
        parsed: object = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if type(parsed) is not dict:
        raise ValueError("not a JSON object")
    fields: dict[str, object] = parsed  # type: ignore[assignment]
    if fields.get("v") != FORMAT:
        raise ValueError(f"not a decision of format version {FORMAT}")
    unknown = set(fields) - LOG_FIELDS
    if unknown:
        raise ValueError(f"unknown field {sorted(unknown)[0]!r}")
    kind, target, access = fields.get("kind"), fields.get("target"), fields.get("access")
    verdict, count = fields.get("verdict"), fields.get("count", 1)
    if type(kind) is not str or kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    if type(target) is not str or not target or type(access) is not str:
        raise ValueError("no target or access")
    if not known_access(kind, access):
        raise ValueError(f"unknown access {access!r} for {kind}")
    if verdict not in VERDICTS:
        raise ValueError(f"verdict {verdict!r} is neither allowed nor refused")
    if type(count) is not int or count < 1:
        raise ValueError("count is not a positive whole number")
    texts: list[str] = []
    for name in ("rule", "rule_text", "where", "fix"):
        value = fields.get(name, NO_RULE if name == "rule" else "")
        if type(value) is not str:
            raise ValueError(f"{name} is not text")
        texts.append(value)
    process = fields.get("process", 0)
    allowed = verdict == "allowed"
    return Decision(
        kind,
        target,
        access,
        allowed,
        texts[0],
        texts[1],
        texts[2],
        count,
        texts[3],
        process if type(process) is int else 0,
    )
