"""Nothing the program starts outlives it: the program runs in a pid namespace of its own.

When pid 1 of a pid namespace exits, the kernel kills every other process in it, and
refuses any new one, before its parent sees it exit: no fork, however deep or fast, can
race that. So the sandboxed interpreter runs below a pid 1 that ends with it, set up by
``begin`` first thing, before the boot imports anything else (a fork of a small process
costs the program few copied pages):

- under ``landlock`` and ``subprocess``, the interpreter makes the namespace itself (with
  a user namespace when not root) and forks its pid 1, which forks the program. In
  complete mode the interpreter then exits, and pid 1 is handed to the trusted side's
  waiter (``handoff``): two processes in the sandbox, ``init`` (pid 1) and the program
  (pid 2). In partial mode, whose caller cannot adopt it, the interpreter stays as
  ``outside`` (in the host's pid namespace) and relays. Pid 1 also mounts a ``/proc`` of
  the namespace (in a mount namespace of its own, where the host allows it): the host's
  would show another process at the program's pid;
- under ``unshare``, the interpreter is pid 1 already, and forks the program;
- under ``bwrap``, bwrap's own init is pid 1 and exits with the program.

Pid 1 ignores every signal it has no handler for, ``SIGTERM`` included, which is why the
program never is pid 1. ``init`` (and ``outside``) relay the signals the trusted side
forwards, and end as the program ended: pid 1 cannot die by the program's signal, so
``init`` writes the program's wait status to the waiter (or to ``outside``, which dies by
it), which reports it. Each dies with its parent (``PR_SET_PDEATHSIG``, armed in pid 1
once the waiter adopted it): python-sb killed, the namespace goes too; each gives up its
capabilities and lets no process write its memory. The trusted side's
waiter still sweeps its own descendants and checks that none is left (``_host.waiter``):
the namespace is what makes that sweep certain, not what replaces it.
"""

from __future__ import annotations

import os

from pysandboxes._kernel import handoff as _handoff
from pysandboxes._kernel import libc
from pysandboxes._kernel.relay import WATCHED, wait

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from collections.abc import Callable, Iterable
else:
    # The C module: signal's enums import enum, functools and collections, milliseconds
    # of every start of the sandboxed interpreter, before its forks. The numbers and
    # functions are the same.
    import _signal as signal

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_CLONE_NEWNS = 0x00020000
_CLONE_NEWPID = 0x20000000
#: Why this process's program is not below a pid 1 of its own, when it is not (the applied
#: layer says it): empty otherwise.
refused: list[str] = []
#: Whether the process outside dies with its parent (not in partial mode: see ``begin``).
_parent_bound: list[bool] = [True]


def begin(provider: str, kept: str = "") -> None:
    """Put the rest of this interpreter (the program) below a pid 1 that ends with it, as
    ``provider`` needs (see the module docstring). Returns in the program's process only;
    when no namespace can be made, runs the program here (the trusted side's sweep is
    then all there is) and says why in ``refused``.

    First of all, every descriptor but the standard streams and those ``kept`` lists
    (comma-separated: the ones the spec names) is closed: see ``close_inherited``.
    ``provider`` may end in ``:detached`` (partial mode) or ``:handoff=R,W`` (complete
    mode: the descriptors of ``handoff``)."""
    close_inherited(kept)
    provider, _, how = provider.partition(":")
    ends = None
    if how == "detached":  # partial mode: its caller's lifeline ends it (see _host.partial);
        # the death signal would fire when the *thread* that started it ends, not the caller
        _parent_bound.clear()
    elif how.startswith("handoff="):
        ends = _handoff.parse(how.removeprefix("handoff="))
    if provider == "unshare" and os.getpid() == 1:
        _init(None, drop=_drop_unshare)
    elif provider in ("landlock", "subprocess"):
        drop = _separate(ends)
        if provider == "subprocess":
            # No kernel layer follows to drop what the user namespace gave, nor to take
            # the mechanism's ctypes out of the program's reach.
            if drop is not None:
                drop()
            _forget_ctypes()


def close_inherited(kept: str) -> None:
    """Close what this process inherited beyond the standard streams and ``kept``.

    In partial mode the application cannot close its own descriptors before the spawn
    (a shell's, systemd's, an ``os.dup2``), and the kernel layer judges paths, never a
    descriptor already open: one held on a file outside the rules would reach it. So the
    child itself closes them, before any process in front of the program is forked.
    """
    keep = {0, 1, 2, *(int(fd) for fd in kept.split(",") if fd)}
    try:
        found = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc here: close every range between the kept ones
        edges = sorted(keep)
        for low, high in zip(edges, [*edges[1:], os.sysconf("SC_OPEN_MAX")], strict=True):
            os.closerange(low + 1, high)
        return
    for fd in found:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                continue  # the listing's own descriptor, closed already


