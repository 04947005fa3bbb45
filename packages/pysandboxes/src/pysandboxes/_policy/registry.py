"""The registry of sensitive functions: what ``python-api=`` rules name, as data.

Importing a module is not the right to call everything in it: the functions listed here are
denied unless a ``python-api=ALLOW:`` rule names them or their category. This module only
declares them; the parser checks rule targets against it, the call guard patches what
``resolve`` finds on the running interpreter, and learning marks the categories of
``DANGEROUS_CATEGORIES`` with ⚠.

A qualified name is the one a user writes: the module as imported, then the attribute path
(``threading.Thread.start``, ``sys.monitoring.use_tool_id``). A C function is listed under every
module that exposes it (``os.system`` and its twins ``posix.system``, ``nt.system``), since
each is a separate door. Names absent from the running version or platform stay registered,
so one rule file means the same thing everywhere; ``resolve`` returns ``None`` for them. Aliases
that a module binds at import time (``subprocess._fork_exec``) are the guard's business, not
names a user should have to write.

It holds the names of the existing implementation's registry (pysandboxes 0.7.0, 152 names),
each in the same category, so a file written for it still parses and its grants keep their
meaning; the names added here are denied by default like the others. Sources: ``dir()`` of the
modules on CPython 3.11 to 3.13, and the CPython 3.14 sources.
"""

from __future__ import annotations

from types import MappingProxyType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

CATEGORIES: tuple[str, ...] = (
    "process-exec",
    "process-control",
    "privileges",
    "threads",
    "native",
    "introspection",
    "dynamic-code",
    "deserialization",
)

#: The categories learning marks with ⚠: each one lets code leave the Python layer's reach.
DANGEROUS_CATEGORIES: frozenset[str] = frozenset(
    {"process-exec", "privileges", "native", "dynamic-code", "deserialization"}
)

_EXEC = "process-exec"
_CONTROL = "process-control"
_PRIV = "privileges"
_THREADS = "threads"
_NATIVE = "native"
_INTRO = "introspection"
_CODE = "dynamic-code"
_DESER = "deserialization"

#: Functions that start another interpreter in this process. The audit hook, the guards and
#: the patched modules belong to one interpreter: a new one runs with none of the Python
#: layer. Their modules (``SUBINTERPRETER_MODULES``) import only when a rule names one of
#: these; learning never writes such a rule.
SUBINTERPRETER_FUNCTIONS: tuple[str, ...] = (
    "_interpreters.call",
    "_interpreters.create",
    "_interpreters.exec",
    "_interpreters.run_func",
    "_interpreters.run_string",
    "_xxsubinterpreters.create",
    "_xxsubinterpreters.run_string",
    "concurrent.futures.InterpreterPoolExecutor",
    "concurrent.interpreters.create",
)
#: Their modules by version: 3.11 and 3.12 (``_xxsubinterpreters``), 3.13 (``_interpreters``),
#: 3.14 (``concurrent.interpreters``, over ``_interpreters``).
SUBINTERPRETER_MODULES = frozenset(
    {"_xxsubinterpreters", "_interpreters", "concurrent.interpreters"}
)

