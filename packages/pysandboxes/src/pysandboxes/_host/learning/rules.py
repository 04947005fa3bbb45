"""From the events of a learning run to the fewest rules that allow them.

Runs on the trusted side, after the program ended, on events already validated by
``_wire.codec``. The events say what happened; this module decides what to grant, so a
lying child can at worst ask for rights the user then reviews, never for a directory
collapse, a rule file, or a value of the environment:

- files as ``filerules`` learns them: a file read grants that file, a directory only
  when the program listed it, created or removed in it, or used many files below it,
  and never a sensitive one; paths are written relative to the rule file
  (``./data/in.txt``), to ``~`` or to a ``${VAR}`` such as ``${VIRTUAL_ENV}``;
- one ``net=`` rule per host name the program used and direction, with the ports seen;
  an ephemeral bind (port 0) needs no rule;
- ``env=NAME=${NAME}`` for variables that exist on the host; never a value;
- imports grouped as standard, third party, dangerous and deprecated; sensitive calls
  by function when the registry knows it, else by category.
"""

from __future__ import annotations

import re
import sys

from pysandboxes._host.learning.evalrules import eval_rules
from pysandboxes._host.learning.filerules import file_rules
from pysandboxes._host.learning.places import Context, secret_variable
from pysandboxes._policy import registry
from pysandboxes._policy.registry import DANGEROUS_CATEGORIES, SENSITIVE_FUNCTIONS
from pysandboxes._policy.writer import LearnedRule
from pysandboxes._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from pysandboxes._wire.events import Event