def _separate(ends: tuple[int, int] | None) -> Callable[[], None] | None:
    """Make the namespace and the processes in front of the program; return, in the
    program, how to drop the capabilities a user namespace gave (``None``: none).
    ``ends``: the sandbox's ends of the hand-over to the waiter (complete mode)."""
    from pysandboxes._kernel import namespaces

    proc = True
    try:
        userns = namespaces.enter(_CLONE_NEWPID | _CLONE_NEWNS)
    except OSError:
        try:
            userns, proc = namespaces.enter(_CLONE_NEWPID), False
        except OSError as again:
            refused.append(again.strerror or str(again))
            for fd in ends or ():  # the waiter reads nothing: this process is the program
                os.close(fd)
            return None
    _outside(proc=proc, ends=ends)
    return namespaces.drop_capabilities if userns else None


def _outside(*, proc: bool, ends: tuple[int, int] | None) -> None:
    """Fork pid 1 of the new namespace; then hand it to the waiter and leave (``ends``:
    see ``handoff``), or relay to it and end as the program did."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    # The status goes up through ``writer``; with a hand-over, ``reader`` is the lifeline.
    writer, reader = ends if ends is not None else os.pipe()[::-1]
    _prctl(_PR_SET_DUMPABLE, 0)  # before any process of the namespace exists
    pid = os.fork()
    if pid == 0:
        lifeline = None
        if ends is None:
            os.close(reader)
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # outside gone: the namespace goes
        else:
            lifeline = reader  # armed once adopted: this process's end would fire it now
        if proc:
            from pysandboxes._kernel import mounts

            try:
                mounts.keep_private()
                mounts.mount_proc()
            except OSError:
                pass  # the host's /proc stays: only what it shows is off
        _init(writer, previous, drop=_drop, lifeline=lifeline)
        return
    if ends is not None:
        _handoff.report_pid_one(writer, pid)  # and exits
    os.close(writer)
    _drop()
    _guard_self()
    status = wait(pid)
    reported = os.read(reader, 4)
    if len(reported) == 4:
        status = int.from_bytes(reported, "little", signed=True)
    _end_as(status)


def _init(
    status_fd: int | None,
    previous: Iterable[int] | None = None,
    *,
    drop: Callable[[], None] | None = None,
    lifeline: int | None = None,
) -> None:
    """As pid 1: fork the program, relay to it, reap orphans, exit as it did (the raw
    status goes to ``status_fd``, for the waiter or the process outside). ``lifeline``:
    the waiter's, when it adopts this process (see ``handoff``). Returns in the program."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    previous = blocked if previous is None else previous
    _prctl(_PR_SET_DUMPABLE, 1)  # the program's own (the processes in front are not)
    pid = os.fork()
    if pid == 0:
        for fd in (status_fd, lifeline):
            if fd is not None:
                os.close(fd)
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        return
    if drop is not None:
        drop()
    _guard_self()
    # The program starts meanwhile; nothing of it runs past its walls before they are up,
    # and none of it outlives this process, which ends if the waiter has.
    if lifeline is not None and not _adopted(lifeline):
        os._exit(1)
    status = wait(pid, reap_others=True)
    if status_fd is not None:
        _handoff.report_status(status_fd, status)
    os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))


def _adopted(lifeline: int) -> bool:
    """Wait for the waiter to adopt this pid 1, then die with it (see ``handoff``)."""
    if not _handoff.await_adoption(lifeline):
        return False
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    return _handoff.waiter_alive(lifeline)


def _guard_self() -> None:
    """No process may write this one's memory (``/proc/<pid>/mem``, ptrace): it runs
    outside the walls the program gets, and the one outside the namespace could start
    processes the namespace's end would not take along."""
    _prctl(_PR_SET_DUMPABLE, 0)
    if os.getpid() != 1 and _parent_bound:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _drop() -> None:
    """Give up the capabilities this relay holds (a user namespace's, or root's): it
    needs none."""
    from pysandboxes._kernel import namespaces

    try:
        namespaces.drop_capabilities()
    except OSError:
        pass  # it only relays: nothing it does needs them, nothing breaks with them


def _drop_unshare() -> None:
    from pysandboxes._kernel.unshare import drop_capabilities

    try:
        drop_capabilities()
    except OSError:
        pass  # pid 1 only relays; the program's own drop is checked, and stops the run


def _end_as(status: int) -> None:
    """Exit with the program's status, or die by its signal."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {number})
        os.kill(os.getpid(), number)
        os._exit(128 + number)  # a signal whose default is not to end
    os._exit(os.waitstatus_to_exitcode(status))


def _prctl(option: int, value: int) -> None:
    libc.call("prctl", option, value, 0, 0, 0)


def _forget_ctypes() -> None:
    """The mechanism's ctypes must not stay imported in the program: a cached module
    skips the import check that keeps ctypes from a program without a native grant."""
    import sys

    for name in [n for n in sys.modules if n.partition(".")[0] in ("ctypes", "_ctypes")]:
        del sys.modules[name]
