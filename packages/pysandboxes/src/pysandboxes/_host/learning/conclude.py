"""The trusted side of a learning run: collect the events, then write the rules.

``python-sb`` starts the program, then becomes the waiter with an empty environment (see
``_host.waiter``). While learning, the waiter also reads the event pipe in a thread, as the
events come; when the program has ended, however it ended (an exception, a signal, even
SIGKILL), it turns the events into rules (``rules``), writes them with the learned-rule
writer, and prints a summary on stderr (stdout belongs to the program).

What the waiter needs of the host is handed over as one argument (``plan_argument``):
paths, the home directory, the *names* of the host's variables and the values of the few
path variables rules may be written with (``VIRTUAL_ENV``...). Never another value: the
process chain still holds no more of the environment than the sandbox itself.
"""

from __future__ import annotations

import os
import sys
import threading

from pysandboxes._host.learning.plan import Plan, digest
from pysandboxes._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from pysandboxes._host.learning.rules import Learned
    from pysandboxes._wire.events import Event

#: The most the trusted side keeps of what a learning run sends.
MAX_BYTES = 64 << 20


class Collector:
    """Read the event pipe in a thread until every writer has closed it."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        # One buffer, not a list of reads: a flood of one-byte writes must cost its bytes,
        # not an object each.
        self._buffer = bytearray()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            if len(self._buffer) < MAX_BYTES:  # a flood is cut, not buffered without end
                self._buffer += chunk

    def finish(self) -> list[bytes]:
        """The bytes read; waits a little for a descendant that still holds the pipe."""
        self._thread.join(timeout=2.0)
        return [bytes(self._buffer[:MAX_BYTES])]


@record
class Summary:
    """What a learning run did, for the user: a value, rendered by whoever shows it.

    Attributes:
        title: one line: how many rules, for which file.
        rows: ``(family, rule, first seen at)`` per learned rule, printable.
        notes: what else to know (skipped accesses, where the rules went), one sentence each.
        unwritten: the rule lines that could not be written, to copy by hand.
    """

    title: str
    rows: tuple[tuple[str, str, str], ...]
    notes: tuple[str, ...]
    unwritten: tuple[str, ...] = ()


def conclude(
    plan: Plan, chunks: list[bytes], seen: Sequence[Event] = (), *, refusal: str = ""
) -> Summary | None:
    """Write the learned rules; return the summary. Report, never raise: the waiter
    must still end as the program ended, and remove its temporary directory.

    ``seen``: events the trusted side observed itself (partial mode's results); the
    program's events of the same family are forged and dropped. ``refusal``: why nothing
    may be written (the rules are then only shown)."""
    try:
        return _conclude(plan, chunks, seen, refusal)
    except Exception as exc:  # a bug here must not cost the program's exit status
        # The failure may come after the file was written: say so.
        print(
            f"{plan.speaker}: learning failed ({exc!r}): {plan.output} may hold new rules, "
            "review it",
            file=sys.stderr,
        )
        return None


def show(summary: Summary, renderer: str = "") -> None:
    """Print ``summary`` on stderr (stdout is the program's) with ``renderer``, a
    ``module:function`` the launcher named (python-sb's, with rich), or as plain text."""
    show_rows = plain_summary
    if renderer:
        import importlib

        module, _, function = renderer.partition(":")
        try:
            show_rows = getattr(importlib.import_module(module), function)
        except (ImportError, AttributeError):
            pass  # the plain text says the same
    show_rows(summary.title, summary.rows, summary.notes, sys.stderr)
    for line in summary.unwritten:
        print(line, file=sys.stderr)


def _conclude(plan: Plan, chunks: list[bytes], seen: Sequence[Event], refusal: str) -> Summary:
    sys.path[:0] = [p for p in plan.path if p not in sys.path]
    from pysandboxes._host.learning.rules import (
        Context,
        drop_contradictions,
        drop_granted_imports,
        learn,
    )
    from pysandboxes._wire.codec import read_events
    from pysandboxes._wire.events import MAX_EVENTS

    events, malformed, beyond = read_events(chunks)
    events = [e for e in events if e.family != "result"] + list(seen)
    context = Context(
        os.path.dirname(plan.output),
        plan.cwd,
        plan.home,
        plan.variables,
        frozenset(plan.host_names),
        frozenset(plan.rule_files) | {plan.output},
        _code_roots(plan.commands),
    )
    learned = learn(events, context)
    if os.path.basename(plan.output) != "pyproject.toml":
        learned = drop_contradictions(learned, _read(plan.output))
        if plan.start == "template" and not os.path.exists(plan.output):
            from pysandboxes._policy.template import SAFE_MODULES

            learned = drop_granted_imports(learned, frozenset(SAFE_MODULES))
    notes = _short(learned.skipped)
    if beyond:
        notes.append(
            f"the program did more than {MAX_EVENTS} distinct things to learn: the "
            f"{beyond} after those were not read, and may need rules of their own "
            "(run again to learn them)"
        )
    if malformed:
        notes.append(f"{malformed} event line(s) that were not events were ignored")
    if plan.relaxed:
        notes.append(plan.relaxed)
    if plan.advice:
        notes.append(plan.advice)
    shown = _shown(plan.output, plan.cwd)
    existed = os.path.exists(plan.output)
    if refusal:
        notes.append(refusal)
        notes.append("the rules learned are below: add them yourself once nothing runs")
        return _summary(learned, notes, shown, unwritten=True, by=plan.speaker)
    if digest(plan.output) != plan.digest:
        notes.append(f"{shown} changed while the program ran: nothing is written to it")
        notes.append("check the file, then learn again; the rules learned are below")
        return _summary(learned, notes, shown, unwritten=True, by=plan.speaker)
    try:
        backup = _write(plan.output, learned, plan.start)
    except (OSError, ValueError) as exc:
        notes.append(f"the rules could not be written to {shown}: {exc}")
        return _summary(learned, notes, shown, unwritten=True, by=plan.speaker)  # nothing is lost
    if not existed:
        what = (
            "the rules learned"
            if plan.start == "rules"
            else (
                f"the template (python-sb --template: every key explained, the standard "
                f"library's pure modules granted) with the {len(learned.rules)} rule(s) learned "
                "in its learning blocks"
            )
        )
        notes.append(f"{shown} written: {what}")
    elif learned.rules:
        notes.append(
            f"rules written to {shown}" + (f" (previous version: {backup})" if backup else "")
        )
        notes.append("review them: each rule is a right the program will have")
    else:
        notes.append(f"nothing new to learn; {shown} is unchanged")
    return _summary(learned, notes, shown, by=plan.speaker)


#: Most notes and rows of one kind the summary shows; the rest are counted.
SHOWN = 12


def _short(notes: Sequence[str]) -> list[str]:
    """The notes, the first ``SHOWN`` of them and a count of the others."""
    if len(notes) <= SHOWN:
        return list(notes)
    return [*notes[:SHOWN], f"and {len(notes) - SHOWN} more accesses that gave no rule"]


def _code_roots(commands: Sequence[str] = ()) -> frozenset[str]:
    """The interpreter's trees, as the launcher's ``sys.path`` (already in ours) has them,
    and the directories of commands (``PATH``)."""
    from pysandboxes._policy.view import interpreter_roots

    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    others = [os.path.realpath(p) for p in (*prefixes, *commands) if p]
    return frozenset({*interpreter_roots(), *(p for p in others if p != "/")})


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def _shown(path: str, cwd: str) -> str:
    relative = os.path.relpath(path, cwd)
    return path if relative.startswith("..") else relative


def _write(output: str, learned: Learned, start: str = "template") -> str | None:
    from datetime import datetime
    from pathlib import Path

    from pysandboxes._policy.template import STARTS
    from pysandboxes._policy.writer import write_pyproject, write_rule_file

    path = Path(output)
    if not learned.rules and path.exists():
        return None
    if path.name == "pyproject.toml":
        backup = write_pyproject(path, learned.rules, now=datetime.now())
    else:
        initial = STARTS.get(start, STARTS["template"])
        backup = write_rule_file(path, learned.rules, now=datetime.now(), initial=initial)
    return str(backup) if backup is not None else None


def _summary(
    learned: Learned, notes: list[str], shown: str, *, unwritten: bool = False, by: str = ""
) -> Summary:
    speaker = by or "python-sb"  # the library speaks as itself (Plan.speaker)
    title = _printable(f"{speaker} learned {len(learned.rows)} rule(s) for {shown}")
    # What the program named (paths, code locations) reaches a terminal: no control codes.
    rows = tuple(
        (family, _printable(rule), _printable(where)) for family, rule, where in _grouped(learned)
    )
    lines = tuple(_printable(rule.line) for rule in learned.rules) if unwritten else ()
    return Summary(title, rows, tuple(_printable(note) for note in notes), lines)


def _grouped(learned: Learned) -> list[tuple[str, str, str]]:
    """The summary's rows by family, at most ``SHOWN`` of each, the others counted (the
    rule file holds them all)."""
    families: dict[str, list[tuple[str, str, str]]] = {}
    for row in learned.rows:
        families.setdefault(row[0], []).append(row)
    rows: list[tuple[str, str, str]] = []
    for family, members in families.items():
        rows += members[:SHOWN]
        if len(members) > SHOWN:
            rows.append((family, f"... and {len(members) - SHOWN} more {family} rules", "-"))
    return rows


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


def plain_summary(
    title: str, rows: Sequence[tuple[str, str, str]], notes: Sequence[str], stream: object
) -> None:
    """The summary as plain text: one line per rule, then the notes."""
    lines = [title]
    width = max((len(r[1]) for r in rows), default=0)
    lines += [
        f"  {family:<7} {rule:<{width}}  first seen at {where}" for family, rule, where in rows
    ]
    lines += [f"  note: {note}" for note in notes]
    print("\n".join(lines), file=stream, flush=True)  # type: ignore[arg-type]
