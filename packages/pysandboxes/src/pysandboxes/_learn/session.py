"""The trusted side of a learning run: collect the events, then write the rules.

``python-sb`` starts the program, then becomes the waiter with an empty environment (see
``_waiter``). While learning, the waiter also reads the event pipe in a thread, as the
events come; when the program has ended, however it ended (an exception, a signal, even
SIGKILL), it turns the events into rules (``rules``), writes them with the learned-rule
writer, and prints a summary on stderr (stdout belongs to the program).

What the waiter needs of the host is handed over as one argument (``plan_argument``):
paths, the home directory, the *names* of the host's variables and the values of the few
path variables rules may be written with (``VIRTUAL_ENV``...). Never another value: the
process chain still holds no more of the environment than the sandbox itself.
"""

from __future__ import annotations

import json
import os
import sys
import threading

from pysandboxes._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from .rules import Learned

_PATH_VARIABLES = ("VIRTUAL_ENV", "CONDA_PREFIX", "PYENV_ROOT")


@record
class Plan:
    """A learning run, as the launcher decided it.

    Attributes:
        fd: the read end of the event pipe.
        output: the file the rules go to (a rule file or a ``pyproject.toml``).
        cwd: the program's working directory.
        home: the home directory, ``""`` when unknown.
        variables: ``(name, value)`` of path variables rules may be written with.
        host_names: the names of the host's variables.
        rule_files: the rule files of the run (never granted).
        relaxed: why the kernel layer was left off for this run, ``""`` if it was not.
        advice: what to do after reviewing, ``""`` when nothing (a ``learn=`` line to drop).
        digest: the output file's SHA-256 before the program started, ``""`` if missing.
        path: ``sys.path`` of the launcher: the writer needs ``tomlkit``, the summary ``rich``.
        commands: the directories of ``PATH``: what is written there runs as the user,
            outside the sandbox, so nothing there is learned for writing.
    """

    fd: int
    output: str
    cwd: str
    home: str
    variables: tuple[tuple[str, str], ...]
    host_names: tuple[str, ...]
    rule_files: tuple[str, ...]
    relaxed: str
    path: tuple[str, ...]
    advice: str = ""
    digest: str = ""
    commands: tuple[str, ...] = ()


def make_plan(
    fd: int,
    output: str,
    cwd: str,
    env: Mapping[str, str],
    rule_files: Sequence[str],
    relaxed: str,
    advice: str = "",
    digest: str = "",
) -> Plan:
    """The plan of a learning run, from the launcher's knowledge of the host."""
    variables = tuple((n, env[n]) for n in _PATH_VARIABLES if env.get(n, "").startswith("/"))
    home = env.get("HOME", "")
    return Plan(
        fd,
        output,
        cwd,
        home if home.startswith("/") else "",
        variables,
        tuple(sorted(env)),
        tuple(rule_files),
        relaxed,
        tuple(p for p in sys.path if p),
        advice,
        digest,
        tuple(p for p in env.get("PATH", "").split(os.pathsep) if p.startswith("/")),
    )


def plan_argument(plan: Plan) -> str:
    """The plan as one command-line argument of the waiter."""
    names = ("fd", "output", "cwd", "home", "variables", "host_names", "rule_files")
    more = ("relaxed", "path", "advice", "digest", "commands")
    fields = {name: getattr(plan, name) for name in (*names, *more)}
    return json.dumps(fields)


def parse_plan(argument: str) -> Plan:
    """Read ``plan_argument``'s output (it comes from the launcher, the trusted side)."""
    fields = json.loads(argument)
    fields["variables"] = tuple(tuple(pair) for pair in fields["variables"])
    for name in ("host_names", "rule_files", "path", "commands"):
        fields[name] = tuple(fields[name])
    return Plan(**fields)


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


def conclude(plan: Plan, chunks: list[bytes]) -> None:
    """Write the learned rules and print the summary; report, never raise: the waiter
    must still end as the program ended, and remove its temporary directory."""
    try:
        _conclude(plan, chunks)
    except Exception as exc:  # a bug here must not cost the program's exit status
        # The failure may come after the file was written (the summary): say both.
        print(
            f"python-sb: learning failed ({exc!r}): {plan.output} may hold new rules, review it",
            file=sys.stderr,
        )


def _conclude(plan: Plan, chunks: list[bytes]) -> None:
    sys.path[:0] = [p for p in plan.path if p not in sys.path]
    from pysandboxes._rpc.codec import decode_events

    from .rules import Context, drop_contradictions, learn

    events, dropped = decode_events(chunks)
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
    notes = list(learned.skipped)
    if dropped:
        notes.append(f"{dropped} malformed event(s) from the program were ignored")
    if plan.relaxed:
        notes.append(plan.relaxed)
    if plan.advice:
        notes.append(plan.advice)
    shown = _shown(plan.output, plan.cwd)
    existed = os.path.exists(plan.output)
    from .launch import digest

    if digest(plan.output) != plan.digest:
        notes.append(f"{shown} changed while the program ran: nothing is written to it")
        notes.append("check the file, then learn again; the rules learned are below")
        _summary(learned, notes, shown)
        for rule in learned.rules:
            print(_printable(rule.line), file=sys.stderr)
        return
    try:
        backup = _write(plan.output, learned)
    except (OSError, ValueError) as exc:
        notes.append(f"the rules could not be written to {shown}: {exc}")
        _summary(learned, notes, shown)
        for rule in learned.rules:
            print(_printable(rule.line), file=sys.stderr)  # nothing is lost: the rules are shown
        return
    if not existed:
        notes.append(f"{shown} written from the template, with the rules learned")
    elif learned.rules:
        notes.append(
            f"rules written to {shown}" + (f" (previous version: {backup})" if backup else "")
        )
        notes.append("review them: each rule is a right the program will have")
    else:
        notes.append(f"nothing new to learn; {shown} is unchanged")
    _summary(learned, notes, shown)


def _code_roots(commands: Sequence[str] = ()) -> frozenset[str]:
    """The interpreter's trees, as the launcher's ``sys.path`` (already in ours) has them,
    and the directories of commands (``PATH``)."""
    from pysandboxes._view import interpreter_roots

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


def _write(output: str, learned: Learned) -> str | None:
    from datetime import datetime
    from pathlib import Path

    from pysandboxes._policy.writer import write_pyproject, write_rule_file

    path = Path(output)
    write = write_pyproject if path.name == "pyproject.toml" else write_rule_file
    if not learned.rules and path.exists():
        return None
    backup = write(path, learned.rules, now=datetime.now())
    return str(backup) if backup is not None else None


def _summary(learned: Learned, notes: list[str], shown: str) -> None:
    title = _printable(f"python-sb learned {len(learned.rows)} rule(s) for {shown}")
    # What the program named (paths, code locations) reaches a terminal: no control codes.
    rows = [(family, _printable(rule), _printable(where)) for family, rule, where in learned.rows]
    try:
        from python_sb.summary import show  # rich lives in python-sb, not here
    except ImportError:
        show = plain_summary
    show(title, rows, [_printable(note) for note in notes], sys.stderr)


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
