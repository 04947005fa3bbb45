"""The ``Learning`` enforcer: in the sandboxed interpreter, record and let through.

Each access the rules in force would refuse becomes an ``Event`` sent at once to the
trusted side over the pipe it handed over (see ``_wire.codec``), so a child killed by
SIGKILL has already told everything it did. The child never writes rules: it only
describes what happened, and the trusted side decides what to grant.

Some refusals still stand while learning, because allowing them would let the program
change its own future rights or leave the Python layer: a change to a rule file (the
protected files), the program's own writes to the event pipe, and a subinterpreter (which
none of the guards reach) are no business of learning.
"""

from __future__ import annotations

import os
from _thread import get_ident

from pysandboxes._inside.enforce import Enforcing
from pysandboxes._inside.guards.audit import HOOK_FILENAME, current_frame
from pysandboxes._inside.guards.integrity import INTERNALS
from pysandboxes._policy.judge import EXPOSURE_ROOT, PLANTED_RULES, UNJUDGEABLE
from pysandboxes._policy.model import Access
from pysandboxes._policy.registry import SUBINTERPRETER_FUNCTIONS, SUBINTERPRETER_MODULES
from pysandboxes._wire.events import Event, encode_event

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

    from pysandboxes._inside.enforce import Connection, FileAccess, Messages
    from pysandboxes._policy.model import Verdict

_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_STDLIB = os.path.dirname(os.__file__) + "/"
_LISTINGS = frozenset({"os.listdir", "os.scandir"})
_MAX_SENT = 100_000  # as many as the trusted side reads (MAX_EVENTS)
_READ, _EXECUTE = Access.READ, Access.EXECUTE


_BOOTSTRAP = (
    os.path.join(_OWN_DIR, "_inside", "runner.py"),
    os.path.join(_OWN_DIR, "_inside", "bootstrap.py"),
)


def _acting_for_caller(filename: str) -> bool:
    """Guards, wrappers and the standard library act for whoever called them."""
    if filename.startswith(_OWN_DIR):
        return filename not in _BOOTSTRAP
    # "<pysandboxes ...>": the sealed hook and the sealed copies of guarded functions.
    return filename.startswith((_STDLIB, "<frozen ", "<pysandboxes "))


def exists(path: str, lstat: Callable[[str], object]) -> bool:
    """Whether ``path`` exists, asked with ``lstat``: the original, taken before the file
    wrappers, so that no guard judges the recorder's own look."""
    try:
        lstat(path)
    except (OSError, ValueError):
        return False
    return True


def program_site(cwd: str) -> tuple[str | None, bool]:
    """Where the program did the access being judged, and whether the import system
    acted for it; ``cwd`` ends with ``/`` (paths below it are shown relative).

    Outward from here: the guards' frames up to the audit hook (when the access came
    through it), then the wrappers and the standard library, which act for their
    caller; the first frame left decides. If it is the bootstrap's (the runner
    printing a traceback, say), the access is the framework's own (``None``) and is
    never charged to the program's rules.
    """
    frame: FrameType | None = current_frame()
    below_hook = frame
    for _ in range(256):  # the guards' own depth is small
        if below_hook is None or below_hook.f_code.co_filename == HOOK_FILENAME:
            break
        below_hook = below_hook.f_back
    frame = below_hook.f_back if below_hook is not None else frame
    importing = False
    while frame is not None and _acting_for_caller(frame.f_code.co_filename):
        importing = importing or frame.f_code.co_filename.startswith("<frozen importlib")
        frame = frame.f_back
    if frame is None:
        return "", importing
    filename = frame.f_code.co_filename
    if filename == _BOOTSTRAP[0] and frame.f_code.co_name == "run":
        return "the command line", importing  # runpy finding the -m module
    if filename.startswith(_OWN_DIR) or (filename == "<string>" and frame.f_back is None):
        return None, importing  # the bootstrap: "<string>" also names a -c program
    if filename.startswith(cwd):
        filename = filename[len(cwd) :]
    return f"{filename}:{frame.f_lineno}", importing


def session_framework() -> tuple[str, ...]:
    """The places whose frames are an interactive session's own, not the user's: the
    standard library, this framework, python-sb's shell (see ``typed_by_the_user``)."""
    return (_STDLIB, _OWN_DIR, "<frozen ", "<pysandboxes ", *_shell_dirs())


