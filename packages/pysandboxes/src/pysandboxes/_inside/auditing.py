"""The ``Auditing`` enforcer: each refusal goes to the decision log, then to the enforcer
in force (``Enforcing``), which decides.

What a refusal is logged as says how much it matters: a library's look at a file whose
failure it catches is a ``probe``, a bind to any port whose failure is caught a ``probe``
too, a native module its importer goes on without a ``fallback``; the trusted side's
summary counts or leaves those out (``_host.auditlog``), the log keeps every one.
"""

from __future__ import annotations

import os

from pysandboxes._inside.decisions import LOGS, DecisionLog, rule_fields
from pysandboxes._inside.guards.fallbacks import failure_caught, import_falls_back
from pysandboxes._policy.model import Access
from pysandboxes._wire.decisions import origin_fields as _origin_fields

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._inside.decisions import _Entry
    from pysandboxes._inside.enforce import Connection, Enforcer, FileAccess, Messages
    from pysandboxes._policy.judge import ApiJudge
    from pysandboxes._policy.model import Policy, Verdict
    from pysandboxes._wire.spec import AuditSpec, LaunchSpec


#: The file functions that only look (a probe, when the caller catches their failure).
_LOOKS = frozenset({"os.stat", "os.lstat", "os.access"})


class Auditing:
    """Records each refusal in the decision log, then lets ``inner`` decide."""

    def __init__(
        self, inner: Enforcer, log: DecisionLog, messages: Messages, api: ApiJudge
    ) -> None:
        self._inner = inner
        self._log = log
        self._messages = messages
        self._api = api
        self.hides_entries = inner.hides_entries
        self.stands_in_for_native = inner.stands_in_for_native
        # Every access is a decision to log: none is let through unjudged.
        self.learned: frozenset[tuple[str, Access, str]] = frozenset()
        self.learned_modules: frozenset[str] = frozenset()

    def refuse_file(self, report: FileAccess, verdict: Verdict) -> None:
        """Record, then refuse through ``inner``: not the interpreter's byte-code cache,
        nor a ``mkdir`` of a directory that exists (it would fail all the same)."""
        if report.api == "os.mkdir" and self._log.exists(report.real):
            self._inner.refuse_file(report, verdict)
            return
        given = verdict.fix if verdict.fix is None or not verdict.fix.startswith("<") else None
        fix = self._messages.suggestion(given).strip()
        fix = fix[len("Add '") :].partition("' to ")[0] if fix.startswith("Add '") else ""
        target = report.real if report.real.startswith("/") else report.named
        if "/__pycache__" not in target:  # the interpreter's byte-code cache: it copes
            probing = report.api in _LOOKS and report.access is Access.READ and failure_caught()
            access = report.access.value
            self._log.refused(
                "file", target, access, rule_fields(verdict.rule), fix, probing=probing
            )
        self._inner.refuse_file(report, verdict)

    def refuse_call(self, qualname: str, category: str, message: str) -> None:
        """Record, then refuse through ``inner``."""
        verdict = self._api.judge(qualname)
        fix = "" if verdict.rule is not None else f"python-api=ALLOW:{qualname}"
        self._log.refused("call", qualname, category, rule_fields(verdict.rule), fix)
        self._inner.refuse_call(qualname, category, message)

    def refuse_connection(
        self, message: str, address: str, rule: str | None, target: Connection | None = None
    ) -> None:
        """Record, then refuse through ``inner``."""
        shown = _named_rule(rule)
        if target is not None and target.direction == "lookup":
            fix = f"net=ALLOW|tcp|{target.host}|443|OUT"
            self._log.refused("lookup", target.host, "OUT", shown, fix if rule is None else "")
        elif target is not None:
            name = f"{target.proto}:{target.host}:{target.port}"
            fix = target.fix or (
                f"net=ALLOW|{target.proto}|{target.host}|{target.port}|{target.direction}"
            )
            access = target.direction
            if target.direction == "IN" and target.port == 0 and failure_caught():
                # A bind to any free port whose failure the caller catches: a probe (is
                # IPv6 there?), answered as on a host without it. Logged, never summarised.
                access = "probe"
            self._log.refused("net", name, access, shown, fix if rule is None else "")
        else:
            self._log.refused("net", address, "OUT", shown, "")
        self._inner.refuse_connection(message, address, rule, target)

    def refuse_import(self, module: str, message: str, category: str | None = None) -> None:
        """Record, then refuse through ``inner``."""
        access = "native" if category else "module"
        fix = "" if module.startswith("pysandboxes") else f"python-import={module}"
        if category:
            fix = f"python-api=ALLOW:{category}"
        if category == "native" and import_falls_back():
            # Caught by the code that asked (pytest's `import readline` workaround): it goes
            # on as with a Python built without that module. Logged, never summarised.
            access = "fallback"
        self._log.refused("import", module, access, _origin_fields(None, 0, ""), fix)
        self._inner.refuse_import(module, message, category)


def _named_rule(rule: str | None) -> tuple[str, str]:
    """``(rule, rule_text)`` from a guard's ``str(Origin)``: ``'text' from file(line)``."""
    if rule is None:
        return _origin_fields(None, 0, "")
    text, found, where = rule.rpartition(" from ")
    source, _, line = where.rstrip(")").rpartition("(")
    if not found or not line.isdigit():
        return rule, ""
    return _origin_fields(source, int(line), text.strip("'"))


def start_log(
    spec: AuditSpec, enforcer: Enforcer, api: ApiJudge, policy: Policy, launch: LaunchSpec
) -> tuple[Enforcer, DecisionLog]:
    """The decision log of this process, and the enforcer that records refusals in it;
    sends what is left at exit. Called before the guards are installed."""
    import atexit

    from pysandboxes._inside.enforce import Messages
    from pysandboxes._policy.judge import ImportJudge

    os.set_inheritable(spec.fd, False)  # the programs it starts must not write decisions
    session = launch.program.kind == "repl"
    log = DecisionLog(spec.fd, os.getcwd(), allowed_too=spec.allowed_too, session=session)
    if spec.allowed_too:
        log.imports = ImportJudge(policy)
    if spec.logged:  # a variable the sandbox lacks is no news worth a summary
        _watch_environment(log, policy)
    atexit.register(log.flush)
    LOGS.append(log)
    messages = Messages(launch.rule_file, launch.rule_dir)
    return Auditing(enforcer, log, messages, api), log


def _watch_environment(log: DecisionLog, policy: Policy) -> None:
    """Report reads of variables: allowed when the sandbox has it, refused when not."""
    from pysandboxes._inside.guards.env import watch_environ
    from pysandboxes._policy.globs import name_matches

    given = frozenset(os.environ)
    rules = policy.env

    def read(name: str) -> _Entry | bool:
        """Log a read; what its repeats need: its entry's count raised, or nothing when
        only refusals are logged. A refusal is logged each time (and sent at once)."""
        if name not in given:
            log.refused("env", name, "read", _origin_fields(None, 0, ""), f"env={name}=${{{name}}}")
            return False
        if not log.allowed_too:
            return True
        origin = next((r.origin for r in rules if name_matches(r.name, name)), None)
        entry = log.allowed("env", name, "read", origin)
        return False if entry is None else entry

    watch_environ(read)
