"""Partial mode, the sandboxed side: serve the calls of ``@sandbox`` functions.

The sandboxed interpreter is the same as complete mode's; its program is this server.
Everything it needs is made before the guards are armed (``start``): the connection
(a socket inherited from the trusted side), a bounded pool of worker threads, the
thread that runs async functions on this process's event loop, the output pipes
(``capture``) and the crash report (``faulthandler``, on the descriptor the trusted
side reads the child's last words from). Then the guards go up, and the workers take
turns reading the calls, each running and answering the one it read (``serve`` waits
for the connection's end).

A call names a function by module and qualified name; only a function marked
``@sandbox`` is called. Sync functions run on the pool, async ones on the loop, so
calls overlap. A reply is the result or the exception described as values
(``_wire.replies``); the trusted side decodes it, never this process.

Cancelling (a timeout, a cancelled task in the caller): a call still waiting for a
worker never starts; an async one is cancelled at its next ``await``; a sync one cannot
be interrupted from another thread, so the server says so (``STUCK``) and the trusted
side replaces this process.
"""

from __future__ import annotations

import collections
import importlib
import os
import queue
import socket
import sys
import threading

from pysandboxes._inside.arguments import load_call, name_key, resolve
from pysandboxes._inside.capture import CallStream, DescriptorPump, current_call
from pysandboxes._inside.decisions import flush_all
from pysandboxes._inside.turns import Turns
from pysandboxes._wire import frames
from pysandboxes._wire.replies import encode_raised, encode_result

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable
    from typing import Any

    from pysandboxes._wire.spec import ServeSpec

#: Largest frame the trusted side may send (its arguments): it is trusted, this bounds
#: a broken sender, not a hostile one.
_LIMIT = 1 << 40
#: Frames the caller does not need to see: this package's, the sealed hook's, and the
#: import system's own (CPython leaves those out of import tracebacks too).
_OWN = (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
    os.path.dirname(os.path.abspath(importlib.__file__)) + os.sep,
    "<pysandboxes ",
    "<frozen importlib.",
)
#: Once the trusted side is gone, how long the process may take to end by itself.
_EXIT_GRACE = 1.0
_QUEUED = "queued"
#: What ``_next_call`` gives a worker whose turn passed while it ran a call sent alone.
_AGAIN: tuple[int, int, bytearray, bool] = (0, 0, bytearray(), True)
_CALLS = frozenset({frames.CALL, frames.CALL_ALONE, frames.INIT})
_SYNC = "running in a thread"
_HANDING_OVER = "handed to the loop"


