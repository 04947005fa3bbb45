"""Handing a complete-mode sandbox's pid 1 to the trusted side's waiter.

The process ``python-sb`` spawns makes the sandbox's pid namespace and forks its pid 1
(``lifetime``); then it has nothing left to do and exits. Pid 1 becomes the waiter's
child (the waiter is a subreaper, see ``_host.waiter.adopt_orphans``), and the sandbox
runs as two processes under it: pid 1 and the program. Two pipes carry the hand-over:

- ``report``, sandbox to waiter: pid 1's pid as the waiter numbers it, written by the
  process that forked it (nothing, when no namespace could be made: that process is then
  the program); at the end, from pid 1, the program's raw wait status (pid 1 of a
  namespace cannot die by a signal sent from inside it: the waiter does, see ``finish``);
- ``lifeline``, waiter to sandbox: one byte once the waiter has reaped the process that
  forked pid 1, so that pid 1 is its child; only then may pid 1 ask to die with its parent
  (``PR_SET_PDEATHSIG`` set earlier would fire when the forking process exits). The
  waiter keeps the pipe open for the run: should it die before pid 1 armed that signal,
  pid 1 reads the end of the pipe and ends the namespace.

Mechanism only: pids, descriptors and wait statuses.
"""

from __future__ import annotations

import os

from pysandboxes._kernel.relay import wait

_ADOPTED = b"\x01"


def make() -> tuple[tuple[int, int], tuple[int, int]]:
    """The two pipes: ``(report_read, lifeline_write)`` for the waiter,
    ``(report_write, lifeline_read)`` for the sandbox, none inheritable yet."""
    report_read, report_write = os.pipe()
    lifeline_read, lifeline_write = os.pipe()
    return (report_read, lifeline_write), (report_write, lifeline_read)


def argument(ends: tuple[int, int]) -> str:
    """The waiter's (or the sandbox's) two descriptors as one command-line argument."""
    return f"{ends[0]},{ends[1]}"


def parse(text: str) -> tuple[int, int]:
    """The two descriptors of ``argument``. Raises ``ValueError``."""
    first, second = text.split(",")
    return int(first), int(second)


def wait_adopting(pid: int, relay: str, ends: tuple[int, int]) -> int:
    """Wait for the sandbox spawned as ``pid``, adopting its pid 1; return the program's
    wait status (see ``relay.wait`` for ``relay``).

    Signals that arrive before pid 1 is adopted stay pending (the caller blocked them):
    the wait for pid 1 forwards them to it."""
    report, lifeline = ends
    pid_one = _read_number(report)
    if pid_one is None:  # no namespace: ``pid`` is the program itself
        os.close(report)
        return wait(pid, relay)
    os.waitpid(pid, 0)  # its exit made pid 1 this process's child
    os.write(lifeline, _ADOPTED)
    status = wait(pid_one, relay)
    reported = _read_number(report)
    os.close(report)
    return reported if reported is not None and _plausible(reported) else status


def report_pid_one(report: int, pid_one: int) -> None:
    """In the process that forked pid 1: tell the waiter, then leave (see the module)."""
    os.write(report, pid_one.to_bytes(4, "little", signed=True))
    os._exit(0)


def await_adoption(lifeline: int) -> bool:
    """In pid 1: wait until the waiter is its parent; ``False`` when the waiter ended
    first (or ends meanwhile): the caller then ends the namespace. The caller arms its
    death signal between the two reads."""
    try:
        return os.read(lifeline, 1) == _ADOPTED
    except OSError:
        return False


def waiter_alive(lifeline: int) -> bool:
    """In pid 1, its death signal armed: whether the waiter is still there (its end of
    the lifeline open), so that the signal will come when it goes."""
    os.set_blocking(lifeline, False)
    try:
        return os.read(lifeline, 1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def report_status(report: int, status: int) -> None:
    """In pid 1, as the program ended: its raw wait status, for the waiter."""
    os.write(report, status.to_bytes(4, "little", signed=True))


def _plausible(status: int) -> bool:
    """Whether ``status`` is a wait status a process can end with: the waiter ends by it
    (``finish``), and a number it cannot read would end it before its clean-up."""
    if not 0 <= status < 1 << 16:
        return False
    return os.WIFEXITED(status) or (os.WIFSIGNALED(status) and 0 < os.WTERMSIG(status) < 65)


def _read_number(fd: int) -> int | None:
    data = b""
    while len(data) < 4:
        try:
            part = os.read(fd, 4 - len(data))
        except InterruptedError:
            continue
        if not part:
            return None
        data += part
    return int.from_bytes(data, "little", signed=True)