# Runs code outside the patched interpreter: another program, or another interpreter.
# Absent: os.vfork and os.fexecve do not exist in CPython (os.execve takes a descriptor).
# Out: os.openpty, a pair of descriptors; the fork that uses it (os.forkpty, pty.fork) is in.
_PROCESS_EXEC: dict[str, str] = {
    # The shell, the exec and spawn families (Python wrappers over fork and exec), fork.
    "os.execl": _EXEC,
    "os.execle": _EXEC,
    "os.execlp": _EXEC,
    "os.execlpe": _EXEC,
    "os.execv": _EXEC,
    "os.execve": _EXEC,
    "os.execvp": _EXEC,
    "os.execvpe": _EXEC,
    "os.fork": _EXEC,
    "os.forkpty": _EXEC,
    "os.popen": _EXEC,
    "os.posix_spawn": _EXEC,
    "os.posix_spawnp": _EXEC,
    "os.spawnl": _EXEC,
    "os.spawnle": _EXEC,
    "os.spawnlp": _EXEC,
    "os.spawnlpe": _EXEC,
    "os.spawnv": _EXEC,
    "os.spawnve": _EXEC,
    "os.spawnvp": _EXEC,
    "os.spawnvpe": _EXEC,
    "os.startfile": _EXEC,
    "os.system": _EXEC,
    # The C twins: ``import posix`` (or ``nt``) reaches them without going through os.
    "posix.execv": _EXEC,
    "posix.execve": _EXEC,
    "posix.fork": _EXEC,
    "posix.forkpty": _EXEC,
    "posix.posix_spawn": _EXEC,
    "posix.posix_spawnp": _EXEC,
    "posix.system": _EXEC,
    "nt.execv": _EXEC,
    "nt.execve": _EXEC,
    "nt.spawnv": _EXEC,
    "nt.spawnve": _EXEC,
    "nt.startfile": _EXEC,
    "nt.system": _EXEC,
    # The inner doors every subprocess call ends in (POSIX, Windows).
    "_posixsubprocess.fork_exec": _EXEC,
    "_winapi.CreateProcess": _EXEC,
    "subprocess.Popen": _EXEC,
    "subprocess.call": _EXEC,
    "subprocess.check_call": _EXEC,
    "subprocess.check_output": _EXEC,
    "subprocess.getoutput": _EXEC,
    "subprocess.getstatusoutput": _EXEC,
    "subprocess.run": _EXEC,
    "pty.fork": _EXEC,
    "pty.spawn": _EXEC,
    "asyncio.base_events.BaseEventLoop.subprocess_exec": _EXEC,
    "asyncio.base_events.BaseEventLoop.subprocess_shell": _EXEC,
    "asyncio.create_subprocess_exec": _EXEC,
    "asyncio.create_subprocess_shell": _EXEC,
    "asyncio.subprocess.create_subprocess_exec": _EXEC,
    "asyncio.subprocess.create_subprocess_shell": _EXEC,
    # Worker processes; BaseProcess.start also catches the Process of every get_context().
    "concurrent.futures.ProcessPoolExecutor": _EXEC,
    "multiprocessing.Pool": _EXEC,
    "multiprocessing.Process.start": _EXEC,
    "multiprocessing.process.BaseProcess.start": _EXEC,
    **dict.fromkeys(SUBINTERPRETER_FUNCTIONS, _EXEC),
}

# Acts on other processes, or on the resources this one shares with them.
# Out: signal.signal installs a handler in this process only (IPython, shutdown need it).
# Out: os._exit ends only the calling process, and is how a forked child leaves.
# Out: os.pidfd_open only observes; signal.pidfd_send_signal, which emits, is in.
_PROCESS_CONTROL: dict[str, str] = {
    "os.abort": _CONTROL,
    "os.kill": _CONTROL,
    "os.killpg": _CONTROL,
    "os.login_tty": _CONTROL,
    "os.nice": _CONTROL,
    "os.sched_setaffinity": _CONTROL,
    "os.sched_setparam": _CONTROL,
    "os.sched_setscheduler": _CONTROL,
    "os.setpgid": _CONTROL,
    "os.setpgrp": _CONTROL,
    "os.setpriority": _CONTROL,
    "os.setsid": _CONTROL,
    "os.tcsetpgrp": _CONTROL,
    "posix.abort": _CONTROL,
    "posix.kill": _CONTROL,
    "posix.killpg": _CONTROL,
    "posix.login_tty": _CONTROL,
    "posix.nice": _CONTROL,
    "posix.sched_setaffinity": _CONTROL,
    "posix.sched_setparam": _CONTROL,
    "posix.sched_setscheduler": _CONTROL,
    "posix.setpgid": _CONTROL,
    "posix.setpgrp": _CONTROL,
    "posix.setpriority": _CONTROL,
    "posix.setsid": _CONTROL,
    "posix.tcsetpgrp": _CONTROL,
    "nt.abort": _CONTROL,
    "nt.kill": _CONTROL,
    # Signal emitters, and the timers that emit; _signal is the C module signal wraps.
    "signal.alarm": _CONTROL,
    "signal.pidfd_send_signal": _CONTROL,
    "signal.pthread_kill": _CONTROL,
    "signal.raise_signal": _CONTROL,
    "signal.setitimer": _CONTROL,
    "_signal.alarm": _CONTROL,
    "_signal.pidfd_send_signal": _CONTROL,
    "_signal.pthread_kill": _CONTROL,
    "_signal.raise_signal": _CONTROL,
    "_signal.setitimer": _CONTROL,
    # prlimit also takes another pid.
    "resource.prlimit": _CONTROL,
    "resource.setrlimit": _CONTROL,
    # 3.14: run code in, or read the stacks of, another Python process.
    "_remote_debugging.RemoteUnwinder": _CONTROL,
    "sys.remote_exec": _CONTROL,
}

