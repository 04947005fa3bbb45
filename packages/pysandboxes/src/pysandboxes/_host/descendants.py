"""The trusted side: the processes the program runs or left, found through ``/proc``.

The waiter is the reaper of every orphan of the run (``adopt_orphans``): the program's
processes are its descendants. They are listed here, stopped one by one before their own
children are read (a fork meanwhile cannot slip by), held while a permission question is
on the terminal and continued after it.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
else:
    import _signal as signal  # signal's enums would import enum, functools, collections


def hold_program(patience: float = 0.5) -> list[int]:
    """Stop every process of the program (a permission question is on the terminal) and
    wait, ``patience`` seconds at most, until the kernel shows each stopped: a write under
    way ends first, none starts after. Returns what ``resume_program`` continues."""
    import time

    held = stop_descendants()
    deadline = time.monotonic() + patience
    for pid in held:
        while not _stopped(pid) and time.monotonic() < deadline:
            time.sleep(0.001)
    return held


def resume_program(held: list[int]) -> None:
    """Continue what ``hold_program`` stopped."""
    for pid in held:
        try:
            os.kill(pid, signal.SIGCONT)
        except (ProcessLookupError, PermissionError):
            continue


def _stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped (or gone), as ``/proc/<pid>/stat`` says."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return True
    return state in (b"T", b"t", b"Z", b"X")


def stop_descendants() -> list[int]:
    """Every descendant of this process, each stopped before its children are read."""
    found: list[int] = []
    seen: set[int] = set()
    pending = [os.getpid()]
    while pending:
        parent = pending.pop()
        for pid in children(parent):
            if pid in seen:
                continue
            seen.add(pid)
            try:
                os.kill(pid, signal.SIGSTOP)
            except (ProcessLookupError, PermissionError):
                pass  # gone, or unkillable: listed all the same
            found.append(pid)
            pending.append(pid)
    return found


def children(pid: int) -> list[int]:
    """The children of ``pid`` (of all its threads), as the kernel lists them."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as handle:
                found += [int(child) for child in handle.read().split()]
        except OSError:
            continue  # the task ended meanwhile
    return found
