"""The ``Asking`` enforcer: with prompting on, a refusal becomes a request to the trusted side.

An enforcer like ``Enforcing`` and ``Learning`` (``enforce``), not an ``if`` in the guards.
For each access the rules refuse and someone may allow, it sends an ``Ask`` to an
``Asker`` (the trusted side's socket: ``Channel``) and waits for the answer:

- denied (or not askable: a rule file, a name nobody can judge, a reach into the
  guards): today's refusal, by the enforcer it wraps (``Enforcing``, behind the
  decision log's ``Auditing`` when there is a log);
- an import or a sensitive call allowed: it goes on, at the Python level only (the kernel
  still governs every file the module or the call touches);
- a file open, a listing, a ``stat``, a removal, a directory made, a rename or a TCP
  connection allowed: the trusted side has performed it and handed the result over (a
  descriptor, a listing in a sealed memory file, a ``stat``'s fields). The kernel wall
  stays as it was compiled: this process could not open the file, list the directory
  or reach the address itself. The guard's refusal is then ``Granted``, which the
  wrappers (``_inside.grants``) turn into the normal return value: a file object named
  as the program named it, a socket connected on the program's own descriptor, a list
  of names, an ``os.stat_result``;
- a variable's value allowed (partial mode): sent as data, returned by the read.

The wrappers say what the program is doing (``os.open`` flags, the socket's descriptor,
the path it removes) in ``INTENTS`` for the enforcer to put in its request. The program
can reach and change that (a wrapper's closure): it gains nothing, since the trusted
side checks the flags against the operation it asks about, performs only what the
person was shown, and the descriptors are the program's own anyway.
"""

from __future__ import annotations

import json  # imported before the guards: an import at a request would be judged
import os
import socket
from _thread import allocate_lock, get_ident

from pysandboxes._inside.guards.integrity import INTERNALS
from pysandboxes._inside.recorder import program_site
from pysandboxes._policy.model import Access
from pysandboxes._policy.registry import SUBINTERPRETER_FUNCTIONS, SUBINTERPRETER_MODULES
from pysandboxes._wire.asks import (
    DENY,
    MAX_ANSWER,
    MAX_LISTED,
    MAX_LISTING,
    Answer,
    Ask,
    encode_ask,
    parse_answer,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Protocol

    from pysandboxes._inside.enforce import Connection, Enforcer, FileAccess
    from pysandboxes._policy.model import Verdict

    class Asker(Protocol):
        """Carries a request to whoever answers it (the trusted side)."""

        def ask(self, ask: Ask) -> tuple[Answer, int | None]:
            """The answer, and the descriptor handed over with it (``None``: none)."""
            ...


#: What the wrappers are doing on each thread: ``("open", flags)``, ``("connect", fd)``,
#: ``("list", 0)``, ``("stat", follow)``, ``("delete" | "rmdir" | "mkdir", path, mode)``
#: or ``("rename", source, target)`` (paths absolute, as the program named them).
INTENTS: dict[int, tuple[Any, ...]] = {}
_FD_SIZE = 4  # an int in SCM_RIGHTS
_LOOKS = {"os.listdir": "list", "os.scandir": "list", "os.stat": "stat", "os.lstat": "stat"}


class Granted(BaseException):
    """The trusted side performed a refused access: ``fd`` is its descriptor (-1: none),
    ``value`` what it sent as data (a listing, a ``stat``'s fields). A ``BaseException``:
    no ``except Exception`` between the guard and the wrapper stops it."""

    def __init__(self, fd: int, value: object = None) -> None:
        super().__init__(fd)
        self.fd = fd
        self.value = value


class Channel:
    """The socket to the trusted side: one request at a time, one answer each."""

    def __init__(self, fd: int) -> None:
        # Made before the guards are armed: a socket made later is judged.
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=fd)
        self._sock.set_inheritable(False)  # programs the sandbox starts do not ask
        self._lock = allocate_lock()
        self._space = socket.CMSG_SPACE(_FD_SIZE)

    def ask(self, ask: Ask) -> tuple[Answer, int | None]:
        data = encode_ask(ask)
        if not data:
            return Answer(DENY, "the request was too long to send"), None
        with self._lock:  # a question at a time: the person answers one
            try:
                os.write(self._sock.fileno(), data)  # os.write: no audit event of its own
                message, ancillary, _, _ = self._sock.recvmsg(MAX_ANSWER, self._space)
            except OSError as exc:
                return Answer(DENY, f"the trusted side could not be asked ({exc})"), None
        fd = None
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fd = int.from_bytes(payload[:_FD_SIZE], "little", signed=True)
        if not message:
            if fd is not None:
                os.close(fd)
            return Answer(DENY, "the trusted side is gone"), None
        return parse_answer(message), fd