def typed_by_the_user(framework: tuple[str, ...]) -> bool:
    """Whether a frame of the stack is the user's: a line typed at the prompt, or a
    file outside the interpreter's trees and ``framework`` (the user's modules). In an
    interactive session, what the shell does with no such frame (IPython probing the
    terminal, ``/proc/self`` or its profile) is the framework's: not learned, not
    summed up, refused all the same."""
    frame: FrameType | None = current_frame()
    while frame is not None:
        filename = frame.f_code.co_filename
        if not (
            filename.startswith(framework)
            or filename == "<string>"  # the bootstrap: a session runs no -c code
            or "/site-packages/" in filename
            or "/dist-packages/" in filename
        ):
            return True
        frame = frame.f_back
    return False


def _shell_dirs() -> tuple[str, ...]:
    """Where python-sb's interactive session lives (beside this package in an install,
    elsewhere in an editable one): its frames are the shell's, never the user's."""
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec("python_sb")
    locations = spec.submodule_search_locations if spec is not None else None
    return tuple(location.rstrip("/") + "/" for location in locations or ())


class Learning:
    """Record every refusal for the trusted side; the access goes on (see module docs)."""

    hides_entries = False
    stands_in_for_native = False

    def __init__(self, fd: int, messages: Messages, cwd: str, *, session: bool = False) -> None:
        self._fd = fd
        # An interactive session: what the shell itself does (IPython, prompt_toolkit,
        # with no line the user typed on the stack) is not the user's to learn.
        self._session = session
        self._framework = session_framework() if session else ()
        self._enforcing = Enforcing(messages)
        self._cwd = cwd.rstrip("/") + "/"
        self._sent: set[tuple[str, str, str, str, int]] = set()
        #: File reads recorded already, by ``(real path, access, api)``: the file guard
        #: lets their repeats through without judging them again (``Enforcer.learned``).
        self.learned: set[tuple[str, Access, str]] = set()
        #: Top-level modules recorded already (``Enforcer.learned_modules``).
        self.learned_modules: set[str] = set()
        self._names: dict[str, str] = {}  # address -> the name the program looked up
        # Threads recording right now: finding the program's line reads frames and a
        # lookup resolves a name, both audited; what they raise is ours, not the program's.
        self._busy: set[int] = set()
        from _socket import getaddrinfo

        self._getaddrinfo = getaddrinfo
        self._lstat = os.lstat  # the original: created before the file wrappers

    # -- where the program did it ------------------------------------------------------

    def _typed_by_the_user(self) -> bool:
        return typed_by_the_user(self._framework)

    def where(self) -> str | None:
        """``file:line`` of the program's code behind the access; ``None`` for our own."""
        return self._site()[0]

    def _site(self) -> tuple[str | None, bool]:
        return program_site(self._cwd)

    def _record(
        self,
        family: str,
        name: str,
        access: str,
        proto: str = "",
        port: int = 0,
        addresses: tuple[str, ...] = (),
        *,
        unless_importing: bool = False,
    ) -> bool:
        """Send the event unless sent already (a repeat costs a set look-up, nothing
        built); whether it is recorded now, so that its repeats need not be reported."""
        key = (family, name, access, proto, port)
        if key in self._sent:
            return True
        thread = get_ident()
        if thread in self._busy or len(self._sent) >= _MAX_SENT:
            return False
        self._busy.add(thread)
        try:
            if self._session and not self._typed_by_the_user():
                return False
            where, importing = self._site()
            if where is None or (unless_importing and importing):
                return False
            self._sent.add(key)
            line = encode_event(Event(family, name, access, proto, port, addresses, where))
            os.write(self._fd, line)  # one write per event: the trusted side has it now
        except OSError:
            pass  # the trusted side is gone: the program still runs as it would
        finally:
            self._busy.discard(thread)
        return True

    # -- the Enforcer protocol ---------------------------------------------------------

    def refuse_file(self, report: FileAccess, verdict: Verdict) -> None:
        """Record a file access a rule would need; a rule file stays protected."""
        fix = verdict.fix
        if get_ident() in self._busy:
            return  # the frames read while recording: ours, not the program's
        if (
            (fix is None and not verdict.hidden)
            or fix == PLANTED_RULES
            or (fix is not None and fix.startswith(UNJUDGEABLE))
        ):
            # A rule file, or a name nobody can judge: never, even now.
            self._enforcing.refuse_file(report, verdict)
        if fix is None or (fix.startswith("<") and fix != EXPOSURE_ROOT):
            return  # ignored, unknowable, or a detail of enforcement: no rule to learn
        access = report.access.value
        if access == "read" and report.api in _LISTINGS:
            access = "list"
        elif access == "write" and not self._exists(report.real):
            access = "create"  # open(path, "w") of a new file: its directory must allow it
        elif access == "delete" and not self._exists(report.real):
            # unlink(missing_ok=True) of nothing fails and changes nothing: a probe, which
            # the rules refuse as "not found" too (it granted the whole directory).
            return
        elif access == "create" and report.api == "os.mkdir" and self._exists(report.real):
            # makedirs(exist_ok=True) of a directory that is there: mkdir fails and changes
            # nothing. The program looked at it, no more: it granted the whole directory.
            access = "read"
        # The import system lists the directories of sys.path to find modules; a refused
        # listing only makes it look file by file, so it needs no rule of its own.
        recorded = self._record("file", report.real, access, unless_importing=access == "list")
        if recorded and report.named != report.real and access in ("read", "write", "execute"):
            self._links(report.named)
        if recorded and (report.access is _READ or report.access is _EXECUTE):
            # What a read becomes depends on its path and function only (a write's on
            # whether the file exists): its repeats need not be judged again.
            if len(self.learned) >= _MAX_SENT:
                self.learned.clear()
            self.learned.add((report.real, report.access, report.api))

    def _links(self, named: str) -> None:
        """Record the symbolic links the program named a file by (``bin/python3`` for
        ``python3.11``): the next run must find the file by that name too."""
        if named.startswith("/proc/self/fd/") or "\0" in named:
            return  # the sandbox's own pinned route, or no path at all
        thread = get_ident()
        self._busy.add(thread)  # the looks below are ours, not the program's
        try:
            from posix import getcwd

            from pysandboxes._policy.links import link_chain

            links = link_chain(os.path.join(getcwd(), named))
        except (OSError, ValueError):
            links = []
        finally:
            self._busy.discard(thread)
        for link in links:
            self._record("file", link, "link")

    def _exists(self, path: str) -> bool:
        return exists(path, self._lstat)

    def env_read(self, name: str) -> bool:
        """Record a read of a variable no rule forwards (called by ``_inside.guards.env``);
        whether it is recorded, so that its repeats need not be reported."""
        return self._record("env", name, "read")

    def refuse_call(self, qualname: str, category: str, message: str) -> None:
        """Record a sensitive call by its function and category; a reach into the
        guards, which no rule can allow, stays refused."""
        if get_ident() in self._busy:
            return  # the frames read while recording: ours, not the program's
        if qualname == INTERNALS or qualname in SUBINTERPRETER_FUNCTIONS:
            self._enforcing.refuse_call(qualname, category, message)
        self._record("call", qualname, category)

    def refuse_connection(
        self, message: str, address: str, rule: str | None, target: Connection | None = None
    ) -> None:
        """Record a connection, bind or lookup by the name the program used."""
        if target is None or get_ident() in self._busy:
            return  # a socket no rule can speak of (raw, abstract): nothing to learn
        if target.direction == "lookup":
            self._learn_name(target.host)
            return
        host = self._names.get(target.host, target.host)
        self._record("net", host, target.direction, target.proto, target.port, target.addresses)

    def refuse_import(self, module: str, message: str, category: str | None = None) -> None:
        """Record an import; ``category`` marks a native extension the API rules guard.
        A subinterpreter's module stays refused by the API guard."""
        if category is not None and module in SUBINTERPRETER_MODULES:
            self._enforcing.refuse_import(module, message, category)
        recorded = self._record("import", module, "native" if category else "module")
        # Never the sandbox's own modules, which stay refused whatever was learned.
        if recorded and category is None and not module.startswith("pysandboxes"):
            if len(self.learned_modules) >= 4096:
                self.learned_modules.clear()
            self.learned_modules.add(module)

    def eval_used(self, key: str, name: str) -> None:
        """Record a construct an evaluated source used (``key``: ``syntax``, ``call``,
        ``attribute``, ``import`` or ``magic``; see ``_inside.evaluation.learning``)."""
        self._record("eval", name, key)

    def _learn_name(self, name: str) -> None:
        """Remember the addresses ``name`` leads to: the program will connect to one of
        them by address, and the rule should name the host it asked for."""
        if name in self._names.values() or len(self._names) > 4096:
            return
        thread = get_ident()
        self._busy.add(thread)  # the lookup below is audited too
        try:
            answers = self._getaddrinfo(name, None)
        except OSError:
            answers = []
        finally:
            self._busy.discard(thread)
        for answer in answers:
            self._names.setdefault(str(answer[4][0]).split("%")[0], name)


def watched_environ(report: Learning, forwarded: frozenset[str]) -> None:
    """Record the program's reads of variables no rule forwards (see ``_inside.guards.env``)."""
    from pysandboxes._inside.guards.env import watch_environ

    def read(name: str) -> bool:
        return name in forwarded or report.env_read(name)

    watch_environ(read)
