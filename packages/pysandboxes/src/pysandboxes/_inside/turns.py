"""Partial mode, the sandboxed side: whose turn it is to read the connection.

One worker reads at a time; the other free workers sleep, each on a lock of its own,
and the reader passes the turn on (waking one) when it takes a call to run. A call the
trusted side sent alone (``frames.CALL_ALONE``: no other in flight) is run by its reader
without passing the turn: nothing else comes before its reply, so no worker is woken to
read meanwhile, and the reader reads the next call itself. That wake-up of another
thread (and its wait for the interpreter lock) was most of a short call's cost.

Should the trusted side need to send anything while such a call runs (another call, a
cancellation, credit for its output), it first writes that call's id on the relief pipe:
the relief thread (``relieve_on``) passes the turn on for the busy reader, and when its
call ends that worker finds the turn gone and waits for the next one. The id and the call
travel apart, so a relief names its call: one that comes before its call's reader kept
the turn is held (``_early``), and that reader passes the turn on as for any call; one
that comes after its call ended is held for nothing (a bounded few). The end of the pipe
relieves too: the trusted side closed, and a worker must read the end.
"""

from __future__ import annotations

import collections
import os
import threading

#: Reliefs held for calls not read yet (or ended): the newest are kept.
_EARLY = 256
_ID = 8  # bytes of a call id on the relief pipe


class Turns:
    """The reading turn: who holds it, who waits for it, and the call sent alone its
    holder runs (the turn kept)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder: object = None
        self._alone = 0  # the id of the call sent alone the holder runs, or 0
        #: Ids relieved before their call was kept: their reader passes the turn on.
        self._early: dict[int, None] = {}
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

    def keep(self, me: threading.Lock, call_id: int) -> bool:
        """``me`` runs ``call_id``, sent alone, and keeps the turn (``False``: not its
        turn, or the call was relieved already)."""
        with self._lock:
            if self._holder is not me:
                return False
            if self._early.pop(call_id, 0) is None:  # its relief came first
                return False
            self._alone = call_id
            return True

    def kept(self, me: threading.Lock) -> bool:
        """After the call sent alone: whether the turn is still ``me``'s."""
        with self._lock:
            if self._holder is me:
                self._alone = 0
                return True
            return False

    def relieve(self, call_id: int | None) -> None:
        """The trusted side sends more while ``call_id``, sent alone, runs: pass its turn
        on (``None``: the end, whichever call runs alone)."""
        with self._lock:
            if self._alone and (call_id is None or call_id == self._alone):
                self._give()
            elif call_id is not None:
                self._early[call_id] = None
                if len(self._early) > _EARLY:
                    del self._early[next(iter(self._early))]

    def relieve_on(self, fd: int) -> None:
        """The relief thread: each call id on ``fd`` relieves its call; the end relieves
        whatever runs alone, and ends the thread."""
        held = b""
        while True:
            try:
                data = os.read(fd, 64 * _ID)
            except InterruptedError:
                continue
            except OSError:
                data = b""
            if not data:
                self.relieve(None)
                os.close(fd)
                return
            held += data
            whole = len(held) - len(held) % _ID
            for start in range(0, whole, _ID):
                self.relieve(int.from_bytes(held[start : start + _ID], "little"))
            held = held[whole:]

    def _give(self) -> None:
        """With the lock held: the turn to the first sleeper, or to nobody."""
        self._alone = 0
        if self._sleepers:
            sleeper = self._sleepers.popleft()
            self._holder = sleeper
            sleeper.release()
        else:
            self._holder = None
