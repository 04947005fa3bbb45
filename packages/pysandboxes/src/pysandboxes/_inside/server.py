"""Partial mode, the sandboxed side: serve the calls of ``@sandbox`` functions.

The sandboxed interpreter is the same as complete mode's; its program is this server.
Everything it needs is made before the guards are armed (``start``): the connection
(a socket inherited from the trusted side), a bounded pool of worker threads, the
thread that runs async functions on this process's event loop, and the output pipes
(``capture``). Then the guards go up and the main thread reads calls (``serve``).

A call names a function by module and qualified name; only a function marked
``@sandbox`` is called. Sync functions run on the pool, async ones on the loop, so
calls overlap. A reply is the result or the exception described as values
(``_wire.replies``); the trusted side decodes it, never this process.
"""

from __future__ import annotations

import importlib
import os
import pickle
import queue
import socket
import sys
import threading

from pysandboxes._inside.capture import CallStream, DescriptorPump, current_call
from pysandboxes._wire import frames
from pysandboxes._wire.replies import encode_raised, encode_result

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable
    from typing import Any

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
# Taken before the guards. It reads what the trusted side sends (the arguments), never
# what a sandboxed process sends: that is only ever decoded by _wire.codec, in the caller.
_loads = pickle.loads  # noqa: TID251


class Server:
    """The connection, the workers and the loop of one sandboxed process."""

    def __init__(self, fd: int, workers: int) -> None:
        self.sock = socket.socket(fileno=fd)
        self.sock.set_inheritable(False)  # programs the calls start do not get it
        self._send_lock = threading.Lock()
        self.pump = DescriptorPump(self.send)
        self.work: queue.SimpleQueue[tuple[int, int, bytearray] | None] = queue.SimpleQueue()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_ready = threading.Event()
        self._loop_wanted: queue.SimpleQueue[bool] = queue.SimpleQueue()
        for number in range(workers):
            name = f"pysandboxes-worker-{number}"
            threading.Thread(target=self._work, name=name, daemon=True).start()
        threading.Thread(target=self._run_loop, name="pysandboxes-loop", daemon=True).start()
        self.pump.start()
        sys.stdout = CallStream(frames.STDOUT, self.send, 1)  # type: ignore[assignment]
        sys.stderr = CallStream(frames.STDERR, self.send, 2)  # type: ignore[assignment]

    def send(self, kind: int, call_id: int, payload: bytes = b"") -> None:
        with self._send_lock:
            frames.send(self.sock, kind, call_id, payload)

    def serve(self) -> None:
        """Read calls until the trusted side closes the connection, then return."""
        self.send(frames.READY, 0)
        while True:
            try:
                frame = frames.receive(self.sock, _LIMIT)
            except OSError:
                frame = None
            if frame is None:
                return
            kind, call_id, payload = frame
            if payload is not None and kind in (frames.CALL, frames.INIT):
                self.work.put((kind, call_id, payload))

    def _work(self) -> None:
        while True:
            item = self.work.get()
            if item is None:
                return
            kind, call_id, payload = item
            self.pump.running.add(call_id)
            token = current_call.set(call_id)
            try:
                self._call(kind, call_id, payload)
            finally:
                current_call.reset(token)

    def _call(self, kind: int, call_id: int, payload: bytearray) -> None:
        try:
            module, qualname, args, kwargs = _loads(payload)
            function = resolve(module, qualname, init=kind == frames.INIT)
            outcome = function(*args, **kwargs)
            if _is_coroutine(outcome):
                self._on_loop(call_id, kind, outcome)
                return
        except BaseException as exc:  # everything the function raises goes back
            self._raised(call_id, exc)
            return
        self._reply(kind, call_id, outcome)

    def _reply(self, kind: int, call_id: int, outcome: object) -> None:
        try:
            payload = b"" if kind == frames.INIT else encode_result(outcome)
        except BaseException as exc:
            self._raised(call_id, TypeError(f"the result cannot be sent to the caller: {exc}"))
            return
        self.pump.drain()
        self.pump.running.discard(call_id)
        self.send(frames.READY if kind == frames.INIT else frames.RESULT, call_id, payload)

    def _raised(self, call_id: int, exc: BaseException) -> None:
        try:
            payload = encode_raised(exc, _OWN)
        except BaseException as failure:  # a description that cannot be pickled
            payload = encode_raised(RuntimeError(f"{type(exc).__name__}: {failure}"), _OWN)
        self.pump.drain()
        self.pump.running.discard(call_id)
        self.send(frames.RAISED, call_id, payload)

    def _on_loop(self, call_id: int, kind: int, coroutine: Any) -> None:
        if self.loop is None:
            self._loop_wanted.put(True)
            self._loop_ready.wait()
        loop = self.loop
        assert loop is not None

        def start() -> None:
            task = loop.create_task(coroutine)
            task.add_done_callback(lambda done: self._task_done(call_id, kind, done))

        import contextvars

        context = contextvars.copy_context()  # the call's id follows the task
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

    return asyncio.CancelledError("the sandboxed task was cancelled")


def _is_coroutine(value: object) -> bool:
    return type(value).__name__ == "coroutine" or hasattr(value, "__await__")


_resolved: dict[tuple[str, str], Callable[..., Any]] = {}


def resolve(module: str, qualname: str, *, init: bool = False) -> Callable[..., Any]:
    """The ``@sandbox`` function (or ``init_fn``) named by the trusted side."""
    known = _resolved.get((module, qualname))
    if known is not None:
        return known
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    if not init and getattr(found, "__pysandboxes_sandbox__", None) is not True:
        raise LookupError(f"{module}.{qualname} is not a @sandbox function")
    if not init:
        _resolved[(module, qualname)] = found
    return found


def start(fd: int, workers: int) -> Callable[[], None]:
    """Make the server while the guards are not armed yet; return its loop to run."""
    server = Server(fd, workers)
    return server.serve
