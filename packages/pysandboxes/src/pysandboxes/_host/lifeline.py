"""Partial mode, the trusted side: nothing of a sandboxed child outlives the application.

A child runs in a process group of its own. When it ends, what it left running in that
group is killed before it is reaped (``reap``), and so is the group when the child is
closed or retired (``kill_group``).

A child ends when its connection closes, but only if its interpreter gets to run: a
call stuck in C (``sum(range(10**12))``) holds the interpreter, and no Python code of
the child notices anything. Two things do not need the child's cooperation:

- the **lifeline**: a pipe whose write end only the application holds. Its read end is
  inherited by the child, and set (``F_SETOWN``, ``F_SETSIG``, ``O_ASYNC``) so that the
  kernel sends ``SIGKILL`` to the child's process group when the read end reports an
  event: the only one a pipe nobody writes to ever reports is its last writer closing,
  that is the application ending, however it ends (``SIGKILL`` included). No
  ``prctl(PR_SET_PDEATHSIG)``: it would need ``ctypes`` in the child before the guards,
  and it fires when the *thread* that started the child ends, not the application.
- the **reaper**: a ``/bin/sh`` in a session of its own, with an empty environment,
  reading a second pipe. When the application closes the sandbox it writes a line and
  the reaper exits; when the application dies, the reaper reads the end of the pipe and
  removes the child's temporary directory (the child, killed by the lifeline, cannot).

A process forked by the application (``multiprocessing`` with fork) would hold the
write ends and keep the child alive: they are closed in forked children.
"""

from __future__ import annotations

import fcntl
import os
import signal
import threading

#: The write ends held by this process, closed in any child it forks.
_held: set[int] = set()
_held_lock = threading.Lock()
#: The child ends lent to the next spawn: the child keeps them open (``lent``).
_lent: set[int] = set()
_REAPER = 'read -r _ || { sleep 0.5; rm -rf -- "$1"; }'


def _close_held() -> None:
    for fd in list(_held):
        try:
            os.close(fd)
        except OSError:
            continue
    _held.clear()


os.register_at_fork(after_in_child=_close_held)


def lent() -> frozenset[int]:
    """The lifeline ends the process spawned now inherits: it must not close them (it
    closes every descriptor its spec does not name, see ``_kernel.lifetime``)."""
    with _held_lock:
        return frozenset(_lent)


class Lifeline:
    """The lifeline of one child and its reaper (see the module docstring)."""

    def __init__(self) -> None:
        self.child_end, self._write_end = os.pipe()
        self._reaper_pid: int | None = None
        self._reaper_end: int | None = None
        with _held_lock:
            _held.add(self._write_end)

    def inheritable(self, flag: bool) -> None:
        """Let the next process spawned inherit the child's end (the child alone)."""
        os.set_inheritable(self.child_end, flag)
        with _held_lock:
            (_lent.add if flag else _lent.discard)(self.child_end)

    def arm(self, group: int, tempdir: str | None) -> None:
        """The child (process group ``group``) is started: ask the kernel to kill it when
        this process ends, and start the reaper of ``tempdir``. Call once."""
        fcntl.fcntl(self.child_end, fcntl.F_SETOWN, -group)
        fcntl.fcntl(self.child_end, fcntl.F_SETSIG, signal.SIGKILL)
        flags = fcntl.fcntl(self.child_end, fcntl.F_GETFL)
        fcntl.fcntl(self.child_end, fcntl.F_SETFL, flags | os.O_ASYNC)
        os.close(self.child_end)  # the child's copy keeps the setting
        self.child_end = -1
        if tempdir:
            self._start_reaper(tempdir)

    def _start_reaper(self, tempdir: str) -> None:
        read_end, write_end = os.pipe()
        with _held_lock:
            _held.add(write_end)
        actions = [
            (os.POSIX_SPAWN_DUP2, read_end, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
        ]
        try:
            self._reaper_pid = os.posix_spawn(
                "/bin/sh",
                ["/bin/sh", "-c", _REAPER, "pysandboxes-reaper", tempdir],
                {},
                file_actions=actions,
                setsid=True,  # a ^C at the terminal is the application's, not the reaper's
            )
            self._reaper_end = write_end
        except OSError:  # no /bin/sh: the temporary directory is removed on close only
            _forget(write_end)
        finally:
            os.close(read_end)

    def release(self) -> None:
        """The child is gone and its directory removed: dismiss the reaper, drop the
        lifeline (closing it can no longer kill anything but an empty group)."""
        if self.child_end >= 0:
            os.close(self.child_end)
            self.child_end = -1
        if self._reaper_end is not None:
            try:
                os.write(self._reaper_end, b"done\n")
            except OSError:
                pass  # the reaper is gone already (a signal to its session)
            _forget(self._reaper_end)
            self._reaper_end = None
        if self._reaper_pid is not None:
            try:
                os.waitpid(self._reaper_pid, 0)
            except ChildProcessError:
                pass
            self._reaper_pid = None
        if self._write_end >= 0:
            _forget(self._write_end)
            self._write_end = -1


def _forget(fd: int) -> None:
    with _held_lock:
        _held.discard(fd)
    try:
        os.close(fd)
    except OSError:
        pass


class Tail:
    """The last bytes a child wrote on its standard error, for the crash message."""

    SIZE = 16 << 10

    def __init__(self) -> None:
        self._data = bytearray()
        self._lock = threading.Lock()

    def add(self, data: bytes | bytearray) -> None:
        with self._lock:
            self._data += data
            if len(self._data) > 2 * self.SIZE:
                del self._data[: -self.SIZE]

    def lines(self, count: int = 12) -> list[str]:
        """The last ``count`` non-empty lines, printable (the child chose them); a
        crash report (``Fatal Python error``) is kept from its first line."""
        with self._lock:
            text = bytes(self._data[-self.SIZE :]).decode("utf-8", "replace")
        kept = [line.rstrip() for line in text.splitlines() if line.strip()]
        fatal = [i for i, line in enumerate(kept) if line.startswith("Fatal Python error")]
        kept = kept[fatal[-1] : fatal[-1] + count] if fatal else kept[-count:]
        return ["".join(c if c.isprintable() else "?" for c in line)[:300] for line in kept]


def reap(pid: int) -> tuple[str, int | None, int | None]:
    """Wait for the child ``pid`` (killed if it closed its connection and lives on), end
    what it left running in its process group, then reap it. Returns how it ended, its
    exit status and the signal that ended it."""
    try:
        found = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
        if found is None and not _ended_within(pid, 1.0):  # it closed, and lives on
            kill_group(pid)
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        kill_group(pid)  # its group outlives it by nothing (it is not reaped yet)
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return "the sandboxed process ended", None, None
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        name = signal.Signals(number).name if number in signal.valid_signals() else number
        return f"the sandboxed process was killed by signal {name}", None, number
    code = os.waitstatus_to_exitcode(status)
    return f"the sandboxed process ended with exit status {code}", code, None


def _ended_within(pid: int, seconds: float) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None:
            return True
        time.sleep(0.01)
    return False


def kill_group(group: int) -> None:
    """``SIGKILL`` to a child's process group (nothing if it is gone)."""
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