# Changes the identity, the namespaces or the root of the process.
# Absent: os.setfsuid and os.setfsgid do not exist in CPython.
_PRIVILEGES: dict[str, str] = {
    "os.chroot": _PRIV,
    "os.initgroups": _PRIV,
    "os.setegid": _PRIV,
    "os.seteuid": _PRIV,
    "os.setgid": _PRIV,
    "os.setgroups": _PRIV,
    "os.setns": _PRIV,
    "os.setregid": _PRIV,
    "os.setresgid": _PRIV,
    "os.setresuid": _PRIV,
    "os.setreuid": _PRIV,
    "os.setuid": _PRIV,
    "os.umask": _PRIV,
    "os.unshare": _PRIV,
    "posix.chroot": _PRIV,
    "posix.initgroups": _PRIV,
    "posix.setegid": _PRIV,
    "posix.seteuid": _PRIV,
    "posix.setgid": _PRIV,
    "posix.setgroups": _PRIV,
    "posix.setns": _PRIV,
    "posix.setregid": _PRIV,
    "posix.setresgid": _PRIV,
    "posix.setresuid": _PRIV,
    "posix.setreuid": _PRIV,
    "posix.setuid": _PRIV,
    "posix.umask": _PRIV,
    "posix.unshare": _PRIV,
    "nt.umask": _PRIV,
}

# Starting threads and acting on all of them. threading.settrace and setprofile stay here, as in
# the existing implementation; their *_all_threads forms are introspection there, and here.
# Out: concurrent.futures.ThreadPoolExecutor starts its workers through threading.Thread.start.
_THREADS_TABLE: dict[str, str] = {
    "_thread.interrupt_main": _THREADS,
    "_thread.stack_size": _THREADS,
    "_thread.start_joinable_thread": _THREADS,
    "_thread.start_new": _THREADS,
    "_thread.start_new_thread": _THREADS,
    "threading.Thread.start": _THREADS,
    "threading._start_joinable_thread": _THREADS,
    "threading._start_new_thread": _THREADS,
    "threading.setprofile": _THREADS,
    "threading.settrace": _THREADS,
    "threading.stack_size": _THREADS,
}

# Loading native code, and reading or writing memory by address. This is friction, not a wall:
# every ctypes type has from_address and every prototype calls an address, so keep ctypes out of
# python-import= when it is not needed. ctypes.pythonapi is an instance built at import time:
# the name stands for reaching it.
# Out: ctypes.cdll and ctypes.pydll (LibraryLoader) load only by constructing CDLL or PyDLL.
# Out: ctypes.util.find_library loads nothing; the ldconfig it runs meets the process-exec doors.
# Out: mmap.mmap maps memory that runs nothing by itself (multiprocessing's heap uses it).
# Out: os.memfd_create makes an anonymous file; running it still needs os.execve.
_NATIVE_TABLE: dict[str, str] = {
    "ctypes.CDLL": _NATIVE,
    "ctypes.OleDLL": _NATIVE,
    "ctypes.PyDLL": _NATIVE,
    "ctypes.WinDLL": _NATIVE,
    "ctypes.cast": _NATIVE,
    "ctypes.memmove": _NATIVE,
    "ctypes.memset": _NATIVE,
    "ctypes.pythonapi": _NATIVE,
    "ctypes.string_at": _NATIVE,
    "ctypes.wstring_at": _NATIVE,
    "_ctypes.LoadLibrary": _NATIVE,
    "_ctypes.PyObj_FromPtr": _NATIVE,
    "_ctypes.call_cdeclfunction": _NATIVE,
    "_ctypes.call_function": _NATIVE,
    "_ctypes.dlopen": _NATIVE,
    "_ctypes.dlsym": _NATIVE,
}

