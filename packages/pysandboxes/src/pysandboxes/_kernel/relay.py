"""Waiting for a process while forwarding the signals meant for the program.

Three processes wait this way: the trusted side's waiter, for the sandboxed interpreter or
the provider's program in front of it, and the processes in front of the program in its
pid namespace (``lifetime``): the one outside it, and its pid 1. Mechanism only: it knows pids and
signals, nothing of rules.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
else:
    # The C module: signal's enums import enum, functools and collections, milliseconds
    # of every start of the waiter and of the processes in front of the program. The
    # numbers and functions are the same.
    import _signal as signal

#: Signals sent to ``python-sb`` that the program receives too.
FORWARDED = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
WATCHED = frozenset({*FORWARDED, signal.SIGCHLD})
_SI_KERNEL = 0x80  # si_code of a signal the kernel sent, e.g. a terminal's ^C to the group


def wait(pid: int, relay: str = "", *, reap_others: bool = False) -> int:
    """Forward signals to the program until ``pid`` ends; return its wait status.

    ``reap_others``: reap every other child too, as they end (pid 1 of a namespace, to
    which the program's orphans go: they would stay zombies until the namespace ends).

    The caller has blocked ``WATCHED``. ``relay`` says where the program is:

    - ``""``: ``pid`` is the program. A signal the kernel sent to the whole process group
      (a terminal's ^C) reached it already and is not sent twice.
    - ``"session"``: ``pid`` is bwrap, which relays nothing; the program runs in a
      session of its own, led by bwrap's child, out of the terminal's reach. Every
      signal, the terminal's included, goes to that session's process group.
    - ``"init"``: ``pid`` is unshare, which ignores ^C and ``SIGTERM``; its child (the
      namespace's pid 1) relays to the program, which shares the terminal's group.
    """
    while True:
        info = signal.sigwaitinfo(WATCHED)
        if info.si_signo != signal.SIGCHLD:
            if info.si_code != _SI_KERNEL or relay == "session":
                _forward(pid, relay, info.si_signo)
            continue
        if not reap_others:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return status
            continue
        ended = _reap_all(pid)
        if ended is not None:
            return ended


def _reap_all(pid: int) -> int | None:
    """Reap every child that ended; ``pid``'s wait status if it is one of them."""
    found = None
    while True:
        try:
            done, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return found
        if done == 0:
            return found
        if done == pid:
            found = status


def _forward(pid: int, relay: str, number: int) -> None:
    child = _first_child(pid) if relay else None
    try:
        if relay == "session" and child is not None:
            os.killpg(child, number)
        else:
            os.kill(child or pid, number)
    except ProcessLookupError:
        pass


def _first_child(pid: int) -> int | None:
    """The first child of ``pid`` (the kernel lists them in ``/proc``), if it has one."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            children = handle.read().split()
    except OSError:
        return None
    return int(children[0]) if children else None
