"""The decision log, sandboxed side: count each decision, send them in batches.

The guards tell ``DecisionLog`` what they allowed (``file``, ``allowed``), and the
``Auditing`` enforcer (``_inside.auditing``) what they refused, before the enforcer in
force decides. The child never writes the log: it sends ``_wire.decisions`` lines over a
pipe the trusted side handed it, which writes the log (``_host.auditlog``).

The allowed path must stay cheap: a decision already seen costs a dictionary look-up and
an increment, and no system call. A decision first seen is queued with the program's
line, and goes out in one ``os.write`` per batch: when 64 are queued, at a refusal (sent
at once, with what was queued before it). The repeats counted since a decision's last
line go out with a batch made a second or more after the previous full one, after each
call of partial mode, and at exit.
"""

from __future__ import annotations

import os
import sys
from _thread import get_ident
from time import monotonic

from pysandboxes._inside.recorder import (
    exists,
    program_site,
    session_framework,
    typed_by_the_user,
)
from pysandboxes._policy.model import Access
from pysandboxes._record import replace
from pysandboxes._wire.decisions import (
    IMPLICIT,
    MAX_DISTINCT,
    MAX_LINE,
    Decision,
    encode_decision,
)
from pysandboxes._wire.decisions import origin_fields as _origin_fields

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from pysandboxes._policy.judge import ImportJudge
    from pysandboxes._policy.model import ExposeRule, Origin

#: The logs of this process (one, unless a test makes more): sent after each call of
#: partial mode (``flush_all``), whose child lives on between calls.
LOGS: list[DecisionLog] = []
#: Raised by the runner as it prints an uncaught refusal (see ``DecisionLog.surfaced``).
SURFACED_EVENT = "pysandboxes.surfaced"
_QUEUED = 64
_PERIOD = 1.0
_ACCESSES = (Access.READ, Access.WRITE, Access.CREATE, Access.DELETE, Access.EXECUTE)


class _Entry:
    """A decision and how often it was made: in all, and as reported so far."""

    __slots__ = ("count", "first", "sent")

    def __init__(self, first: Decision, count: int) -> None:
        self.first = first
        self.count = count
        self.sent = 0


def rule_fields(origin: Origin | None) -> tuple[str, str]:
    """``(rule, rule_text)`` of a decision made by ``origin`` (``None``: no rule)."""
    if origin is None:
        return _origin_fields(None, 0, "")
    return _origin_fields(origin.source, origin.line, origin.text)


