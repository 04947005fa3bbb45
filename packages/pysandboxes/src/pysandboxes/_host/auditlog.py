"""The decision log, trusted side: open it, write what the child reports, sum it up.

The log is opened here, before the sandboxed process starts, and only here: the child
gets the write end of a pipe (``_wire.spec.AuditSpec``), never the log or its path. A
thread reads the pipe as the child writes, decodes each line (``_wire.codec``) and
appends one line per decision (``_wire.decisions.log_line``), each with one ``write`` of
a file opened ``O_APPEND``: a run killed at any point leaves whole lines behind. The file
is also a protected file of the run (the Python layer refuses changes to it, a mount
namespace binds it read-only), so the program cannot rewrite what was logged.

At exit ``summary`` says, on stderr, how many accesses were refused, of what, the first
few with the rule line that would allow each, and where the full log is.
"""

from __future__ import annotations

import os
import time

from pysandboxes._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._wire.decisions import Decision
    from pysandboxes._wire.spec import LaunchSpec

#: Refusals the summary shows one by one.
SHOWN = 10
#: Distinct refused accesses counted for the summary's "... and N more" (past it: "N+").
_COUNTED = 100_000
_READ = 1 << 16


@record
class Refusals:
    """What the child refused, for the summary.

    Attributes:
        total: how many accesses were refused (repeats included).
        kinds: ``(kind, count)`` of the refusals, most first.
        first: the first refusals (``SHOWN`` at most), one per target.
        targets: how many distinct accesses (kind, target, access) were refused.
        dropped: wire lines that were not well-formed decisions.
        swallowed: the refusals that did not end the program as its uncaught exception
            (whose traceback said it all): the summary is shown when there is one.
        probes: libraries' optional probes refused (a look at a file whose failure the
            library caught): counted, not listed.
    """

    total: int
    kinds: tuple[tuple[str, int], ...]
    first: tuple[Decision, ...]
    dropped: int = 0
    swallowed: int = 0
    targets: int = 0
    probes: int = 0


def open_log(path: str) -> int:
    """The log's descriptor, appending (created ``0600`` when missing); not inheritable.

    Raises:
        OSError: the file cannot be opened for writing.
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    return os.open(path, flags, 0o600)


def _now() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def _probe(refusal: Decision) -> bool:
    """Whether a refusal was a library's optional probe: a look at a file whose failure
    the library caught (it goes on without the file). The summary counts these in one
    line; the log keeps each."""
    return refusal.kind == "file" and refusal.access == "probe"


def _moot(refusal: Decision) -> bool:
    """Whether a refusal changed nothing the program could see: a read of a file or a
    variable that is not there outside the sandbox either (sysconfig and importlib probe
    many), a native module its importer goes on without (a Python built without it
    looks the same), a probing bind to any free port whose failure is caught (a host
    without IPv6 looks the same), at the prompt, the import system's search of a
    directory of ``sys.path`` it may not read (an empty directory looks the same). The
    program met what it may meet without the sandbox, so the summary leaves it out; the
    log keeps it. Checked here, on the trusted side. A denial at a prompt is counted
    once, by the refusal the program meets after it."""
    if refusal.rule == "prompt":
        return True
    if refusal.kind == "env":
        return refusal.target not in os.environ
    if refusal.kind == "import":
        return refusal.access == "fallback"  # the importer went on without it, as it may
    if refusal.kind == "net":
        return refusal.access == "probe"  # a bind to any port, its failure caught
    if refusal.kind == "file" and refusal.access == "search":
        return True  # the import system went on to the next directory of sys.path
    if refusal.kind == "file" and refusal.access in ("read", "probe"):
        return refusal.target.startswith("/") and not os.path.lexists(refusal.target)
    return False


class LogWriter:
    """Reads the decision pipe in a thread and appends each decision to the log."""

    def __init__(self, pipe: int, log: int | None, mode: str, *, keep_allowed: bool = True) -> None:
        self._pipe = pipe
        self._log = log
        self.mode = mode
        self._keep_allowed = keep_allowed
        self._total = 0
        self._kinds: dict[str, int] = {}
        self._first: dict[tuple[str, str, str], Decision] = {}
        self._targets: set[tuple[str, str, str]] = set()
        self._dropped = 0
        self._surfaced = 0
        self._probes: set[tuple[str, str]] = set()
        import threading  # the waiter's, or partial mode's: python-sb's own start needs none

        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        pending = b""
        decode = None  # imported with the first decision: a run with none never needs it
        while True:
            try:
                chunk = os.read(self._pipe, _READ)
            except OSError:
                chunk = b""
            if not chunk:
                break
            if decode is None:
                from pysandboxes._wire.codec import decode_decisions as decode
            found, pending, dropped = decode(pending + chunk)
            self.write(found, dropped)
        if pending.strip():
            self._dropped += 1  # the child died while writing a line: never half a line
        try:
            os.close(self._pipe)
        except OSError:
            pass

    def write(self, decisions: list[Decision], dropped: int = 0) -> None:
        """Append ``decisions`` to the log (also called for decisions the trusted side
        makes itself); one ``write`` per line."""
        with self._lock:
            self._dropped += dropped
            stamp = _now()
            for decision in decisions:
                if decision.surfaced:
                    self._surfaced += 1
                    self._first.pop((decision.kind, decision.target, decision.access), None)
                    continue
                if not decision.allowed and not _moot(decision):
                    if not _probe(decision):
                        self._count(decision)
                    elif len(self._probes) < _COUNTED:  # counted in one line
                        self._probes.add((decision.target, decision.where))
                elif not self._keep_allowed:
                    continue
                if self._log is None:
                    continue
                from pysandboxes._wire.decisions import log_line

                try:
                    os.write(self._log, log_line(decision, stamp, self.mode).encode())
                except OSError:
                    return  # a full disk: the program runs on, the summary still counts

    def _count(self, decision: Decision) -> None:
        self._total += decision.count
        self._kinds[decision.kind] = self._kinds.get(decision.kind, 0) + decision.count
        key = (decision.kind, decision.target, decision.access)
        if len(self._targets) < _COUNTED:
            self._targets.add(key)
        if len(self._first) < SHOWN and key not in self._first:
            self._first[key] = decision

    def finish(self, patience: float = 2.0) -> Refusals:
        """Wait for the pipe's end (a descendant may still hold it: a little), then
        close the log; the refusals, for the summary."""
        self._thread.join(timeout=patience)
        with self._lock:
            kinds = tuple(sorted(self._kinds.items(), key=lambda item: (-item[1], item[0])))
            swallowed = self._total - min(self._surfaced, self._total)
            first = tuple(self._first.values())
            targets = len(self._targets)
            probes = len(self._probes)
            return Refusals(self._total, kinds, first, self._dropped, swallowed, targets, probes)

    def close(self) -> None:
        """Close the log's descriptor."""
        with self._lock:
            if self._log is None:
                return
            try:
                os.close(self._log)
            except OSError:
                pass
            self._log = None