class Asking:
    """Ask the trusted side about every refusal someone may allow (see module docs)."""

    hides_entries = True
    stands_in_for_native = True
    learned: frozenset[tuple[str, Access, str]] = frozenset()
    learned_modules: frozenset[str] = frozenset()

    def __init__(self, asker: Asker, inner: Enforcer, cwd: str, call: Callable[[], int]) -> None:
        self._asker = asker
        self._enforcing = inner  # denials: today's refusal (and its line in the log)
        self._cwd = cwd.rstrip("/") + "/"
        self._call = call
        self._busy: set[int] = set()  # threads asking now: what they do is ours
        self._handed: set[int] = set()  # descriptors received and not yet taken
        self._value: object = None

    def _ask(self, kind: str, resource: str, operation: str, **more: Any) -> int | None:
        """Ask; ``None`` when denied, else the descriptor handed over (-1: none); the
        value sent with it is kept in ``self._value``."""
        thread = get_ident()
        if thread in self._busy:
            return None
        site = program_site(self._cwd)[0]
        if site is None:
            return None  # the framework's own (the runner printing a traceback): unasked
        self._busy.add(thread)
        try:
            ask = Ask(self._call(), kind, resource, operation, site, **more)
            answer, fd = self._asker.ask(ask)
        finally:
            self._busy.discard(thread)
        self._value = answer.value
        if answer.decision == DENY:
            if fd is not None:
                os.close(fd)
            return None
        if fd is None:
            return -1
        self._handed.add(fd)
        return fd

    def take(self, granted: Granted) -> int:
        """The descriptor of a ``Granted`` this enforcer raised (a wrapper's call); a
        ``Granted`` the program made itself names nothing handed over, and is raised on."""
        if granted.fd not in self._handed:
            raise granted
        self._handed.discard(granted.fd)
        return granted.fd

    # -- the Enforcer protocol ---------------------------------------------------------

    def refuse_file(self, report: FileAccess, verdict: Verdict) -> None:
        """Ask for a file access the rules refuse; the trusted side performs it, or it
        is refused. What no rule can allow (a rule file, a name the guard cannot judge:
        a ``fix`` in ``<>``) is refused unasked."""
        fix = verdict.fix
        intent = INTENTS.get(get_ident())
        if fix is not None and not fix.startswith("<") and intent is not None:
            self._file(report, intent)
        self._enforcing.refuse_file(report, verdict)

    def _file(self, report: FileAccess, intent: tuple[Any, ...]) -> None:
        """Ask for what ``intent`` says the program does; raise ``Granted`` if done."""
        what = intent[0]
        if what == "open" and report.access in (Access.READ, Access.WRITE):
            flags: int = intent[1]
            operation = "read" if report.access is Access.READ else "write"
            if operation == "write" and flags & os.O_CREAT and not _exists(report.real):
                operation = "create"
            fd = self._ask("file", report.real, operation, flags=flags)
            if fd is not None and fd >= 0:
                raise Granted(fd)
        elif _LOOKS.get(report.api) == what and report.access is Access.READ:
            if what == "list":
                fd = self._ask("file", report.real, "list")
                if fd is not None and fd >= 0:
                    raise Granted(-1, _listing(fd))
            else:
                operation = "stat" if intent[1] else "lstat"
                asked = self._ask("file", report.real, operation)
                fields: object = self._value
                if asked is not None and type(fields) is tuple:
                    raise Granted(-1, tuple[int, ...](fields))  # pyright: ignore[reportUnknownArgumentType]
        elif what in ("delete", "rmdir", "mkdir"):
            mode = intent[2] & 0o7777 if what == "mkdir" else 0
            if self._ask("file", intent[1], what, flags=mode) is not None:
                raise Granted(-1)
        elif what == "rename" and self._ask("file", intent[1], what, target=intent[2]) is not None:
            raise Granted(-1)

    def ask_env(self, name: str) -> str | None:
        """Ask for a variable the sandbox lacks (partial mode): its value, or ``None``."""
        if self._ask("env", name, "read") is None or type(self._value) is not str:
            return None
        return self._value

    def refuse_call(self, qualname: str, category: str, message: str) -> None:
        """Ask for a sensitive call; allowed, it goes on (the kernel still rules)."""
        askable = qualname != INTERNALS and qualname not in SUBINTERPRETER_FUNCTIONS
        if askable and self._ask("call", qualname, category) is not None:
            return
        self._enforcing.refuse_call(qualname, category, message)

    def refuse_connection(
        self, message: str, address: str, rule: str | None, target: Connection | None = None
    ) -> None:
        """Ask for a TCP connection; the trusted side connects, and the program's socket
        goes on on the connection it made."""
        intent = INTENTS.get(get_ident())
        if (
            target is not None
            and target.direction == "OUT"
            and target.proto == "tcp"
            and intent is not None
            and intent[0] == "connect"
        ):
            fd = self._ask("net", target.host, "OUT", proto="tcp", port=target.port)
            if fd is not None and fd >= 0:
                self._handed.discard(fd)
                try:
                    blocking = os.get_blocking(intent[1])
                    os.dup2(fd, intent[1])  # the program's socket, now connected
                    os.set_blocking(intent[1], blocking)
                finally:
                    os.close(fd)
                raise Granted(-1)
        self._enforcing.refuse_connection(message, address, rule, target)

    def refuse_import(self, module: str, message: str, category: str | None = None) -> None:
        """Ask for an import; allowed, it goes on (its files are still the kernel's)."""
        if category is None or module not in SUBINTERPRETER_MODULES:
            operation = "native" if category else "module"
            if self._ask("import", module, operation) is not None:
                return
        self._enforcing.refuse_import(module, message, category)


def _listing(fd: int) -> list[tuple[str, str, int]]:
    """The listing the trusted side wrote to the memory file ``fd`` (closed here)."""
    try:
        size = os.fstat(fd).st_size
        if size > MAX_LISTING:
            return []
        data = os.pread(fd, size, 0)
    finally:
        os.close(fd)
    entries: list[list[object]] = json.loads(data)  # the trusted side's own
    found: list[tuple[str, str, int]] = []
    if type(entries) is list:
        for entry in entries[:MAX_LISTED]:
            name, kind, inode = entry  # a wrong shape raises
            if type(name) is str and type(kind) is str and type(inode) is int:
                found.append((name, kind, inode))
    return found


def _exists(path: str) -> bool:
    try:
        os.lstat(path)
    except (OSError, ValueError):
        return False
    return True
