"""Judged copies of the functions CPython does not report, put where the program finds them.

``_posixsubprocess.fork_exec``, ``signal.pidfd_send_signal``, ``os.setpriority`` and the
scheduling calls, ``os.chroot`` and the calls changing the process's identity,
``_posixshmem``'s ``shm_open``/``shm_unlink`` and ``_imp``'s module
makers raise no audit event: each is replaced, before anything can bind it, by a copy that
raises one (``pysandboxes.refuse``, ``pysandboxes.shm``, ``pysandboxes.extension``) for
the call guard to judge. The copies hold the original only as a keyword-only default,
taken onto the evaluation stack and cleared first thing (see ``audit.sealed_function``).
"""

from __future__ import annotations

import operator
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

#: Unreported calls that change the identity, the groups, the namespaces or the root of
#: the process (category ``privileges``): refused unless a rule allows them. As root,
#: ``chroot`` changes what every path the guards judge means to the kernel.
_PRIVILEGE_CALLS = (
    "chroot",
    "setuid",
    "seteuid",
    "setgid",
    "setegid",
    "setreuid",
    "setregid",
    "setresuid",
    "setresgid",
    "setgroups",
    "initgroups",
    "unshare",
    "setns",
)
#: Raised by the sealed copies (the program raising them can only refuse itself).
EXTENSION_EVENT = "pysandboxes.extension"
REFUSE_EVENT = "pysandboxes.refuse"
SEALED_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "signal.pidfd_send_signal",
        "os.setpriority",
        "os.sched_setaffinity",
        "os.sched_setscheduler",
        "os.sched_setparam",
        *(f"os.{name}" for name in _PRIVILEGE_CALLS),
    }
)
_SEALED_FILE = "<pysandboxes sealed call>"

# "@0" is sys.audit (see audit.sealed_function): a closure or a global would hand the
# original out, and so would a constant (the code of a traceback's frame reaches the
# program). The original is the default of ``_original``, moved onto the stack and the
# local cleared first thing, so that neither the code nor the locals of the frame a
# refusal's traceback holds show it.
_REFUSING_SOURCE = """
def refusing(*args, _original=None, **kwargs):
    return (_original, (_original := None), "@0"("pysandboxes.refuse", "@1"))[0](
        *args, **kwargs
    )
"""
# Unreported calls that reach other processes: allowed on this process only ("@1" is
# os.getpid, "@2" the event a refusal names). PRIO_PROCESS is 0.
# No name is looked up in these sources (a program reaching their globals could change
# what a name means): "@3" is operator.index, which gives the exact int C will read.
_OWN_PRIORITY_SOURCE = """
def setpriority(which, who, priority, *, _original=None):
    return (
        _original,
        (_original := None),
        (which := "@3"(which)),
        (who := "@3"(who)),
        "@0"("pysandboxes.refuse", "@2")
        if which != 0 or (who != 0 and who != "@1"())
        else None,
    )[0](which, who, priority)
"""


def _own_process_source(name: str, rest: str) -> str:
    """A judged copy of ``name(pid, <rest>)``, allowed on this process only: affinity,
    and the scheduling policy and its parameters (SCHED_IDLE starves a process as a
    niceness of 19 does not)."""
    return f"""
def {name}(pid, {rest}, /, *, _original=None):
    return (
        _original,
        (_original := None),
        (pid := "@3"(pid)),
        "@0"("pysandboxes.refuse", "@2") if pid != 0 and pid != "@1"() else None,
    )[0](pid, {rest})
"""


# POSIX shared memory: files of /dev/shm that _posixshmem opens, creates and removes in C,
# judged by the file guard ("@1" is str.__add__, for the exact text C reads; "@2" is
# operator.index). Imported before the walls, so that its copies are the only ones.
_SHM_OPEN_SOURCE = """
def shm_open(path, flags, *mode, _original=None, **named_mode):
    return (
        _original,
        (_original := None),
        (path := "@1"("", path)),
        (flags := "@2"(flags)),
        "@0"("pysandboxes.shm", "_posixshmem.shm_open", path, flags),
    )[0](path, flags, *mode, **named_mode)
"""
_SHM_UNLINK_SOURCE = """
def shm_unlink(path, *, _original=None):
    return (
        _original,
        (_original := None),
        (path := "@1"("", path)),
        "@0"("pysandboxes.shm", "_posixshmem.shm_unlink", path, 0),
    )[0](path)
"""
# The spec is read once, as plain strings (a str subclass could lie), and C gets a fresh
# spec holding only those: a spec of the program's could answer the guards and C apart.
# The spec's attributes may run code of the program: the original is on the stack by then.
_EXTENSION_SOURCE = """
def create(spec, *rest, _original=None):
    return (
        _original,
        (_original := None),
        (name := "@2"("", spec.name)),
        (origin := spec.origin),
        (origin := None if origin is None else "@2"("", origin)),
        (fresh := "@1"(name, None, origin=origin)),
        "@0"("pysandboxes.extension", fresh),
    )[0](fresh, *rest)
"""