#: Modules that let code leave the Python layer's reach: marked ⚠ when learned.
DANGEROUS_MODULES = frozenset(
    {"ctypes", "_ctypes", "cffi", "subprocess", "_posixsubprocess", "pty", "multiprocessing"}
    | {"pickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "code", "codeop"}
)
#: Standard modules deprecated by PEP 594 and friends: still importable, soon gone.
DEPRECATED_MODULES = frozenset(
    {"aifc", "asynchat", "asyncore", "audioop", "cgi", "cgitb", "chunk", "crypt", "distutils"}
    | {"imghdr", "imp", "mailcap", "msilib", "nis", "nntplib", "ossaudiodev", "pipes"}
    | {"smtpd", "sndhdr", "spwd", "sunau", "telnetlib", "uu", "xdrlib", "lib2to3"}
)
GROUPS = (
    "⚠ Dangerous!",
    "Standard Python",
    "⚠ Deprecated Python module",
    "External modules (Are you sure about the origin?)",
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_QUALNAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


@record
class Learned:
    """The outcome: the rules to write, each with its summary row, and what was skipped.

    Attributes:
        rules: the rules, in writing order.
        rows: ``(family, rule, first seen at)`` per rule, for the summary.
        skipped: why some accesses gave no rule, one sentence each.
    """

    rules: tuple[LearnedRule, ...]
    rows: tuple[tuple[str, str, str], ...]
    skipped: tuple[str, ...]


def learn(events: Iterable[Event], context: Context) -> Learned:
    """The rules for ``events`` (see the module docstring)."""
    out = _Out()
    first: dict[tuple[str, str, str, str, int], Event] = {}
    for event in events:
        first.setdefault((event.family, event.name, event.access, event.proto, event.port), event)
    ordered = list(first.values())
    _env(out, [e for e in ordered if e.family == "env"], context)
    _files(out, [e for e in ordered if e.family == "file"], context)
    _net(out, [e for e in ordered if e.family == "net"])
    _imports(out, [e for e in ordered if e.family == "import"])
    _calls(out, [e for e in ordered if e.family == "call"])
    eval_rules(out.add, [e for e in ordered if e.family == "eval"], out.skipped)
    _results(out, [e for e in ordered if e.family == "result"])
    skipped = list(out.skipped)
    if out.secrets:
        skipped.append(
            f"{len(out.secrets)} secret(s) the program used are written commented out, not "
            f"granted: {', '.join(out.secrets)}; granting one is a deliberate edit"
        )
    return Learned(tuple(out.rules), tuple(out.rows), tuple(skipped))


class _Out:
    def __init__(self) -> None:
        self.rules: list[LearnedRule] = []
        self.rows: list[tuple[str, str, str]] = []
        self.skipped: list[str] = []
        self.secrets: list[str] = []
        self._lines: set[str] = set()

    def add(
        self,
        family: str,
        block: str,
        line: str,
        note: str,
        where: str,
        group: str = "",
        *,
        secret: bool = False,
    ) -> None:
        if line in self._lines:
            return
        self._lines.add(line)
        # ``where`` comes from the program (even forged): a short, printable note only.
        where = "".join(c if c.isprintable() else "?" for c in where[:200]) or "?"
        rule = LearnedRule(block, line, f"learned: {note} {where}", group or None, secret)
        self.rules.append(rule)
        self.rows.append(("⚠ secret" if secret else family, line, where))
        if secret:  # named in the summary: the path, or the variable's name
            value = line.partition("=")[2]
            self.secrets.append(value.partition("=")[0] if line.startswith("env=") else value)


def _env(out: _Out, events: Sequence[Event], context: Context) -> None:
    for event in sorted(events, key=lambda e: e.name):
        if event.name in context.host_names and _NAME.fullmatch(event.name):
            line = f"env={event.name}=${{{event.name}}}"
            secret = secret_variable(event.name)
            out.add("env", "envs", line, "read by", event.where, secret=secret)


def _files(out: _Out, events: Sequence[Event], context: Context) -> None:
    rules, skipped = file_rules(events, context)
    for rule in rules:
        out.add("files", "files", rule.line, rule.note, rule.where, secret=rule.secret)
    out.skipped += skipped


def _net(out: _Out, events: Sequence[Event]) -> None:
    by_target: dict[tuple[str, str, str], tuple[set[int], Event]] = {}
    for event in events:
        if event.port == 0:
            # No port-0 rule: it would name no port. The program picks no port either,
            # so a rule cannot say which one; the user decides (see docs/learning.md).
            out.skipped.append(f"{event.name} port 0 (any free port) is not learned")
            continue
        if not _learnable_host(event.name):
            out.skipped.append(f"{event.name!r}: not a host name a rule can hold")
            continue
        ports, first = by_target.setdefault((event.name, event.proto, event.access), (set(), event))
        ports.add(event.port)
        for address in _defaulted(event):
            # A name leading to loopback, the LAN...: its rule alone would not reach it
            # next run (the SSRF-safe defaults), the address must be named as well.
            ports, _ = by_target.setdefault((address, event.proto, event.access), (set(), event))
            ports.add(event.port)
    for (host, proto, direction), (ports, first) in by_target.items():
        listed = ",".join(str(p) for p in sorted(ports))
        verb = "bound by" if direction == "IN" else "connected by"
        out.add(
            "net", "socket", f"net=ALLOW|{proto}|{host}|{listed}|{direction}", verb, first.where
        )


def _defaulted(event: Event) -> list[str]:
    """The addresses of a name connected to that only a rule naming them reaches."""
    from pysandboxes._policy import netaddr
    from pysandboxes._policy.netclasses import Classifier, names_loopback

    if event.access != "OUT" or netaddr.parse_address(event.name) is not None:
        return []
    if names_loopback(event.name):
        return []  # localhost names loopback itself
    classifier = Classifier()
    found: list[str] = []
    for text in event.addresses[:16]:
        parsed = netaddr.parse_address(text)
        if parsed is not None:
            address = netaddr.reached(parsed, outgoing=True)
            if classifier.classify(address) is not None and str(address) not in found:
                found.append(str(address))
    return found


def _learnable_host(name: str) -> bool:
    """Whether a ``net=`` rule can hold ``name``, as the rule parser reads it."""
    from pysandboxes._policy.netaddr import parse_network
    from pysandboxes._policy.netrules import is_host_name

    # One address or one name: a network ("127.0.0.1/0" is every IPv4 address) is
    # nothing a program connects to, only what a forged event would ask for.
    return "/" not in name and (parse_network(name) is not None or is_host_name(name))


def import_group(module: str) -> str:
    """The header a learned ``python-import=`` goes under."""
    if module in DANGEROUS_MODULES:
        return GROUPS[0]
    if module in DEPRECATED_MODULES:
        return GROUPS[2]
    if module in sys.stdlib_module_names:  # "_x" is not standard for its underscore
        return GROUPS[1]
    return GROUPS[3]


def _imports(out: _Out, events: Sequence[Event]) -> None:
    modules = [e for e in events if e.access == "module" and _MODULE.fullmatch(e.name)]
    for group in GROUPS:
        for event in sorted(modules, key=lambda e: e.name):
            if import_group(event.name) == group:
                line = f"python-import={event.name}"
                out.add("import", "import", line, "imported by", event.where, group)
    for event in events:
        if event.access == "native":
            line = "python-api=ALLOW:native"
            out.add("call", "api", line, "imported by", event.where, "⚠ native")


def _calls(out: _Out, events: Sequence[Event]) -> None:
    for event in sorted(events, key=lambda e: (e.access, e.name)):
        name, category = event.name, event.access
        if SENSITIVE_FUNCTIONS.get(name) != category or not _QUALNAME.fullmatch(name):
            # A function the registry does not file under that category: the guards never
            # report one, so the event is forged or stale; a whole category is no answer.
            out.skipped.append(f"{name!r} ({category}): not a registered function")
            continue
        if name in registry.SUBINTERPRETER_FUNCTIONS:  # out of the Python layer's reach
            out.skipped.append(f"{name!r}: a subinterpreter is never learned")
            continue
        group = f"⚠ {category}" if category in DANGEROUS_CATEGORIES else category
        out.add("call", "api", f"python-api=ALLOW:{name}", "called by", event.where, group)


def _results(out: _Out, events: Sequence[Event]) -> None:
    """Partial mode's results that held objects: objects mode, and the classes that are
    not the application's own by name (the trusted side saw them; see ``_host.partial``)."""
    if not events:
        return
    out.add("result", "remote_result", "remote-result-mode=objects", "returned by", events[0].where)
    for event in sorted(events, key=lambda e: e.name):
        if event.access == "named" and _QUALNAME.fullmatch(event.name) and "." in event.name:
            line = f"remote-result-class={event.name}"
            out.add("result", "remote_result", line, "returned by", event.where)


_DEFAULTED = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):-[^}$]*\}")


