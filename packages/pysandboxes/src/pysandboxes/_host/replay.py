"""Replay a decision log against the rules in force: what would change.

Each access a log recorded (``_wire.decisions``) is judged again by the same verdict
functions the guards use, with the rules given (the rule file found, a
``--pysandboxes-config``, extra rules). What the sandbox grants without a rule (the
interpreter's files, the private temporary directory) is no rule's to change and is kept
as it was; ``eval`` decisions and refusals no rule can lift (a raw socket, the sandbox's
own modules) are not judged again. The result lists the accesses now refused that were
allowed (what a narrowed rule breaks) and those now allowed that were refused, each with
the line that now decides.
"""

from __future__ import annotations

from pysandboxes._record import record
from pysandboxes._wire.decisions import IMPLICIT, NO_RULE, read_log_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from pysandboxes._policy.model import Origin, Policy, Verdict
    from pysandboxes._wire.decisions import Decision


class LogUnreadable(ValueError):
    """A line of the log is not a decision this version can read."""


@record
class Change:
    """An access the new rules judge otherwise.

    Attributes:
        decision: the access as the log recorded it (``count``: all of them).
        rule: the line that now decides (``file:line: text``), or why none does.
    """

    decision: Decision
    rule: str


@record
class Replay:
    """What the rules in force would change.

    Attributes:
        judged: distinct accesses judged again.
        now_refused: allowed in the log, refused now.
        now_allowed: refused in the log, allowed now.
        skipped: distinct accesses not judged again (see module docs).
    """

    judged: int
    now_refused: tuple[Change, ...]
    now_allowed: tuple[Change, ...]
    skipped: int = 0


def read_log(lines: Iterable[str], name: str) -> list[Decision]:
    """The decisions of a log, identical ones summed (``name``: the log, for errors).

    Raises:
        LogUnreadable: naming the first line that is not a decision.
    """
    merged: dict[tuple[str, str, str, bool], Decision] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            decision = read_log_line(line)
        except ValueError as exc:
            raise LogUnreadable(f"{name}, line {number}: {exc}") from None
        key = (decision.kind, decision.target, decision.access, decision.allowed)
        known = merged.get(key)
        if known is None:
            merged[key] = decision
        else:
            from pysandboxes._record import replace

            merged[key] = replace(known, count=known.count + decision.count)
    return list(merged.values())


def replay(decisions: Iterable[Decision], policy: Policy) -> Replay:
    """Judge ``decisions`` against ``policy``."""
    judges = Judges(policy)
    refused: list[Change] = []
    allowed: list[Change] = []
    judged = skipped = 0
    for decision in decisions:
        verdict = None if decision.rule == IMPLICIT else judges.judge(decision)
        if verdict is None:
            skipped += 1
            continue
        judged += 1
        now, origin = verdict
        if now != decision.allowed:
            shown = f"{origin.source}:{origin.line}: {origin.text}" if origin else NO_RULE
            fix = fix_for(decision) if not now and origin is None else ""
            if fix:
                shown += f"; '{fix}' would allow it"
            (allowed if now else refused).append(Change(decision, shown))
    return Replay(judged, tuple(refused), tuple(allowed), skipped)


class Judges:
    """The verdict functions of a policy, made once."""

    def __init__(self, policy: Policy) -> None:
        from pysandboxes._policy.judge import ApiJudge, FileJudge, ImportJudge, NetJudge

        self._policy = policy
        protected = [*policy.rule_files]
        if policy.audit_log is not None:
            protected.append(policy.audit_log.value)
        self._files = FileJudge(policy.expose, policy.ignore, protected)
        self._net = NetJudge(policy.net)
        self._imports = ImportJudge(policy)
        self._api = ApiJudge(policy)

    def judge(self, decision: Decision) -> tuple[bool, Origin | None] | None:
        """``(allowed, deciding rule)``, or ``None`` when no rule can decide it."""
        kind, target, access = decision.kind, decision.target, decision.access
        if kind == "file":
            from pysandboxes._policy.model import access_named

            if not target.startswith("/"):
                return None
            # "search", "probe": reads (of a directory of sys.path, of a file's metadata).
            named = access_named("read" if access in ("search", "probe") else access)
            return _pair(self._files.judge(target, named))
        if kind == "env":
            from pysandboxes._policy.globs import name_matches

            rule = next((r for r in self._policy.env if name_matches(r.name, target)), None)
            return (rule is not None, rule.origin if rule is not None else None)
        if kind == "import":
            if target.startswith("pysandboxes"):
                return None
            if access == "native":
                return _pair(self._api.judge("ctypes.CDLL"))  # the native category's
            return _pair(self._imports.judge(target))
        if kind == "call":
            return _pair(self._api.judge(target))
        if kind == "net":
            return self._address(target, access)
        if kind == "lookup":
            return self._lookup(target)
        return None  # eval: judged by the rules of dynamic code, not replayed here

    def _address(self, target: str, direction: str) -> tuple[bool, Origin | None] | None:
        proto, _, rest = target.partition(":")
        host, _, port = rest.rpartition(":")
        if proto not in ("tcp", "udp") or not port.isdigit() or not host:
            return None
        from pysandboxes._policy import netaddr

        addresses = [host] if netaddr.parse_address(host) is not None else _resolve(host)
        if not addresses:
            rule = next((r for r in self._policy.net if r.host == host.lower()), None)
            return (False, rule.origin if rule is not None else None)
        verdicts = [self._net.judge(proto, ip, int(port), direction) for ip in addresses]
        refused = next((v for v in verdicts if not v.allowed), None)
        return _pair(refused if refused is not None else verdicts[0])

    def _lookup(self, name: str) -> tuple[bool, Origin | None]:
        net = [r for r in self._policy.net if r.allow and "OUT" in r.directions]
        if not all(
            r.host is not None or all(n.num_addresses == 1 for n in r.networks) for r in net
        ):
            return (True, None)  # an unpinned rule: names are not judged
        rule = next((r for r in net if r.host == name.lower().rstrip(".")), None)
        return (rule is not None, rule.origin if rule is not None else None)


def fix_for(decision: Decision) -> str:
    """The rule line that would allow a refused access, as the guards suggest it."""
    kind, target, access = decision.kind, decision.target, decision.access
    if kind == "file":
        key = "expose-ro" if access in ("read", "execute") else "expose-rw"
        return f"{key}={target}"
    if kind == "env":
        return f"env={target}=${{{target}}}"
    if kind == "import":
        return f"python-import={target}" if access == "module" else "python-api=ALLOW:native"
    if kind == "call":
        return f"python-api=ALLOW:{target}"
    if kind == "net":
        proto, _, rest = target.partition(":")
        host, _, port = rest.rpartition(":")
        return f"net=ALLOW|{proto}|{host}|{port}|{access}"
    if kind == "lookup":
        return f"net=ALLOW|tcp|{target}|443|OUT"
    return ""


def _pair(verdict: Verdict) -> tuple[bool, Origin | None]:
    return verdict.allowed, verdict.rule


def _resolve(host: str) -> list[str]:
    import socket

    try:
        answers = socket.getaddrinfo(host, None)
    except OSError:
        return []
    return list(dict.fromkeys(str(answer[4][0]).split("%")[0] for answer in answers))
