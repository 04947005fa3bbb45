"""Partial mode, the trusted side: one sandboxed child and the calls it serves.

``Child`` starts complete mode's sandboxed interpreter with the rules, as ``python-sb``
would, but its program is the call server (``_inside.server``) and it is linked to this
process by a socket pair made here: no port, no token, nothing another process can
reach. One thread reads the child's frames and hands each to the call waiting for it;
the calling thread (or task) itself writes the call's output and decodes its reply, so
output lands where a local call's would, in order. What the child sends is decoded by
``_wire.codec`` alone, as values.

At most once: a call is sent once. If the child ends, every call in flight fails with
``SandboxCrashed`` and this ``Child`` is done; the caller starts another for the next
call.
"""

from __future__ import annotations

import itertools
import os
import pickle
import queue
import socket
import sys
import threading

from pysandboxes._wire import frames
from pysandboxes.errors import RuleResultRefusedError, SandboxCrashed, SandBoxError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Mapping
    from typing import Any

    from pysandboxes._host.launch import LaunchRequest
    from pysandboxes._host.learning.plan import LearnRun
    from pysandboxes._wire.spec import LaunchSpec

_CRASHED = -1  # a waiter's item: the child ended (payload: the exception)
_TOO_LARGE = -2  # a waiter's item: the reply was over the limit (and dropped)
_START_TIMEOUT = 60.0


class _TaskWaiter:
    """A waiter for an async call: items go to the caller's loop, from the reader."""

    def __init__(self, loop: asyncio.AbstractEventLoop, items: asyncio.Queue[Any]) -> None:
        self._loop = loop
        self._items = items

    def put(self, item: tuple[int, Any]) -> None:
        try:
            self._loop.call_soon_threadsafe(self._items.put_nowait, item)
        except RuntimeError:
            pass  # the caller's loop is closed: nobody waits any more