class Server:
    """The connection, the workers and the loop of one sandboxed process."""

    def __init__(self, serving: ServeSpec) -> None:
        self.sock = socket.socket(fileno=serving.fd)
        self.sock.set_inheritable(False)  # programs the calls start do not get it
        self.objects = serving.objects
        self._send_lock = threading.Lock()
        # Descriptor 2 is still the pipe the trusted side reads until this process ends:
        # a crash (a segfault, a fatal error) is reported there, not to a call.
        import faulthandler

        self._last_words = os.dup(2)
        faulthandler.enable(file=self._last_words, all_threads=False)
        #: Output bytes sent per call (0: of none) and not yet acknowledged.
        self._unacked: dict[int, int] = {}
        self._credit = threading.Condition()
        self._gone = False
        self.pump = DescriptorPump(self.send_output)
        self.workers = serving.workers
        self._reader = frames.Reader(self.sock)
        self._turns = Turns()
        #: Calls read while every worker was busy, and the workers running calls.
        self._waiting: collections.deque[tuple[int, int, bytearray]] = collections.deque()
        self._running = 0
        self._gone_event = threading.Event()
        #: The names (``name_key``) of the async functions called so far.
        self._async: set[bytes | None] = set()
        #: Calls not answered yet: "queued", "sync" (running on a worker), or the task.
        self.calls: dict[int, object] = {}
        self._calls_lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_ready = threading.Event()
        self._loop_wanted: queue.SimpleQueue[bool] = queue.SimpleQueue()
        threading.Thread(target=self._run_loop, name="pysandboxes-loop", daemon=True).start()
        self.pump.start()
        self.streams = (
            CallStream(frames.STDOUT, self.send_output, 1),
            CallStream(frames.STDERR, self.send_output, 2),
        )
        sys.stdout, sys.stderr = self.streams  # type: ignore[assignment]
        for number in range(self.workers + 1):  # one more: there is always a reader
            name = f"pysandboxes-worker-{number}"
            threading.Thread(target=self._member, name=name, daemon=True).start()
        if serving.relief >= 0:
            relief = threading.Thread(
                target=self._turns.relieve_on, args=(serving.relief,), daemon=True
            )
            relief.name = "pysandboxes-relief"
            relief.start()

    def send(self, kind: int, call_id: int, payload: bytes | frames.Parts = b"") -> None:
        with self._send_lock:
            frames.send(self.sock, kind, call_id, payload)

    def send_output(self, kind: int, call_id: int, data: bytes) -> None:
        """Send output of a call, waiting while the caller has not taken enough of what
        was sent before (``frames.OUTPUT_WINDOW``): a slow caller slows the writer."""
        step = frames.OUTPUT_FRAME
        for start in range(0, len(data), step):
            piece = data[start : start + step]
            with self._credit:
                while self._unacked.get(call_id, 0) >= frames.OUTPUT_WINDOW and not self._gone:
                    self._credit.wait(1.0)
                self._unacked[call_id] = self._unacked.get(call_id, 0) + len(piece)
            self.send(kind, call_id, piece)

    def _credited(self, call_id: int, payload: bytearray) -> None:
        if len(payload) != frames.CREDIT_COUNT.size:
            return
        (taken,) = frames.CREDIT_COUNT.unpack(payload)
        with self._credit:
            left = self._unacked.get(call_id, 0) - taken
            if left > 0:
                self._unacked[call_id] = left
            else:
                self._unacked.pop(call_id, None)
            self._credit.notify_all()

    def serve(self) -> None:
        """Serve calls until the trusted side closes the connection, then return (and
        end the process shortly after, whatever the calls still running do)."""
        self.send(frames.READY, 0)
        self._gone_event.wait()

    def _member(self) -> None:
        """A worker: it runs a call waiting for a free worker, or reads the connection
        in its turn, and runs the call it reads itself (its reply goes from this thread:
        no other thread is woken to run or answer it)."""
        me = self._turns.member()
        while True:
            item = self._next_call(me)
            if item is None:
                return
            if item is _AGAIN:
                continue
            kind, call_id, payload, cancelled = item
            self._run_counted(kind, call_id, payload, cancelled)

    def _run_counted(self, kind: int, call_id: int, payload: bytearray, cancelled: bool) -> None:
        if cancelled:
            self._raised(call_id, _cancelled())
        else:
            self._run(kind, call_id, payload)
        with self._calls_lock:
            self._running -= 1

    def _next_call(self, me: threading.Lock) -> tuple[int, int, bytearray, bool] | None:
        """A call to run, and whether it was cancelled while it waited: one that waited
        for a free worker, else the next one read. It is marked running (``_SYNC``).
        ``_AGAIN``: this worker ran a call sent alone in its turn, and its turn passed
        meanwhile; ``None``: the connection ended."""
        with self._calls_lock:
            if self._waiting and self._running < self.workers:
                return self._start(self._waiting.popleft())
        self._turns.wait_turn(me)  # the other free workers wait: one reads at a time
        try:
            return self._read_calls(me)
        except BaseException:  # a worker that dies must not take the turn with it
            self._turns.pass_on(me)
            raise

    def _read_calls(self, me: threading.Lock) -> tuple[int, int, bytearray, bool] | None:
        """Read in ``me``'s turn until a call is for it to run (see ``_next_call``)."""
        while not self._gone:
            try:
                frame = self._reader.receive(_LIMIT)
            except OSError:
                frame = None
            if frame is None:
                self._end()
                break
            kind, call_id, payload = frame
            if kind == frames.CREDIT and payload is not None:
                self._credited(call_id, payload)
            elif kind == frames.CANCEL:
                self._cancel(call_id)
            elif payload is not None and kind in _CALLS:
                if self._async and name_key(payload) in self._async:
                    self._start_async(kind, call_id, payload)
                    continue  # it only makes a coroutine: this thread reads on
                item = (frames.CALL if kind == frames.CALL_ALONE else kind, call_id, payload)
                with self._calls_lock:
                    self.calls[call_id] = _QUEUED
                    self._waiting.append(item)  # until a worker is free
                    if self._running >= self.workers:
                        continue
                    started = self._start(self._waiting.popleft())
                    alone = kind == frames.CALL_ALONE and self._running == 1
                if alone and self._turns.keep(me, call_id):
                    # Nothing else comes before its reply, unless the trusted side first
                    # relieves this worker (``Turns.relieve_on``): no reader is woken.
                    self._run_counted(*started)
                    if self._turns.kept(me):
                        continue
                    return _AGAIN
                self._turns.pass_on(me)
                return started
        self._turns.pass_on(me)
        return None

    def _start_async(self, kind: int, call_id: int, payload: bytearray) -> None:
        """Hand a call of an async function to the loop from the reading thread: a burst
        of gathered calls is read and started by one thread, none woken for each."""
        with self._calls_lock:
            self.calls[call_id] = _SYNC
        self._run(kind, call_id, payload)

    def _run(self, kind: int, call_id: int, payload: bytearray) -> None:
        """Run one call on this thread, its output attributed to it."""
        self.pump.running.add(call_id)
        token = current_call.set(call_id)
        try:
            self._call(kind, call_id, payload)
        finally:
            current_call.reset(token)

    def _start(self, item: tuple[int, int, bytearray]) -> tuple[int, int, bytearray, bool]:
        """Mark a call running (the calls' lock held)."""
        kind, call_id, payload = item
        cancelled = self.calls.get(call_id, _QUEUED) is None
        self.calls[call_id] = _SYNC
        self._running += 1
        return kind, call_id, payload, cancelled

    def _end(self) -> None:
        # The trusted side is gone (closed, or killed): a call stuck in a loop must not
        # keep this process alive. The daemon timer ends it if the exit does not.
        with self._credit:
            self._gone = True
            self._credit.notify_all()
        self._gone_event.set()
        timer = threading.Timer(_EXIT_GRACE, os._exit, (0,))
        timer.daemon = True
        timer.start()

    def _cancel(self, call_id: int) -> None:
        with self._calls_lock:
            state: Any = self.calls.get(call_id)
            if state is _QUEUED:
                self.calls[call_id] = None  # a worker will skip it
            elif state is _HANDING_OVER:
                del self.calls[call_id]  # the loop cancels it as it starts
        cancel = getattr(state, "cancel", None)  # a task's
        if state is _SYNC:
            self.send(frames.STUCK, call_id)  # a thread cannot be interrupted
        elif cancel is not None and self.loop is not None:
            self.loop.call_soon_threadsafe(cancel)

    def _call(self, kind: int, call_id: int, payload: bytearray) -> None:
        try:
            module, qualname, args, kwargs = load_call(payload)
            function = resolve(module, qualname, init=kind == frames.INIT)
            outcome = function(*args, **kwargs)
            if _is_coroutine(outcome):
                if getattr(function, "__pysandboxes_async__", False) is True:
                    self._async.add(name_key(payload))  # calling it runs none of its code
                self._on_loop(call_id, kind, outcome)
                return
        except BaseException as exc:  # everything the function raises goes back
            self._raised(call_id, exc)
            return
        self._reply(kind, call_id, outcome)

    def _finish(self, call_id: int) -> None:
        flush_all()  # the call's decisions reach the log before its result
        for stream in self.streams:
            stream.end(call_id)
        self.pump.drain()
        self.pump.running.discard(call_id)
        if call_id in self._unacked:  # it wrote: its output is all sent now
            with self._credit:
                self._unacked.pop(call_id, None)
        with self._calls_lock:
            self.calls.pop(call_id, None)

    def _reply(self, kind: int, call_id: int, outcome: object) -> None:
        try:
            payload = (
                b""
                if kind == frames.INIT
                else encode_result(outcome, objects=self.objects, parts=True)
            )
        except BaseException as exc:
            self._raised(call_id, TypeError(f"the result cannot be sent to the caller: {exc}"))
            return
        self._finish(call_id)
        self.send(frames.READY if kind == frames.INIT else frames.RESULT, call_id, payload)

    def _raised(self, call_id: int, exc: BaseException) -> None:
        try:
            payload = encode_raised(exc, _OWN)
        except BaseException as failure:  # a description that cannot be pickled
            payload = encode_raised(RuntimeError(f"{type(exc).__name__}: {failure}"), _OWN)
        self._finish(call_id)
        self.send(frames.RAISED, call_id, payload)

    def _on_loop(self, call_id: int, kind: int, coroutine: Any) -> None:
        if self.loop is None:
            self._loop_wanted.put(True)
            self._loop_ready.wait()
        loop = self.loop
        assert loop is not None

        def start() -> None:
            task = loop.create_task(coroutine)
            with self._calls_lock:
                cancelled = call_id not in self.calls  # cancelled while it was handed over
                self.calls[call_id] = task
            task.add_done_callback(lambda done: self._task_done(call_id, kind, done))
            if cancelled:
                task.cancel()

        import contextvars

        context = contextvars.copy_context()  # the call's id follows the task
        with self._calls_lock:
            self.calls[call_id] = _HANDING_OVER
        loop.call_soon_threadsafe(start, context=context)

    def _task_done(self, call_id: int, kind: int, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            self._raised(call_id, _cancelled())
            return
        error = task.exception()
        if error is not None:
            self._raised(call_id, error)
        else:
            self._reply(kind, call_id, task.result())

    def _run_loop(self) -> None:
        self._loop_wanted.get()  # made on the first async call: asyncio costs a start-up
        import asyncio

        self.loop = asyncio.new_event_loop()
        self._loop_ready.set()
        self.loop.run_forever()


def _cancelled() -> BaseException:
    import asyncio

    return asyncio.CancelledError("the sandboxed call was cancelled")


def _is_coroutine(value: object) -> bool:
    return type(value).__name__ == "coroutine" or hasattr(value, "__await__")


#: The code that calls ``@sandbox`` functions for the trusted side: a cell sent by the
#: notebook magics is compiled under it (see ``guards.dynamic``).
SERVER_CALL = Server._call.__code__  # pyright: ignore[reportPrivateUsage]


def start(serving: ServeSpec) -> Callable[[], None]:
    """Make the server while the guards are not armed yet; return its loop to run."""
    server = Server(serving)
    return server.serve