#: How each mode names the ways to get a log and to silence the summary.
_WAYS = {
    "complete": ("python-sb", "--audit-log=FILE", "--quiet-refusals"),
    "partial": ("pysandboxes", "sandboxes(audit_log=FILE)", "sandboxes(quiet_refusals=True)"),
}


def summary(refusals: Refusals, log: str | None, rule_file: str, mode: str = "complete") -> str:
    """The lines for stderr at exit; ``""`` when nothing was refused but, perhaps, the
    refusal whose traceback ended the program. ``log``: the log's
    path, ``None`` when the run kept none (the summary then says how to get one).
    Libraries' optional probes are one line of their own, never a hint each."""
    name, get_log, quiet = _WAYS[mode]
    probes = ""
    if refusals.probes:
        plural = "probe was" if refusals.probes == 1 else "probes were"
        see = "the log lists them" if log is not None else f"{get_log} to see them"
        probes = (
            f"{refusals.probes} optional {plural} refused, harmless (a library looked for a "
            f"file and went on without it): {see}"
        )
    if not refusals.swallowed or not refusals.first:
        return f"{name}: {probes}" if probes else ""
    from pysandboxes._policy.secrets import DOCS

    kinds = ", ".join(f"{count} {kind}" for kind, count in refusals.kinds)
    plural = "access was" if refusals.total == 1 else "accesses were"
    lines = [f"{name}: {refusals.total} {plural} refused by the sandbox ({kinds}):"]
    for decision in refusals.first:
        where = f" at {_printable(decision.where)}" if decision.where else ""
        what = f"  {decision.kind} {_printable(decision.target)} ({decision.access}){where}"
        if decision.fix and _secret(decision):
            what += f": a secret, no grant suggested (see {DOCS})"
        elif decision.fix:
            what += f": add '{_printable(decision.fix)}' to {rule_file} to allow it"
        elif decision.rule_text:
            what += f": refused by '{_printable(decision.rule_text)}' ({decision.rule})"
        lines.append(what)
    more = max(refusals.targets, len(refusals.first)) - len(refusals.first)
    if more:  # other accesses refused (the header's count holds the repeats too)
        plus = "+" if refusals.targets >= _COUNTED else ""
        lines.append(f"  ... and {more}{plus} more")
    if probes:
        lines.append(f"  and {probes}")
    if log is not None:
        lines.append(f"  the full log: {log}")
    else:
        lines.append(f"  for the full log, run again with {get_log}")
    lines.append(f"  ({quiet}, or quiet-refusals=true in the rule file, hides this)")
    return "\n".join(lines)