class Child:
    """A running sandboxed child serving calls, and the connection to it."""

    def __init__(
        self,
        request: LaunchRequest,
        *,
        env: Mapping[str, str],
        modules: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]],
        workers: int,
        result_limit: int,
    ) -> None:
        from pysandboxes._host.launch import build_spec, spawn
        from pysandboxes._record import replace
        from pysandboxes._wire.spec import ServeSpec

        cwd = os.getcwd()
        spec, child_env, learning, self._watch = build_spec(request, cwd, env)
        self.spec: LaunchSpec = spec
        self._learning: LearnRun | None = learning
        self._collector: Any = None
        self.result_limit = result_limit
        ours, theirs = socket.socketpair()
        theirs.set_inheritable(True)
        files, path, names = modules
        serve = ServeSpec(theirs.fileno(), workers, files, path, names)
        spec = replace(spec, serve=serve)
        errors_read, errors_write = os.pipe()
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_DUP2, errors_write, 2),
        ]
        try:
            self.pid = spawn(
                spec, child_env, request.python_flags, cwd, file_actions=actions, detached=True
            )
        except BaseException:
            for fd in (errors_read, errors_write):
                os.close(fd)
            ours.close()
            theirs.close()
            self._remove_tempdir()
            raise
        finally:
            if learning is not None:
                learning.close_child_end()
        theirs.close()
        os.close(errors_write)
        if learning is not None:
            from pysandboxes._host.learning.conclude import Collector

            self._collector = Collector(learning.read_fd)
        self.sock = ours
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._waiters: dict[int, Any] = {}
        self._ready = threading.Event()
        self.ended: SandboxCrashed | None = None
        self._startup = bytearray()
        self._reaped = threading.Event()
        threading.Thread(target=self._read_startup, args=(errors_read,), daemon=True).start()
        self._reader = threading.Thread(target=self._read, name="pysandboxes-reader", daemon=True)
        self._reader.start()
        if not self._ready.wait(_START_TIMEOUT) or self.ended is not None:
            self.close()
            said = self._startup.decode("utf-8", "replace").strip()
            raise SandBoxError(
                "the sandbox did not start"
                + (f": {self.ended}" if self.ended is not None else "")
                + (f"\n{said}" if said else "")
            )

    # -- reading -------------------------------------------------------------------------

    def _read_startup(self, fd: int) -> None:
        """What the child writes on its standard error before it serves (errors)."""
        with os.fdopen(fd, "rb") as pipe:
            while chunk := pipe.read(4096):
                if len(self._startup) < 1 << 16:
                    self._startup += chunk

    def _read(self) -> None:
        try:
            while True:
                frame = frames.receive(self.sock, self.result_limit)
                if frame is None:
                    break
                kind, call_id, payload = frame
                if kind not in frames.FROM_CHILD:
                    break  # a broken protocol: the child is not trusted further
                if payload is None:
                    kind, payload = _TOO_LARGE, bytearray()
                if call_id == 0:
                    if kind == frames.READY:
                        self._ready.set()
                    elif kind in (frames.STDOUT, frames.STDERR):
                        _write_untagged(payload)
                    continue
                waiter = self._waiters.get(call_id)
                if waiter is None:
                    continue  # output of a call nobody waits for any more
                if kind in (frames.RESULT, frames.RAISED, frames.READY, _TOO_LARGE):
                    del self._waiters[call_id]
                waiter.put((kind, payload))
        except OSError as exc:
            self._startup += f"\n{exc}".encode()
        self._end()

    def _end(self) -> None:
        crashed = SandboxCrashed(self._how_it_ended())
        self.ended = crashed
        self._ready.set()
        for call_id in list(self._waiters):
            waiter = self._waiters.pop(call_id, None)
            if waiter is not None:
                waiter.put((_CRASHED, crashed))

    def _how_it_ended(self) -> str:
        import signal

        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return "the sandboxed process ended"
        finally:
            self._reaped.set()
        if os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            name = signal.Signals(number).name if number in signal.valid_signals() else number
            return f"the sandboxed process was killed by signal {name}"
        return f"the sandboxed process ended with exit status {os.waitstatus_to_exitcode(status)}"

    # -- calling -------------------------------------------------------------------------

    def _send_call(self, kind: int, call: tuple[Any, ...], waiter: Any) -> int:
        payload = pickle.dumps(call, protocol=5)
        call_id = next(self._ids)
        self._waiters[call_id] = waiter
        if self.ended is not None:
            del self._waiters[call_id]
            raise self.ended
        try:
            with self._send_lock:
                frames.send(self.sock, kind, call_id, payload)
        except OSError:
            self._waiters.pop(call_id, None)
            self._reaped.wait(5.0)
            raise self.ended or SandboxCrashed("the sandboxed process ended") from None
        return call_id

    def call(
        self, kind: int, call: tuple[Any, ...], decode: Callable[[bytes], Any]
    ) -> tuple[bool, Any]:
        """Send a call and wait for its reply in this thread, writing its output here.

        Returns ``(True, result)``, or ``(False, exception)`` for the caller to raise
        (so that its traceback goes from the caller's line to the remote frames)."""
        items: queue.SimpleQueue[tuple[int, Any]] = queue.SimpleQueue()
        self._send_call(kind, call, items)
        output = _Output()
        while True:
            item_kind, data = items.get()
            if item_kind in (frames.STDOUT, frames.STDERR):
                output.write(item_kind, data)
                continue
            output.flush()
            return _outcome(item_kind, data, decode)

    async def acall(
        self, kind: int, call: tuple[Any, ...], decode: Callable[[bytes], Any]
    ) -> tuple[bool, Any]:
        """``call`` for a coroutine: the reply is awaited on the caller's loop."""
        import asyncio

        items: asyncio.Queue[tuple[int, Any]] = asyncio.Queue()
        self._send_call(kind, call, _TaskWaiter(asyncio.get_running_loop(), items))
        output = _Output()
        while True:
            item_kind, data = await items.get()
            if item_kind in (frames.STDOUT, frames.STDERR):
                output.write(item_kind, data)
                continue
            output.flush()
            return _outcome(item_kind, data, decode)

    # -- closing -------------------------------------------------------------------------

    def close(self) -> None:
        """End the child (it ends when the connection closes; killed after a grace
        period), remove its temporary directory, and conclude a learning run."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        if not self._reaped.wait(2.0):
            import signal

            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._reaped.wait(5.0)
        self.sock.close()
        self._remove_tempdir()
        self._check_rule_files()
        self._conclude()

    def _check_rule_files(self) -> None:
        """Set back the rules of the next run if the child changed or planted one (see
        ``_host.rulewatch``), saying so on stderr."""
        if not self._watch:
            return
        from pysandboxes._host.rulewatch import check

        try:
            changed = check(self._watch)
        except Exception as exc:  # a bug here must not cost the application its exit
            changed = [f"the rule files could not be checked ({exc!r}): review them"]
        for message in changed:
            print(f"pysandboxes: {message}", file=sys.stderr)

    def _remove_tempdir(self) -> None:
        if self.spec.tempdir:
            from pysandboxes._host.waiter import remove_tree

            remove_tree(self.spec.tempdir)

    def _conclude(self) -> None:
        learning, collector = self._learning, self._collector
        if learning is None or collector is None:
            return
        self._learning = None
        from pysandboxes._host.learning.conclude import conclude, show

        plan = learning.plan(os.getcwd(), os.environ, self.spec.policy, self.spec.protected)
        summary = conclude(plan, collector.finish())
        if summary is not None:
            show(summary)


def _outcome(kind: int, data: Any, decode: Callable[[bytes], Any]) -> tuple[bool, Any]:
    if kind == frames.RESULT:
        try:
            return True, decode(data)
        except SandBoxError as refused:
            return False, refused.with_traceback(None)
    if kind == frames.READY:
        return True, None
    if kind == _CRASHED:
        return False, data
    if kind == _TOO_LARGE:
        return False, RuleResultRefusedError(
            "the sandboxed function's reply was larger than sandboxes(result_limit=...) "
            "and was dropped; return less, or raise the limit"
        )
    from pysandboxes._host.remote import rebuild
    from pysandboxes._wire.codec import RefusedValue, decode_value

    try:
        description = decode_value(data)
    except RefusedValue as exc:
        return False, SandBoxError(f"the sandbox sent an exception that is not values: {exc}")
    return False, rebuild(description)


class _Output:
    """A call's output, written where a local call's would go: this thread's streams."""

    def __init__(self) -> None:
        import codecs

        self._decoders = {
            frames.STDOUT: codecs.getincrementaldecoder("utf-8")("replace"),
            frames.STDERR: codecs.getincrementaldecoder("utf-8")("replace"),
        }

    def write(self, kind: int, data: bytes) -> None:
        text = self._decoders[kind].decode(bytes(data))
        if text:
            (sys.stdout if kind == frames.STDOUT else sys.stderr).write(text)

    def flush(self) -> None:
        for kind, decoder in self._decoders.items():
            text = decoder.decode(b"", final=True)
            if text:
                (sys.stdout if kind == frames.STDOUT else sys.stderr).write(text)


def _write_untagged(data: bytes | bytearray) -> None:
    """Output of no single call (two calls ran at once, or a thread of the child's own):
    the caller's standard error, never its standard output."""
    try:
        sys.stderr.write(bytes(data).decode("utf-8", "replace"))
    except (OSError, ValueError):
        pass