# Hooks and heap or frame walks that reach the guards' own objects, or undo their patches
# (importlib.reload puts the original functions back on a module).
# Out: sys._getframe: logging, typing, dataclasses use it; it shows the caller's own stack.
# Out: inspect (currentframe, stack, trace) wraps sys._getframe, for the same reason.
# Out: sys.setrecursionlimit: at worst the sandboxed process crashes, alone.
_INTROSPECTION: dict[str, str] = {
    "faulthandler.dump_traceback_later": _INTRO,
    "faulthandler.enable": _INTRO,
    "faulthandler.register": _INTRO,
    "gc.get_objects": _INTRO,
    "gc.get_referents": _INTRO,
    "gc.get_referrers": _INTRO,
    "importlib.reload": _INTRO,
    "sys._current_exceptions": _INTRO,
    "sys._current_frames": _INTRO,
    "sys._setprofileallthreads": _INTRO,
    "sys._settraceallthreads": _INTRO,
    "sys.addaudithook": _INTRO,
    "sys.setprofile": _INTRO,
    "sys.settrace": _INTRO,
    "sys.monitoring.clear_tool_id": _INTRO,
    "sys.monitoring.free_tool_id": _INTRO,
    "sys.monitoring.register_callback": _INTRO,
    "sys.monitoring.set_events": _INTRO,
    "sys.monitoring.set_local_events": _INTRO,
    "sys.monitoring.use_tool_id": _INTRO,
    "threading.setprofile_all_threads": _INTRO,
    "threading.settrace_all_threads": _INTRO,
}

# Registered so that python-api=ALLOW:dynamic-code stays expressible; the eval guard, not the
# call guard, enforces them (the eval-* sub-language).
_DYNAMIC_CODE: dict[str, str] = {
    "builtins.compile": _CODE,
    "builtins.eval": _CODE,
    "builtins.exec": _CODE,
}

# A pickle stream is a program: its opcodes import and call any callable. The pure-Python
# twins (pickle._loads…) and the C module run the same opcodes; marshal builds code objects.
# In: shelve.open, since reading a shelf unpickles the file through an Unpickler bound at import.
# Out: copyreg registers reducers and runs no stream; xmlrpc parses values, never calls.
_DESERIALIZATION: dict[str, str] = {
    "_pickle.Unpickler": _DESER,
    "_pickle.load": _DESER,
    "_pickle.loads": _DESER,
    "marshal.load": _DESER,
    "marshal.loads": _DESER,
    "pickle.Unpickler": _DESER,
    "pickle._Unpickler": _DESER,
    "pickle._load": _DESER,
    "pickle._loads": _DESER,
    "pickle.load": _DESER,
    "pickle.loads": _DESER,
    "shelve.open": _DESER,
}


def _merge(*tables: Mapping[str, str]) -> dict[str, str]:
    """Join the category tables; a name registered twice is a bug in this module."""
    merged: dict[str, str] = {}
    for table in tables:
        for qualname, category in table.items():
            if qualname in merged:
                raise AssertionError(f"{qualname} is registered twice")
            merged[qualname] = category
    return merged


#: Every registered qualified name and its category.
SENSITIVE_FUNCTIONS: Mapping[str, str] = MappingProxyType(
    _merge(
        _PROCESS_EXEC,
        _PROCESS_CONTROL,
        _PRIVILEGES,
        _THREADS_TABLE,
        _NATIVE_TABLE,
        _INTROSPECTION,
        _DYNAMIC_CODE,
        _DESERIALIZATION,
    )
)

#: The qualified names of each category.
CATEGORY_MEMBERS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        category: frozenset(q for q, c in SENSITIVE_FUNCTIONS.items() if c == category)
        for category in CATEGORIES
    }
)


def category_of(qualname: str) -> str | None:
    """The category of a registered function, ``None`` for a name that is not registered."""
    return SENSITIVE_FUNCTIONS.get(qualname)


def resolve(qualname: str) -> object | None:
    """The object a qualified name designates on this interpreter, or ``None`` when absent.

    The longest importable prefix is the module (``sys.monitoring`` is an attribute, not a
    module), and the rest is read attribute by attribute. Never raises: a module that is
    missing on this platform, or fails to import, and an attribute missing from this version
    all mean absent.
    """
    parts = qualname.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            import importlib

            target: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        except Exception:  # an import may fail in any way; this function must not
            return None
        try:
            for attribute in parts[split:]:
                target = getattr(target, attribute)
        except Exception:  # AttributeError, or a failing lazy module __getattr__
            return None
        return target
    return None
