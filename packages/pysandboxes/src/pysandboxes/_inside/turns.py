"""Partial mode, the sandboxed side: whose turn it is to read the connection.

One worker reads at a time; the other free workers sleep, each on a lock of its own,
and the reader passes the turn on (waking one) when it takes a call to run. A call the
trusted side sent alone (``frames.CALL_ALONE``: no other in flight) is run by its reader
without passing the turn: nothing else comes before its reply, so no worker is woken to
read meanwhile, and the reader reads the next call itself. That wake-up of another
thread (and its wait for the interpreter lock) was most of a short call's cost.

Should the trusted side need to send anything while such a call runs (another call, a
cancellation, credit for its output), it first writes a byte on the relief pipe: the
relief thread (``relieve_on``) passes the turn on for the busy reader, and when its
call ends that worker finds the turn gone and waits for the next one. The byte and the
call travel apart: a byte that comes before its call's reader kept the turn is held
(``pending``), and that reader passes the turn on as for any call; a byte that comes
after the call ended costs the next call sent alone one wake-up, nothing more. The end
of the pipe relieves too: the trusted side closed, and a worker must read the end.
"""

from __future__ import annotations

import collections
import os
import threading


class Turns:
    """The reading turn: who holds it, who waits for it, and whether its holder runs a
    call sent alone (the turn kept)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder: object = None
        self._alone = False
        #: A relief came while no call ran alone: the next one does not keep the turn.
        self._pending = False
        self._sleepers: collections.deque[threading.Lock] = collections.deque()

    @staticmethod
    def member() -> threading.Lock:
        """A worker's token: the lock it sleeps on (held: released to wake it)."""
        token = threading.Lock()
        token.acquire()
        return token

    def wait_turn(self, me: threading.Lock) -> None:
        """Return when it is ``me``'s turn to read."""
        with self._lock:
            if self._holder is None:
                self._holder = me
                return
            self._sleepers.append(me)
        me.acquire()  # released by the one that passed the turn to ``me``

    def pass_on(self, me: threading.Lock) -> None:
        """``me`` reads no more: a sleeping worker reads now (or the next that asks)."""
        with self._lock:
            if self._holder is me:
                self._give()

    def keep(self, me: threading.Lock) -> bool:
        """``me`` runs a call sent alone and keeps the turn (``False``: not its turn)."""
        with self._lock:
            if self._holder is not me:
                return False
            if self._pending:  # its relief came first: others will be sent meanwhile
                self._pending = False
                return False
            self._alone = True
            return True

    def kept(self, me: threading.Lock) -> bool:
        """After the call sent alone: whether the turn is still ``me``'s."""
        with self._lock:
            if self._holder is me:
                self._alone = False
                return True
            return False

    def relieve(self) -> None:
        """The trusted side sends more while a call sent alone runs: pass its turn on."""
        with self._lock:
            if self._alone:
                self._give()
            else:
                self._pending = True

    def relieve_on(self, fd: int) -> None:
        """The relief thread: each byte on ``fd`` relieves; its end relieves, and ends."""
        while True:
            try:
                data = os.read(fd, 512)
            except InterruptedError:
                continue
            except OSError:
                data = b""
            self.relieve()
            if not data:
                os.close(fd)
                return

    def _give(self) -> None:
        """With the lock held: the turn to the first sleeper, or to nobody."""
        self._alone = False
        if self._sleepers:
            sleeper = self._sleepers.popleft()
            self._holder = sleeper
            sleeper.release()
        else:
            self._holder = None