def _secret(decision: Decision) -> bool:
    """Whether the refused access was of a secret: its grant is a deliberate edit (the
    learned line, commented out), never a hint to paste."""
    from pysandboxes._policy.secrets import secret_name, secret_path

    if decision.kind == "env":
        return secret_name(decision.target)
    return decision.kind == "file" and secret_path(decision.target)


def _printable(text: str) -> str:
    """What the child sent, shown on a terminal: no control characters."""
    return "".join(c if c.isprintable() else "?" for c in text)[:300]


@record
class AuditRun:
    """A run's decision log being started: the pipe, the log, what to show at exit.

    Attributes:
        read_fd: the trusted side's end of the decision pipe.
        child_fd: the child's end (closed here once the child is started).
        log_fd: the log's descriptor, ``-1`` when the run keeps no log (the pipe then
            only counts refusals, for the summary).
        path: the log's path, ``""`` when none.
        keep_allowed: ``audit-log-level=all``.
        quiet: ``quiet-refusals``: no summary.
        rule_file: the rule file as shown in messages.
    """

    read_fd: int
    child_fd: int
    log_fd: int
    path: str
    keep_allowed: bool
    quiet: bool
    rule_file: str

    def close_child_end(self) -> None:
        """After the spawn: only the child may hold the write end."""
        try:
            os.close(self.child_fd)
        except OSError:
            pass

    def writer(self, mode: str) -> LogWriter:
        """Start reading the pipe (``mode``: ``complete`` or ``partial``)."""
        log = self.log_fd if self.log_fd >= 0 else None
        return LogWriter(self.read_fd, log, mode, keep_allowed=self.keep_allowed)

    def conclude(self, writer: LogWriter, *, patience: float = 2.0) -> None:
        """Once the child ended: close the log, print the summary (unless quiet)."""
        refusals = writer.finish(patience)
        writer.close()
        log = self.path or None
        text = "" if self.quiet else summary(refusals, log, self.rule_file, writer.mode)
        if text:
            import sys

            try:
                sys.stdout.flush()
                print(text, file=sys.stderr, flush=True)
            except (OSError, ValueError):
                pass

    def argument(self) -> str:
        """The run as one command-line argument of the waiter: its numbers, then the log's
        path and the rule file's name, each after its length (no json: the waiter of every
        run reads it, and importing json costs it milliseconds)."""
        numbers = (self.read_fd, self.log_fd, int(self.keep_allowed), int(self.quiet))
        return ",".join(map(str, numbers)) + "".join(
            f",{len(text)}:{text}" for text in (self.path, self.rule_file)
        )


def parse_argument(argument: str) -> AuditRun:
    """Read ``AuditRun.argument``'s output (from the launcher, the trusted side)."""
    read_fd, log_fd, keep_allowed, quiet, rest = argument.split(",", 4)
    texts: list[str] = []
    for _ in range(2):
        size, _, rest = rest.partition(":")
        texts.append(rest[: int(size)])
        rest = rest[int(size) + 1 :]  # the text, then the comma before the next one
    path, rule_file = texts
    return AuditRun(
        int(read_fd), -1, int(log_fd), path, keep_allowed == "1", quiet == "1", rule_file
    )


def start_audit(spec: LaunchSpec) -> tuple[LaunchSpec, AuditRun | None]:
    """Open the decision log and its pipe for a run that has a Python layer and does not
    learn; return the spec that tells the child, and the run (``None``: no pipe needed).

    Raises:
        ConfigSyntaxError: the log cannot be opened for writing.
    """
    from pysandboxes._record import replace
    from pysandboxes._wire.spec import AuditSpec

    policy = spec.policy
    setting, quiet = policy.audit_log, policy.quiet_refusals
    quiet_value = quiet is not None and quiet.value
    python_layer = spec.provider != "none" and policy.python_layer
    if spec.learning is not None or not python_layer or (setting is None and quiet_value):
        return spec, None
    log_fd, path = -1, ""
    if setting is not None:
        path = setting.value
        try:
            log_fd = open_log(path)
        except OSError as exc:
            from pysandboxes.errors import ConfigIssue, ConfigSyntaxError

            origin = setting.origin
            why = f"'{origin.text}': the log cannot be written ({exc.strerror or exc})"
            raise ConfigSyntaxError([ConfigIssue(origin.source, origin.line, why)]) from None
    level = policy.audit_log_level
    keep_allowed = setting is not None and (level is None or level.value == "all")
    read_fd, child_fd = os.pipe()
    run = AuditRun(read_fd, child_fd, log_fd, path, keep_allowed, quiet_value, spec.rule_file)
    return replace(spec, audit=AuditSpec(child_fd, keep_allowed, setting is not None)), run
