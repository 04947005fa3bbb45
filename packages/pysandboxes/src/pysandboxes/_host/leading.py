"""Partial mode, the trusted side: who reads the child's frames, one at a time.

A thread that waits for its call reads the connection itself when nobody else does (it
leads), and hands every frame that is not its own to the call it belongs to: a caller
alone, the common case, gets its reply with no other thread woken on either side of
the read. Callers that wait while another leads sleep, each on a lock of its own; when
the leader has its own item it resigns, making one of them the leader. Calls that cannot
read for themselves (async calls, whose loop must not block; cancelled calls) are read
for by the leader of the moment, or by the background thread, which also reads while
the connection is idle (a child that ends between calls is seen at once) and when it
closes. A caller that reads after a long idle time finds the background thread reading:
its first reply comes through it, and the thread resigns at once for the next ones.

A leader stopped by an exception while it read (^C in the main thread) may leave a
frame half handled: it is never guessed at. The child is stopped, its calls in flight
fail (``SandboxCrashed``, at most once), and the next call starts another.
"""

from __future__ import annotations

import collections
import select
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: The background thread's leadership (a caller's is its ``SyncWaiter``).
BACKGROUND = "background"
#: How long the connection stays quiet before the background thread reads it alone.
_IDLE = 0.2
#: Sleepers listed before those that woke by themselves are forgotten.
_SLEEPERS = 64


class SyncWaiter:
    """A call awaited by a thread: its items, and the lock it sleeps on."""

    __slots__ = ("items", "sleeping", "wake")

    def __init__(self) -> None:
        self.items: collections.deque[tuple[int, Any]] = collections.deque()
        self.sleeping = False
        self.wake = threading.Lock()
        self.wake.acquire()

    def put(self, item: tuple[int, Any]) -> None:
        """Called with the leadership's lock held."""
        self.items.append(item)
        if self.sleeping:
            self.sleeping = False
            self.wake.release()