def drop_contradictions(learned: Learned, text: str) -> Learned:
    """Leave out a learned ``expose-rw=X`` where the file says ``expose-ro=X`` (or the
    reverse): the file would then contradict itself. The user widens the line instead."""
    lines = {line.split("#", 1)[0].strip().replace(" ", "") for line in text.splitlines()}
    # "${VIRTUAL_ENV}/x" (as learned before) and "${VIRTUAL_ENV:-/venv}/x" name one path.
    present = lines | {_DEFAULTED.sub(r"${\1}", line) for line in lines}
    flipped = {"expose-rw": "expose-ro", "expose-ro": "expose-rw"}
    rules: list[LearnedRule] = []
    rows: list[tuple[str, str, str]] = []
    skipped = list(learned.skipped)
    for rule, row in zip(learned.rules, learned.rows, strict=True):
        key, _, value = rule.line.partition("=")
        other = f"{flipped[key]}={value}" if key in flipped else ""
        if other and (other in present or _DEFAULTED.sub(r"${\1}", other) in present):
            skipped.append(f"'{other}' is in the file: change it to '{rule.line}' yourself")
            continue
        rules.append(rule)
        rows.append(row)
    return Learned(tuple(rules), tuple(rows), tuple(skipped))


def drop_granted_imports(learned: Learned, granted: frozenset[str]) -> Learned:
    """Leave out a learned ``python-import=X`` the new file's start already grants (the
    template's modules of the standard library): the file would say it twice."""
    kept = [
        (rule, row)
        for rule, row in zip(learned.rules, learned.rows, strict=True)
        if rule.line.removeprefix("python-import=") not in granted
        or not rule.line.startswith("python-import=")
    ]
    return Learned(tuple(rule for rule, _ in kept), tuple(row for _, row in kept), learned.skipped)