def guard_unreported(
    family_allowed: Callable[[str, Sequence[str]], bool],
    fork_exec_family: Sequence[str],
    sealed_globals: dict[str, object],
) -> None:
    """Replace the functions CPython does not report, before anything binds them.

    ``family_allowed(event, family)`` is the call guard's: whether a rule grants one of
    ``family``; ``fork_exec_family`` the functions whose grant allows ``fork_exec``.

    ``sealed_globals`` are globals the integrity guard watches: the copies made here keep
    the originals as keyword-only defaults, which the program may not read, and clear
    their local before anything can fail (see ``audit.sealed_function``).
    """
    import _imp
    import _posixsubprocess  # type: ignore[import-not-found]
    import _signal  # type: ignore[import-not-found]

    if not family_allowed("_posixsubprocess.fork_exec", fork_exec_family):
        # subprocess binds it as _fork_exec when imported: replace that copy too.
        holders = [_posixsubprocess, sys.modules.get("subprocess")]
        _refusing_copy(holders, "fork_exec", "_fork_exec", "subprocess.Popen", sealed_globals)
    pidfd = ("signal.pidfd_send_signal", "_signal.pidfd_send_signal")
    if hasattr(_signal, "pidfd_send_signal") and not family_allowed(pidfd[0], pidfd):
        # signal copies _signal's functions when first imported (importing it here would
        # load enum at every start): replacing _signal's is enough until then.
        holders = [_signal, sys.modules.get("signal")]
        _refusing_copy(
            holders, "pidfd_send_signal", None, "signal.pidfd_send_signal", sealed_globals
        )
    for name in _PRIVILEGE_CALLS:
        event = f"os.{name}"
        if hasattr(os, name) and not family_allowed(event, (f"posix.{name}",)):
            _refusing_copy([os, sys.modules["posix"]], name, None, event, sealed_globals)
    from pysandboxes._inside.guards.audit import sealed_function

    for name, source in (
        ("setpriority", _OWN_PRIORITY_SOURCE),
        ("sched_setaffinity", _own_process_source("sched_setaffinity", "mask")),
        ("sched_setscheduler", _own_process_source("sched_setscheduler", "policy, param")),
        ("sched_setparam", _own_process_source("sched_setparam", "param")),
    ):
        event = f"os.{name}"
        if hasattr(os, name) and not family_allowed(event, (f"posix.{name}",)):
            original_call = getattr(os, name)
            objects = (sys.audit, os.getpid, event, operator.index)
            judged_call = sealed_function(
                source, objects, sealed_globals, _SEALED_FILE, {"_original": original_call}
            )
            judged_call.__doc__ = original_call.__doc__
            for holder in (os, sys.modules["posix"]):
                setattr(holder, name, judged_call)
    try:
        import _posixshmem  # type: ignore[import-not-found]
    except ImportError:
        pass
    else:
        for name, source in (("shm_open", _SHM_OPEN_SOURCE), ("shm_unlink", _SHM_UNLINK_SOURCE)):
            original_shm = getattr(_posixshmem, name)
            judged_shm = sealed_function(
                source,
                (sys.audit, str.__add__, operator.index),
                sealed_globals,
                _SEALED_FILE,
                {"_original": original_shm},
            )
            judged_shm.__doc__ = original_shm.__doc__
            setattr(_posixshmem, name, judged_shm)
    # Modules made from a spec (importlib.util.module_from_spec) reach C with no import
    # event: the import system calls _imp.create_dynamic or create_builtin, judged now
    # (a fresh posix would hand out the functions replaced above).
    module_spec = sys.modules["_frozen_importlib"].ModuleSpec
    for name in ("create_dynamic", "create_builtin"):
        original = getattr(_imp, name)
        objects = (sys.audit, module_spec, str.__add__)
        judged = sealed_function(
            _EXTENSION_SOURCE, objects, sealed_globals, _SEALED_FILE, {"_original": original}
        )
        judged.__name__ = judged.__qualname__ = name
        judged.__doc__ = original.__doc__
        setattr(_imp, name, judged)


def _refusing_copy(
    holders: list[Any],
    name: str,
    alias: str | None,
    event: str,
    sealed_globals: dict[str, object],
) -> None:
    """Put a copy of ``holders[0].name`` that refuses as ``event`` wherever it is bound."""
    from pysandboxes._inside.guards.audit import sealed_function

    original: Callable[..., Any] = getattr(holders[0], name)
    refusing = sealed_function(
        _REFUSING_SOURCE, (sys.audit, event), sealed_globals, _SEALED_FILE, {"_original": original}
    )
    refusing.__name__ = refusing.__qualname__ = name
    refusing.__doc__ = original.__doc__
    setattr(holders[0], name, refusing)
    for holder in holders[1:]:
        if holder is not None:
            setattr(holder, alias or name, refusing)


#: Taken at import, before the program runs: what it later puts in ``os`` is not asked.
_WAITID = os.waitid


def own_child(pid: int) -> bool:
    """Whether ``pid`` is a child of this process, running or not yet reaped (so its pid
    cannot name another process): ``waitid`` answers for our own children alone, and
    ``WNOWAIT`` leaves the child's status for its owner to collect."""
    try:
        _WAITID(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except (ChildProcessError, OSError, ValueError):
        return False
    return True
