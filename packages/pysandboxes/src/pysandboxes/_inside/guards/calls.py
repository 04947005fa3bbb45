"""The call guard: sensitive functions the audit hook sees, judged by ``python-api=``.

CPython raises one audit event for a whole family of functions (``os.exec`` for the eight
``os.exec*``, ``subprocess.Popen`` for ``run``, ``call``, ``check_output``...). An event is
allowed when a rule allows any function of its family, or its category: granting
``subprocess.run`` must not be undone by the ``Popen`` that ``run`` makes. Events with no
rule are refused, naming the function, its category and both lines that would allow it.

``_posixsubprocess.fork_exec`` raises no event (``multiprocessing`` calls it directly), so
the module's function is replaced by a judged one before anything can bind it, and
importing the module again is refused. A program may still signal itself (``os.kill`` of
its own pid), as ``signal.raise_signal`` does unaudited, and its own children, which run
in this sandbox under these rules (``multiprocessing.Pool`` ending its workers).

``ctypes`` reads and writes memory and calls C without any event (``cast``, ``memmove``, a
pointer indexed past its object), so without a ``native`` grant its C half, ``_ctypes``,
cannot be imported at all: ``import ctypes`` gives the stand-in of ``_inside/datactypes``
(the C types and their sizes, no memory), whose refusals arrive here as
``pysandboxes.native`` events. While learning, the real module loads, and what it reports
(a library opened, a symbol looked up, memory read by address) is learned. Signals reach
other processes without ``os.kill`` too: ``pidfd_send_signal`` (no event: replaced by a
judged copy) and ``fcntl``/``ioctl`` asking for SIGIO to be sent to another process.

A subinterpreter runs with none of the Python layer, and CPython does not always report its
creation: the modules that make one are not importable unless a rule names a subinterpreter
function (``_policy.registry.SUBINTERPRETER_FUNCTIONS``).
"""

from __future__ import annotations

import os

from pysandboxes._inside.enforce import call_refusal
from pysandboxes._inside.guards.fallbacks import import_falls_back
from pysandboxes._inside.guards.sealedcalls import (
    EXTENSION_EVENT,
    REFUSE_EVENT,
    SEALED_EVENTS,
    own_child,
)
from pysandboxes._inside.guards.values import plain_str
from pysandboxes._policy.registry import SUBINTERPRETER_FUNCTIONS, SUBINTERPRETER_MODULES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from pysandboxes._inside.decisions import DecisionLog
    from pysandboxes._inside.enforce import Enforcer
    from pysandboxes._policy.judge import ApiJudge

