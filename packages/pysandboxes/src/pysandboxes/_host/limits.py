"""Partial mode, the trusted side: the resource limits of a sandboxed child.

``sandbox-memory=``, ``sandbox-open-files=`` and ``sandbox-processes=`` become the
child's ``RLIMIT_AS``, ``RLIMIT_NOFILE`` and ``RLIMIT_NPROC``, set from here with
``prlimit`` once the child serves (before ``init_fn`` and any call): the child cannot
read its own ``/proc`` entries under Landlock, this side can. Each is what the calls
may add to what the idle child holds: its address space (its threads' stacks and
arenas reserve hundreds of megabytes they never touch), its descriptors, and the
processes and threads its user already runs (the kernel counts them all, and never
limits root), so ``sandbox-memory=256MiB`` means 256 MiB for the calls.

A breach is the call's own failure (``MemoryError``, ``OSError`` *Too many open files*,
``BlockingIOError`` from ``fork``): ``note`` adds the rule that set the limit to it.
"""

from __future__ import annotations

import errno
import os
import resource

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._policy.model import Policy, Setting


def _settings(policy: Policy) -> list[tuple[int, Setting[int]]]:
    found = [
        (resource.RLIMIT_AS, policy.sandbox_memory),
        (resource.RLIMIT_NOFILE, policy.sandbox_open_files),
        (resource.RLIMIT_NPROC, policy.sandbox_processes),
    ]
    return [(which, setting) for which, setting in found if setting is not None]


def apply(pid: int, policy: Policy) -> None:
    """Set the limits the rules give on the sandboxed interpreter started as ``pid``
    (or, under a provider that wraps it, its innermost descendant).

    Raises:
        OSError: a limit cannot be set (the message names the rule).
    """
    limits = _settings(policy)
    if not limits:
        return
    target = _innermost(pid)
    for which, setting in limits:
        value = setting.value
        if which == resource.RLIMIT_AS:
            value += _address_space(target)
        elif which == resource.RLIMIT_NOFILE:
            value += _descriptors(target)
        else:
            value += _tasks_of_owner(target)
        try:
            resource.prlimit(target, which, (value, value))
        except (OSError, ValueError) as exc:
            where = f"'{setting.origin.text}' ({setting.origin.where})"
            raise OSError(f"cannot apply {where}: {exc}") from None


def _innermost(pid: int) -> int:
    """The last descendant of ``pid`` (bwrap and unshare start the interpreter below
    them; its own relay forks it once more)."""
    current = pid
    for _ in range(8):
        try:
            with open(f"/proc/{current}/task/{current}/children") as handle:
                children = handle.read().split()
        except OSError:
            return current
        if not children:
            return current
        current = int(children[-1])
    return current


def _address_space(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _descriptors(pid: int) -> int:
    """One more than the highest descriptor open in ``pid``: the files it holds at start
    (a new descriptor takes the lowest free number, below the limit)."""
    try:
        return max(int(fd) for fd in os.listdir(f"/proc/{pid}/fd")) + 1
    except (OSError, ValueError):
        return 64


def _tasks_of_owner(pid: int) -> int:
    """The processes and threads of ``pid``'s user: the kernel counts them all against
    ``RLIMIT_NPROC``."""
    try:
        owner = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return 0
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid == owner:
                count += len(os.listdir(f"/proc/{entry}/task"))
        except OSError:
            continue  # ended meanwhile
    return count


def _no_new_task(exc: BaseException) -> bool:
    """``fork`` (``EAGAIN``) or a thread start refused."""
    if isinstance(exc, OSError):
        return exc.errno == errno.EAGAIN
    return isinstance(exc, RuntimeError) and "can't start new thread" in str(exc)


def note(exc: BaseException, policy: Policy | None) -> None:
    """Add to ``exc`` the rule whose limit it most likely hit, if one is set."""
    if policy is None:
        return
    setting = None
    if isinstance(exc, MemoryError):
        setting = policy.sandbox_memory
    elif isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
        setting = policy.sandbox_open_files
    elif _no_new_task(exc):
        setting = policy.sandbox_processes
    if setting is not None:
        exc.add_note(
            f"the sandbox's limit '{setting.origin.text}' ({setting.origin.where}) was "
            "reached; the sandboxed process serves the next calls"
        )