class Leadership:
    """Who reads the connection: a waiting caller, or the background thread.

    ``read`` gives the next frame, ``None`` at the end (or raises ``OSError``, and
    ``TimeoutError`` when the callable it is given says no data came in time);
    ``route`` hands a frame to its call (``False``: a broken protocol, stop reading);
    ``end`` runs once, when reading stops for good; ``passive`` says whether a call
    waits that cannot read for itself; ``interrupted`` stops the child (see above);
    ``alone`` says whether one call only is in flight."""

    def __init__(
        self,
        read: Callable[[Callable[[], bool] | None, bool], Any],
        buffered: Callable[[], bool],
        fileno: int,
        route: Callable[[Any], bool],
        end: Callable[[], None],
        passive: Callable[[], bool],
        interrupted: Callable[[], None],
        alone: Callable[[], bool],
    ) -> None:
        self.lock = threading.Lock()
        self._wanted = threading.Condition(self.lock)
        self._read, self._buffered, self._fileno = read, buffered, fileno
        self._route, self._end, self._passive = route, end, passive
        self._interrupted = interrupted
        self._alone = alone
        self.leader: object = None
        self._sleepers: collections.deque[SyncWaiter] = collections.deque()
        self.done = False
        self.closing = False
        #: Calls sent so far: the background thread reads alone once it stays the same.
        self.activity = 0
        self._thread = threading.Thread(target=self._background, name="pysandboxes-reader")
        self._thread.daemon = True
        self._thread.start()

    def put(self, waiter: Any, item: tuple[int, Any]) -> None:
        if type(waiter) is SyncWaiter:
            with self.lock:
                waiter.put(item)
        else:
            waiter.put(item)

    def wake_background(self) -> None:
        """A call that cannot read for itself waits, or the connection closes."""
        with self.lock:
            if self.leader is None:
                self._wanted.notify()

    def close(self) -> None:
        with self.lock:
            self.closing = True
            self._wanted.notify()

    # -- a waiting thread ----------------------------------------------------------------

    def claim(self, waiter: SyncWaiter) -> None:
        """Lead now if nobody does, before the call is sent: once it is, this thread goes
        straight to its read (the child's reply may wait for this thread to sleep on
        this CPU: the kernel places the woken reader there)."""
        with self.lock:
            if self.leader is None and not self.done:
                self.leader = waiter

    def release(self, waiter: SyncWaiter) -> None:
        """The waiter waits no more (its call was not sent, or its thread was stopped,
        maybe between two steps here): it neither leads nor is made the leader."""
        with self.lock:
            waiter.sleeping = False
        self._resign(waiter)

    def next_item(self, waiter: SyncWaiter, deadline: float | None) -> tuple[int, Any]:
        """The waiter's next item, read by this thread when nobody else reads.

        Raises:
            TimeoutError: ``deadline`` (``time.monotonic``) passed first.
        """
        if self.leader is waiter and not waiter.items:  # it claimed the lead: no lock yet
            self._lead(waiter, deadline)
        while True:
            with self.lock:
                if waiter.items:
                    return waiter.items.popleft()
                if self.leader is None and not self.done:
                    self.leader = waiter
                elif self.leader is not waiter:
                    waiter.sleeping = True
                    if len(self._sleepers) > _SLEEPERS:  # those that woke meanwhile go
                        self._sleepers = collections.deque(w for w in self._sleepers if w.sleeping)
                    self._sleepers.append(waiter)
            if self.leader is waiter:
                self._lead(waiter, deadline)
                continue
            self._sleep(waiter, deadline)

    def _sleep(self, waiter: SyncWaiter, deadline: float | None) -> None:
        woken = False
        try:
            if deadline is None:
                woken = waiter.wake.acquire()
            else:
                left = deadline - time.monotonic()
                woken = left > 0 and waiter.wake.acquire(timeout=left)
        finally:
            if not woken:  # timed out, or interrupted: it sleeps no more
                with self.lock:
                    if waiter.sleeping:
                        waiter.sleeping = False
                    else:  # woken meanwhile: take back what the waker released
                        waiter.wake.acquire(blocking=False)
                    promoted = self.leader is waiter
                if promoted:
                    self._resign(waiter)
        if not woken and not waiter.items and self.leader is not waiter:
            raise TimeoutError

    def _lead(self, waiter: SyncWaiter, deadline: float | None) -> None:
        """Read frames until one is the waiter's own (or its deadline passes), then
        resign: its output may block on a paused terminal, and others must go on."""
        ready = None
        if deadline is not None:
            fileno = self._fileno
            ready = lambda: _readable(fileno, deadline - time.monotonic())  # noqa: E731
        try:
            while not waiter.items:
                if not self._step(ready, self._alone()):
                    return
        except TimeoutError:  # before a read: nothing is left half handled
            self._resign(waiter)
            raise
        except BaseException:
            self._resign(waiter)
            self._interrupted()
            raise
        self._resign(waiter)

    def _step(self, ready: Callable[[], bool] | None = None, spin: bool = False) -> bool:
        """Read and route one frame; at the end, end (and say so). ``spin``: look for
        it a while before sleeping (a caller alone: with others, the spinning reader
        would keep them from the interpreter while their replies wait).

        Raises:
            TimeoutError: ``ready`` said no data came in time.
        """
        try:
            frame = self._read(ready, spin)
        except TimeoutError:
            raise
        except OSError:
            frame = None
        if frame is not None and self._route(frame):
            return True
        with self.lock:
            if self.done:
                self.leader = None
                return False
            self.done = True
        self._end()  # every waiter gets its item, the sleepers are woken
        with self.lock:
            self.leader = None
        return False

    def _resign(self, leader: object) -> None:
        with self.lock:
            if self.leader is not leader:
                return
            self.leader = None
            while self._sleepers:
                sleeper = self._sleepers.popleft()
                if sleeper.sleeping:  # still waiting: it reads now
                    self.leader = sleeper
                    sleeper.sleeping = False
                    sleeper.wake.release()
                    return
            if self.closing or self._passive():
                self._wanted.notify()

    # -- the background thread -----------------------------------------------------------

    def _background(self) -> None:
        seen = 0  # at once: the child's first frame says it is ready
        while True:
            with self.lock:
                while not self.done:
                    if self.leader is None and (
                        self.closing or self._passive() or seen == self.activity
                    ):
                        break
                    seen = self.activity
                    self._wanted.wait(_IDLE)
                if self.done:
                    return
                self.leader = BACKGROUND
                started = self.activity
            try:
                while True:
                    if not self._step():
                        return
                    with self.lock:
                        if self.closing or self._passive():
                            continue
                        if started == self.activity and not self._sleepers:
                            continue
                    break
            except BaseException:  # a bug here must not leave the calls unread
                self._resign(BACKGROUND)
                raise
            self._resign(BACKGROUND)
            seen = -1


def _readable(fd: int, seconds: float) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(1, int(seconds * 1000))))