_SUBPROCESS = (
    "subprocess.Popen",
    "subprocess.call",
    "subprocess.check_call",
    "subprocess.check_output",
    "subprocess.getoutput",
    "subprocess.getstatusoutput",
    "subprocess.run",
    "asyncio.create_subprocess_exec",
    "asyncio.create_subprocess_shell",
    "asyncio.subprocess.create_subprocess_exec",
    "asyncio.subprocess.create_subprocess_shell",
    "asyncio.base_events.BaseEventLoop.subprocess_exec",
    "asyncio.base_events.BaseEventLoop.subprocess_shell",
)
_MULTIPROCESSING = (
    "multiprocessing.Pool",
    "multiprocessing.Process.start",
    "multiprocessing.process.BaseProcess.start",
)
#: The functions that reach ``_posixsubprocess.fork_exec``: a grant of one allows it.
FORK_EXEC_FAMILY = ("_posixsubprocess.fork_exec", *_SUBPROCESS, *_MULTIPROCESSING, "os.popen")
_EXEC = tuple(f"os.exec{suffix}" for suffix in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe"))
_SPAWN = tuple(f"os.spawn{suffix}" for suffix in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe"))
#: Any of them granted gives the real ctypes, and with it all the others.
_NATIVE = (
    "ctypes.CDLL",
    "ctypes.PyDLL",
    "ctypes.pythonapi",
    "ctypes.cast",
    "ctypes.memmove",
    "ctypes.memset",
    "ctypes.string_at",
    "ctypes.wstring_at",
)

#: audit event -> (the function a refusal names, every function whose grant allows it)
_FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "os.system": ("os.system", ("os.system",)),
    "subprocess.Popen": ("subprocess.Popen", (*_SUBPROCESS, "os.popen")),
    "os.exec": ("os.execv", (*_EXEC, *_SPAWN, "pty.spawn", *_MULTIPROCESSING)),
    "os.posix_spawn": (
        "os.posix_spawn",
        ("os.posix_spawn", "os.posix_spawnp", *_SUBPROCESS, "os.popen"),
    ),
    "os.spawn": ("os.spawnv", _SPAWN),
    "os.fork": ("os.fork", ("os.fork", *_SPAWN, *_MULTIPROCESSING)),
    "os.forkpty": ("os.forkpty", ("os.forkpty", "pty.fork", "pty.spawn")),
    "os.killpg": ("os.killpg", ("os.killpg",)),
    "signal.pthread_kill": ("signal.pthread_kill", ("signal.pthread_kill",)),
    # 3.12 crashes when the hook refuses this event, and 3.13 no longer raises it for
    # _interpreters: their modules are refused first (see _refuse_subinterpreters).
    "cpython.PyInterpreterState_New": ("_xxsubinterpreters.create", SUBINTERPRETER_FUNCTIONS),
    "pickle.find_class": ("pickle.loads", ("pickle.loads", "pickle.load", "pickle.Unpickler")),
    "ctypes.dlopen": ("ctypes.CDLL", _NATIVE),
    "ctypes.dlsym": ("ctypes.CDLL", _NATIVE),
    "ctypes.dlsym/handle": ("ctypes.CDLL", _NATIVE),
    "ctypes.call_function": ("ctypes.CDLL", _NATIVE),
    "ctypes.cdata": ("ctypes.cast", _NATIVE),
    "ctypes.string_at": ("ctypes.string_at", _NATIVE),
    "ctypes.wstring_at": ("ctypes.wstring_at", _NATIVE),
    "ctypes.PyObj_FromPtr": ("ctypes.cast", _NATIVE),
    "ctypes.cdata/buffer": ("ctypes.cast", _NATIVE),
    "ctypes.addressof": ("ctypes.cast", _NATIVE),
}


#: The stand-in ctypes's refusals (``datactypes``): its key -> what, and the function named.
_STAND_IN: dict[str, tuple[str, str]] = {
    "CDLL": ("Loading a library (ctypes.CDLL, ctypes.cdll)", "ctypes.CDLL"),
    "PyDLL": ("Loading a library (ctypes.PyDLL, ctypes.pydll)", "ctypes.PyDLL"),
    "pythonapi": ("Calling the interpreter's C functions (ctypes.pythonapi)", "ctypes.pythonapi"),
    "in_dll": ("Reading a library's variable (in_dll)", "ctypes.CDLL"),
    "function address": ("Calling C at an address (a CFUNCTYPE function)", "ctypes.CDLL"),
    "cast": ("Following a pointer made by ctypes.cast", "ctypes.cast"),
    "address": ("Following a pointer set from a number (memory by address)", "ctypes.cast"),
    "from_address": ("Reading memory by address (from_address)", "ctypes.cast"),
    "from_buffer": ("Sharing a buffer's memory (from_buffer)", "ctypes.cast"),
    "addressof": ("Taking a ctypes object's address (ctypes.addressof)", "ctypes.cast"),
    "pointer index": ("Indexing a ctypes pointer past the object it points to", "ctypes.cast"),
    "memmove": ("Copying memory by address (ctypes.memmove)", "ctypes.memmove"),
    "memset": ("Filling memory by address (ctypes.memset)", "ctypes.memset"),
    "string_at": ("Reading memory by address (ctypes.string_at)", "ctypes.string_at"),
    "wstring_at": ("Reading memory by address (ctypes.wstring_at)", "ctypes.wstring_at"),
    "resize": ("Resizing a ctypes object's memory (ctypes.resize)", "ctypes.cast"),
    "SetPointerType": ("Changing a pointer type (ctypes.SetPointerType)", "ctypes.cast"),
}
#: Raised by the stand-in ctypes (the program raising it can only refuse itself).
STAND_IN_EVENT = "pysandboxes.native"

#: Extension modules that act in C where no audit event reports it: without a ``native``
#: grant they are not importable (a ModuleNotFoundError, so libraries fall back).
_NATIVE_MODULES = {
    "_ctypes": "ctypes reads and writes memory and calls C unseen",
    "_tkinter": "its Tcl interpreter runs programs, opens files and sockets unseen",
    "readline": "it reads and writes history and init files unseen",
    # dbm.ndbm and dbm.gnu: dbm and shelve fall back to dbm.dumb, whose files are judged.
    "_dbm": "it opens, creates and truncates database files unseen",
    "_gdbm": "it opens, creates and truncates database files unseen",
    # CPython's C-API test modules: new interpreters, raw memory, unseen.
    "_testcapi": "it runs code in new interpreters and writes raw memory unseen",
    "_testinternalcapi": "it runs code in new interpreters and reads raw memory unseen",
}

#: Extension modules whose functions are replaced here: importing one again would hand
#: out the originals (a fresh ``_imp`` holds the unjudged ``create_dynamic`` and
#: ``create_builtin``, which make every other module again, ``_ctypes`` included; a fresh
#: ``_socket`` the system's lookups instead of the pinned answers).
GUARDED_MODULES = frozenset(
    {"_imp", "_posixsubprocess", "_posixshmem", "_signal", "_socket", "posix"}
)

# fcntl commands and ioctl requests that make the kernel signal another process (SIGIO).
_F_SETOWN, _F_SETOWN_EX = 8, 15
_SETOWN_IOCTLS = frozenset({0x8901, 0x8902})  # FIOSETOWN, SIOCSPGRP
_TERMINAL_INPUT_IOCTLS = frozenset({0x5412, 0x541C})  # TIOCSTI, TIOCLINUX
#: Variables naming code the C library or OpenSSL loads after start-up (besides LD_* and
#: OPENSSL_*), refused to os.putenv.
_CODE_LOADING_VARIABLES = frozenset(
    {"GCONV_PATH", "LOCPATH", "SSL_CERT_FILE", "SSL_CERT_DIR", "MALLOC_CONF"}
)


class CallGuard:
    """Refuses the sensitive calls no ``python-api=`` rule allows."""

    def __init__(
        self,
        api: ApiJudge,
        enforcer: Enforcer,
        rule_file: str,
        log: DecisionLog | None = None,
    ) -> None:
        self._api = api
        self._log = log
        self._enforcer = enforcer
        self._rule_file = rule_file
        self._pid = os.getpid()
        self._allowed = {
            event: self.family_allowed(name, family) for event, (name, family) in _FAMILIES.items()
        }
        # Signalling another process is refused unless a rule allows os.kill itself.
        self._signals_watched = not self.family_allowed("os.kill", ())
        self._native = self.family_allowed("ctypes.CDLL", _NATIVE)
        #: Whether ``import ctypes`` gives the stand-in (no native grant, not learning).
        self.stands_in = not self._native and enforcer.stands_in_for_native
        self._subinterpreters = self.family_allowed(
            "_interpreters.create", SUBINTERPRETER_FUNCTIONS
        )

    def family_allowed(self, name: str, family: Iterable[str]) -> bool:
        """Whether the event of ``name`` passes: its own verdict, unless it has no rule of
        its own and another function of the family that raises it is named by an ALLOW."""
        api = self._api
        if api.judge(name).allowed:
            return True
        if api.names(name):
            return False  # a DENY naming the function wins over the family's grants
        return any(api.names(other) and api.judge(other).allowed for other in family)

    @property
    def events(self) -> dict[str, Callable[[tuple[Any, ...]], None]]:
        """The audit events judged here; events a rule allows are not watched at all."""
        handlers: dict[str, Callable[[tuple[Any, ...]], None]] = {
            event: self._refusal(event) for event, allowed in self._allowed.items() if not allowed
        }
        if self._signals_watched:
            handlers["os.kill"] = self._kill
            handlers["fcntl.fcntl"] = self._fcntl
        if "ctypes.dlopen" in handlers:
            handlers["ctypes.dlopen"] = self._dlopen
        handlers["fcntl.ioctl"] = self._ioctl
        # Extension and builtin modules are judged when created (the sealed copies of
        # _imp.create_dynamic and create_builtin), whatever route imports them: no
        # handler for the C "import" event, which every fresh import would pay for.
        handlers[EXTENSION_EVENT] = self._extension
        handlers["os.putenv"] = self._putenv
        handlers[REFUSE_EVENT] = self._refuse_reported
        handlers[STAND_IN_EVENT] = self._stand_in
        if not self.family_allowed("resource.prlimit", ()):
            handlers["resource.prlimit"] = self._prlimit
        if self._log is not None:  # audit-log=: the allowed calls are watched, to be logged
            for event, allowed in self._allowed.items():
                if allowed and event not in handlers:
                    handlers[event] = self._logged(event, self._log)
        return handlers

    def _logged(self, event: str, log: DecisionLog) -> Callable[[tuple[Any, ...]], None]:
        qualname = _FAMILIES[event][0]
        verdict = self._api.judge(qualname)
        category = verdict.category or "process-control"

        def allowed(args: tuple[Any, ...]) -> None:
            log.allowed("call", qualname, category, verdict.rule)

        return allowed

    def _refusal(self, event: str) -> Callable[[tuple[Any, ...]], None]:
        def refuse(args: tuple[Any, ...]) -> None:
            self.refuse(event)

        return refuse

    def refuse(self, event: str) -> None:
        """Refuse the call behind ``event`` with the lines that would allow it."""
        qualname = _FAMILIES[event][0] if event in _FAMILIES else event
        category = self._api.judge(qualname).category or "process-control"
        message = call_refusal(self._api, qualname, category, self._rule_file)
        self._enforcer.refuse_call(qualname, category, message)

    def _kill(self, args: tuple[Any, ...]) -> None:
        if args and type(args[0]) is int and args[0] == self._pid:
            return  # signalling itself: what signal.raise_signal does, unaudited
        if args and type(args[0]) is int and args[0] > 0 and own_child(args[0]):
            # A child of this process (multiprocessing.Pool terminating its workers):
            # it runs in this sandbox, under these rules, so the signal reaches nothing
            # the program could not already. Other processes stay refused.
            return
        self.refuse("os.kill")

    def _dlopen(self, args: tuple[Any, ...]) -> None:
        # ctypes opens the interpreter itself (None) when imported; without dlsym and
        # foreign calls that handle does nothing, so importing ctypes keeps working.
        if args and args[0] is None:
            return
        self.refuse("ctypes.dlopen")

    def _setown(self, target: object) -> bool:
        """Whether ``target`` names a process other than this one (exact ints only)."""
        return not (type(target) is int and target in (0, self._pid))

    def _fcntl(self, args: tuple[Any, ...]) -> None:
        if len(args) < 3 or type(args[1]) is not int:
            return
        if args[1] == _F_SETOWN_EX or (args[1] == _F_SETOWN and self._setown(args[2])):
            self.refuse("os.kill")

    def _ioctl(self, args: tuple[Any, ...]) -> None:
        if len(args) < 3 or type(args[1]) is not int:
            return
        if args[1] in _TERMINAL_INPUT_IOCTLS:
            # Typing into the terminal runs commands in the user's shell after the
            # sandbox ends: no rule can allow it.
            self._enforcer.refuse_call(
                "fcntl.ioctl",
                "process-control",
                "Writing into the terminal's input (TIOCSTI, TIOCLINUX) is refused: what "
                "a sandbox types there, the user's shell runs. No rule can allow it.",
            )
        if self._signals_watched and args[1] in _SETOWN_IOCTLS and self._setown(args[2]):
            self.refuse("os.kill")

    def _putenv(self, args: tuple[Any, ...]) -> None:
        # The C library and OpenSSL load code these name, when they first need it: set by
        # the program to a file it wrote, they would run native code without a grant.
        raw = args[0] if args else None
        name = os.fsdecode(bytes(raw) if isinstance(raw, (bytes, bytearray)) else str(raw))
        if name in _CODE_LOADING_VARIABLES or name.startswith(("LD_", "OPENSSL_")):
            self._enforcer.refuse_call(
                "os.putenv",
                "native",
                f"Setting {name} is refused: the C library or OpenSSL would load the code it "
                "names into this process. Forward it with an env= rule instead (its value "
                "is then fixed before the program starts).",
            )

    def _prlimit(self, args: tuple[Any, ...]) -> None:
        # prlimit(pid, RLIMIT_CPU, (1, 1)) kills another process of the same user.
        if args and type(args[0]) is int and args[0] in (0, self._pid):
            return
        self.refuse("resource.prlimit")

    def _refuse_reported(self, args: tuple[Any, ...]) -> None:
        # Raised by the sealed copies below; the program raising it refuses itself.
        if args and type(args[0]) is str and args[0] in SEALED_EVENTS:
            self.refuse(args[0])

    def _stand_in(self, args: tuple[Any, ...]) -> None:
        key = plain_str(args[0]) if args else None
        what, qualname = _STAND_IN.get(key or "", ("Reaching C through ctypes", "ctypes.cast"))
        message = (
            f"{what} is refused by the API guard (category: native): without a native grant, "
            "ctypes has the C types and their sizes here, with no memory behind them. Add "
            f"'python-api=ALLOW:native' to {self._rule_file} to allow it."
        )
        if key == "pythonapi":
            # As where ctypes has no pythonapi (PyPy): `from ctypes import pythonapi` in a
            # try/except ImportError falls back (prompt_toolkit's SIGINT handling).
            self._enforcer.refuse_import(qualname, message, "native")
        self._enforcer.refuse_call(qualname, "native", message)

    def _extension(self, args: tuple[Any, ...]) -> None:
        """An extension module created from a spec (``_imp.create_dynamic``): judged by
        its name and by its file, as importing it by name is."""
        spec = args[0] if args else None
        name = getattr(spec, "name", None)
        origin = getattr(spec, "origin", None)
        name, origin = plain_str(name), plain_str(origin)
        if name is not None:
            self._import((name,))
        if origin is not None:
            self._import((origin.rpartition("/")[2].partition(".")[0],))

    def _import(self, args: tuple[Any, ...]) -> None:
        plain = plain_str(args[0]) if args else None
        if plain is None:
            return
        if plain in SUBINTERPRETER_MODULES and not self._subinterpreters:
            self._refuse_subinterpreters(plain)
        # CPython initialises an extension module from the last part of a dotted name.
        name = plain.rpartition(".")[2]
        if name in SUBINTERPRETER_MODULES and not self._subinterpreters:
            self._refuse_subinterpreters(name)
        why = _NATIVE_MODULES.get(name)
        # Learning: what the program does with ctypes is learned, not its import; nor an
        # import its code goes on without, refused under the rules too.
        learning = why is not None and not self._native and not self.stands_in
        if learning and (name == "_ctypes" or import_falls_back()):
            why = None
        if why is not None and not self._native:
            self._enforcer.refuse_import(
                name,
                f"Importing {name} is denied by the API guard (category: native): {why}. Add "
                f"'python-api=ALLOW:native' to {self._rule_file} to allow it.",
                "native",
            )
        if name in GUARDED_MODULES:
            hint = (
                f" To run programs, add 'python-api=ALLOW:subprocess.run' to {self._rule_file}."
                if name == "_posixsubprocess"
                else ""
            )
            self._enforcer.refuse_call(
                name,
                "process-exec" if name == "_posixsubprocess" else "process-control",
                f"Importing {name} again is denied by the API guard: a fresh copy would hand "
                f"out the functions the sandbox judges.{hint}",
            )

    def _refuse_subinterpreters(self, module: str) -> None:
        grant = "concurrent.interpreters.create" if "." in module else f"{module}.create"
        self._enforcer.refuse_import(
            module,
            f"Importing {module} is denied by the API guard (category: process-exec): a "
            "subinterpreter runs code with none of the sandbox's Python layer (no audit "
            f"hook, no guards). Add 'python-api=ALLOW:{grant}' to {self._rule_file} to "
            "allow it; learning never does.",
            "process-exec",
        )