class DecisionLog:
    """Counts decisions and sends them to the trusted side (see module docs).

    ``allowed_too``: ``audit-log-level=all``; with ``refused`` the guards report nothing
    allowed (and pay nothing for it).
    """

    def __init__(self, fd: int, cwd: str, *, allowed_too: bool, session: bool = False) -> None:
        self._fd = fd
        # An interactive session: the shell's own probes are not the user's refusals.
        self._session = session_framework() if session else None
        self._cwd = cwd.rstrip("/") + "/"
        self.allowed_too = allowed_too
        self._entries: dict[tuple[object, ...], _Entry] = {}
        # Allowed file accesses by access, then real path: the hot path's own index.
        self._files: dict[Access, dict[str, _Entry]] = {a: {} for a in _ACCESSES}
        self._queued: list[_Entry] = []  # first seen or refused since the last batch
        self._last = monotonic()
        self._busy: set[int] = set()
        self._main = get_ident()
        self._last_refusal: _Entry | None = None  # the main thread's last refusal
        self._pid = os.getpid()
        self._lstat = os.lstat  # the original: taken before the file wrappers
        self._modules: set[str] = set(sys.modules)
        self.imports: ImportJudge | None = None  # judges the modules seen loaded, at flush
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        """A forked child reports its own decisions from now on, not its parent's."""
        self._pid = os.getpid()
        for entry in self._entries.values():
            entry.sent = entry.count
        self._queued.clear()
        self._busy.clear()

    # -- recording ---------------------------------------------------------------------

    def file(self, real: str, access: Access, rule: Callable[[str], ExposeRule | None]) -> None:
        """An allowed file access (the hot path: ``rule`` is asked for a new one only)."""
        entry = self._files[access].get(real)
        if entry is not None:
            entry.count += 1
            return
        exposure = rule(real)
        if exposure is not None:
            origin: Origin | None = exposure.origin
            shown = rule_fields(origin)
        else:  # a directory on the way to an exposure: its existence is no secret
            origin, shown = None, (IMPLICIT, "a directory leading to an exposure")
        self._new(("file", real, access.value, id(origin)), "file", real, access.value, shown)
        entry = self._entries.get(("file", real, access.value, id(origin)))
        if entry is not None:
            self._files[access][real] = entry

    def allowed(self, kind: str, target: str, access: str, origin: Origin | None) -> _Entry | None:
        """An allowed access of another kind (network, lookup, call, environment...);
        its entry, whose ``count`` a caller may raise itself for the repeats."""
        key = (kind, target, access, id(origin))
        entry = self._entries.get(key)
        if entry is not None:
            entry.count += 1
            return entry
        shown = rule_fields(origin) if origin is not None else (IMPLICIT, "")
        return self._new(key, kind, target, access, shown)

    def refused(
        self,
        kind: str,
        target: str,
        access: str,
        rule: tuple[str, str],
        fix: str,
        *,
        probing: bool = False,
    ) -> None:
        """A refusal: recorded with the program's line, and sent at once. ``probing``: a
        look at a file (``os.stat``...) whose failure the caller catches; made by a
        library, it is an optional probe (``access`` becomes ``probe``)."""
        thread = get_ident()
        if thread in self._busy:
            return
        self._busy.add(thread)
        try:
            where, importing = program_site(self._cwd)
            if where is None or (importing and not where):
                # The sandbox's own doing: its start, a traceback it prints, the import of
                # the modules of @sandbox functions (whose byte code it may not cache).
                return
            session = self._session is not None
            if self._session is not None and not typed_by_the_user(self._session):
                return  # the interactive shell's own doing (IPython's probes)
            if probing and ("/site-packages/" in where or "/dist-packages/" in where):
                # A library looking whether an optional file is there (pydantic and the
                # interpreter's path, a config file): it goes on without it. Counted in
                # the summary as harmless, each one in the log.
                access = "probe"
            elif session and importing and kind == "file" and _on_import_path(target):
                # At the prompt, the import system looking for a module in a directory of
                # sys.path it may not read (the working directory): it goes on to the
                # next one, as if the directory were empty. Logged, never summarised. A
                # program's run keeps it in the summary: its own module may be there.
                access = "search"
            key = (kind, target, access, rule, where, False)
            entry = self._entries.get(key)
            if entry is None:
                if len(self._entries) >= MAX_DISTINCT:
                    return
                decision = Decision(kind, target, access, False, *rule, where, 1, fix, self._pid)
                self._entries[key] = entry = _Entry(decision, 0)
            self._queued.append(entry)
            entry.count += 1
            if thread == self._main:
                self._last_refusal = entry
            self._flush(full=monotonic() - self._last >= _PERIOD)
        finally:
            self._busy.discard(thread)

    def _new(
        self, key: tuple[object, ...], kind: str, target: str, access: str, rule: tuple[str, str]
    ) -> _Entry | None:
        thread = get_ident()
        if thread in self._busy or len(self._entries) >= MAX_DISTINCT:
            return None
        self._busy.add(thread)
        try:
            where = program_site(self._cwd)[0]
            if where is None:
                return None  # the sandbox's own doing (its start, a traceback it prints)
            decision = Decision(kind, target, access, True, *rule, where, 1, "", self._pid)
            entry = _Entry(decision, 1)
            self._entries[key] = entry
            self._queued.append(entry)
            full = monotonic() - self._last >= _PERIOD
            if full or len(self._queued) >= _QUEUED:
                self._flush(full=full)
            return entry
        finally:
            self._busy.discard(thread)

    def surfaced(self, args: tuple[object, ...]) -> None:
        """The runner is printing an uncaught refusal: the main thread's last one, which
        the summary at exit need not repeat (handler of ``SURFACED_EVENT``)."""
        last, self._last_refusal = self._last_refusal, None
        if last is not None:
            self._write(encode_decision(replace(last.first, count=1, surfaced=True)))

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists (the original ``lstat``: no guard is asked)."""
        return exists(path, self._lstat)

    # -- sending -----------------------------------------------------------------------

    def flush(self) -> None:
        """Send all that was counted since the last batch (at exit, after a call)."""
        thread = get_ident()
        if thread in self._busy:
            return
        self._busy.add(thread)
        try:
            self._flush(full=True)
        finally:
            self._busy.discard(thread)

    def _flush(self, *, full: bool) -> None:
        """Send the queued decisions; ``full``: also the repeats of every decision since
        its last line (a pass over all of them: once a second at most, and at exit)."""
        if full:
            self._last = monotonic()
            if self.imports is not None and self.allowed_too:
                self._loaded_modules(self.imports)
        queued, self._queued = self._queued, []
        batch = b""
        for entry in list(self._entries.values()) if full else queued:
            count, sent = entry.count, entry.sent
            if count <= sent:
                continue
            entry.sent = count
            line = encode_decision(replace(entry.first, count=count - sent))
            if len(batch) + len(line) > MAX_LINE:
                self._write(batch)
                batch = b""
            batch += line
        self._write(batch)

    def _write(self, batch: bytes) -> None:
        if not batch:
            return
        try:
            os.write(self._fd, batch)  # one write per batch: atomic on a pipe
        except OSError:
            pass  # the trusted side is gone: the program still runs as it would

    def _loaded_modules(self, judge: ImportJudge) -> None:
        """The top-level modules loaded since the last batch: each an allowed import (the
        import guard lets what the rules allow through without a call, at no cost)."""
        loaded = sys.modules.keys() - self._modules
        if not loaded:
            return
        self._modules.update(loaded)
        for name in sorted(loaded):
            if "." in name or name.startswith("pysandboxes"):
                continue
            verdict = judge.judge(name)
            if verdict.allowed:
                shown = rule_fields(verdict.rule)
                decision = Decision("import", name, "module", True, *shown, "", 1, "", self._pid)
                self._entries[("import", name, "module", id(verdict.rule))] = _Entry(decision, 1)


def _on_import_path(target: str) -> bool:
    """Whether ``target`` is a directory of ``sys.path`` (``""`` is the working one)."""
    return any(os.path.abspath(entry or ".") == target for entry in sys.path)


def flush_all() -> None:
    """Send what every log of this process counted (partial mode: after each call)."""
    for log in LOGS:
        log.flush()
