"""The ``Asking`` enforcer: with prompting on, a refusal becomes a request to the trusted side.

An enforcer like ``Enforcing`` and ``Learning`` (``enforce``), not an ``if`` in the guards.
For each access the rules refuse and someone may allow, it sends an ``Ask`` to an
``Asker`` (the trusted side's socket: ``Channel``) and waits for the answer:

- denied (or not askable: a rule file, a name nobody can judge, a reach into the
  guards): today's refusal, by the enforcer it wraps (``Enforcing``, behind the
  decision log's ``Auditing`` when there is a log);
- an import or a sensitive call allowed: it goes on, at the Python level only (the kernel
  still governs every file the module or the call touches);
- a file open or a TCP connection allowed: the trusted side has performed it and handed
  the descriptor over. The kernel wall stays as it was compiled: this process could not
  open the file or reach the address itself. The guard's refusal is then ``Granted``,
  which the wrappers installed here (``install_grants``) turn into the normal return
  value: a file object or descriptor named as the program named it, a socket connected
  on the program's own descriptor.

The wrappers say what the program is doing (``os.open`` flags, the socket's descriptor)
in ``_INTENTS`` for the enforcer to put in its request. The program can reach and change
that (a wrapper's closure): it gains nothing, since the trusted side checks the flags
against the operation it asks about, and the descriptors are the program's own anyway.
"""

from __future__ import annotations

import os
import socket
from _thread import allocate_lock, get_ident

from pysandboxes._inside.guards.integrity import INTERNALS
from pysandboxes._inside.recorder import program_site
from pysandboxes._policy.model import Access
from pysandboxes._policy.registry import SUBINTERPRETER_FUNCTIONS, SUBINTERPRETER_MODULES
from pysandboxes._wire.asks import DENY, MAX_ANSWER, Answer, Ask, encode_ask, parse_answer

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


#: What the wrappers are doing on each thread: ``("open", flags)`` or ``("connect", fd)``.
_INTENTS: dict[int, tuple[str, int]] = {}
_FD_SIZE = 4  # an int in SCM_RIGHTS


class Granted(BaseException):
    """The trusted side performed a refused access: ``fd`` is its result. A
    ``BaseException``: no ``except Exception`` between the guard and the wrapper stops it."""

    def __init__(self, fd: int) -> None:
        super().__init__(fd)
        self.fd = fd


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

    def _ask(self, kind: str, resource: str, operation: str, **more: Any) -> int | None:
        """Ask; ``None`` when denied, else the descriptor handed over (-1: none)."""
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
        """Ask for an open the rules refuse; the trusted side opens it, or it is refused."""
        fix = verdict.fix
        intent = _INTENTS.get(get_ident())
        if fix is not None and not fix.startswith("<") and intent is not None:
            what, flags = intent
            if what == "open" and report.access in (Access.READ, Access.WRITE):
                operation = "read" if report.access is Access.READ else "write"
                if operation == "write" and flags & os.O_CREAT and not _exists(report.real):
                    operation = "create"
                fd = self._ask("file", report.real, operation, flags=flags)
                if fd is not None and fd >= 0:
                    raise Granted(fd)
        self._enforcing.refuse_file(report, verdict)

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
        intent = _INTENTS.get(get_ident())
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


def _exists(path: str) -> bool:
    try:
        os.lstat(path)
    except (OSError, ValueError):
        return False
    return True


def install_grants(asking: Asking) -> None:
    """Wrap the judged ``open``, ``io.open``, ``os.open`` and ``socket.connect`` so that an
    access the trusted side performed returns as the original would have returned it.
    Installed after the file wrappers, before the hook: they hold nothing the program
    could not reach anyway (the judged functions, the public ``_io.open``)."""
    import _io
    import builtins
    import io
    import posix

    from pysandboxes._inside.guards.pinned import open_flags

    judged_open, judged_os_open, raw_open = builtins.open, posix.open, _io.open
    raw_connect = socket.socket.connect
    intents = _INTENTS

    def opened(file: Any, mode: Any = "r", *args: Any, **kwargs: Any) -> Any:
        thread = get_ident()
        before = intents.get(thread)
        intents[thread] = ("open", open_flags(mode) if type(mode) is str else 0)
        try:
            return judged_open(file, mode, *args, **kwargs)
        except Granted as granted:
            fd = asking.take(granted)
            kwargs.pop("opener", None)
            kwargs["closefd"] = True
            try:
                handle = raw_open(fd, mode, *args[:4], **kwargs)
            except BaseException:
                os.close(fd)
                raise
            raw: Any = getattr(getattr(handle, "buffer", handle), "raw", handle)
            try:
                raw.name = file  # as open() names it
            except (AttributeError, TypeError):
                pass
            return handle
        finally:
            _restore(intents, thread, before)

    def os_opened(path: Any, flags: Any, mode: Any = 0o777, **kwargs: Any) -> Any:
        thread = get_ident()
        before = intents.get(thread)
        intents[thread] = ("open", flags if type(flags) is int else 0)
        try:
            return judged_os_open(path, flags, mode, **kwargs)
        except Granted as granted:
            return asking.take(granted)
        finally:
            _restore(intents, thread, before)

    def connect(self: Any, address: Any) -> None:
        thread = get_ident()
        before = intents.get(thread)
        intents[thread] = ("connect", self.fileno())
        try:
            return raw_connect(self, address)
        except Granted as granted:
            if granted.fd != -1:
                raise
            return None
        finally:
            _restore(intents, thread, before)

    for made, like in ((opened, judged_open), (os_opened, judged_os_open)):
        made.__name__, made.__qualname__ = like.__name__, like.__qualname__
        made.__doc__ = like.__doc__
    opened.__module__ = judged_open.__module__
    builtins.open = io.open = opened
    posix.open = os.open = os_opened
    socket.socket.connect = connect  # type: ignore[method-assign]


def _restore(intents: dict[int, tuple[str, int]], thread: int, before: Any) -> None:
    if before is None:
        intents.pop(thread, None)
    else:
        intents[thread] = before
