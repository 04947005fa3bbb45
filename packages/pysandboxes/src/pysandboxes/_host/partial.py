"""Partial mode, the trusted side: one sandboxed child and the calls it serves.

``Child`` starts complete mode's sandboxed interpreter with the rules, as ``python-sb``
would (``childstart``), but its program is the call server (``_inside.server``) and it
is linked to this process by a socket pair made there: no port, no token, nothing
another process can reach. It runs in a process group of its own, tied to this process
by a lifeline (``lifeline``): when this process ends, however, the kernel kills the
group. One thread at a time reads the child's frames and hands each to the call waiting
for it: a waiting caller, or a thread of this module's (``leading``); what the child
sends is decoded by ``_wire.codec`` alone, as values.

At most once: a call is sent once. If the child ends, every call in flight fails with
``SandboxCrashed`` (how it ended, and the last lines it wrote on its standard error)
and this ``Child`` is done; the caller starts another for the next call. A call that
was cancelled and cannot be stopped retires the child: it serves its other calls in
flight, then ends, and the next call starts another.
"""

from __future__ import annotations

import itertools
import os
import pickle
import socket
import threading

from pysandboxes._host.childend import check_rule_files, conclude_learning, remove_tempdir
from pysandboxes._host.leading import Leadership, SyncWaiter
from pysandboxes._host.lifeline import Tail, kill_group, reap
from pysandboxes._host.output import Untagged
from pysandboxes._wire import frames
from pysandboxes.errors import SandboxCrashed, SandBoxError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from pysandboxes._host.deciders import CallbackDecider
    from pysandboxes._host.launchplan import LaunchRequest
    from pysandboxes._host.learning.plan import LearnRun
    from pysandboxes._wire.spec import LaunchSpec

_START_TIMEOUT = 60.0
#: How long a cancelled call may take to end in the child before the child is replaced.
CANCEL_GRACE = 1.0
#: How long the thread reading replies looks for one before it sleeps (``frames.Reader``):
#: a tiny call's reply comes within it, and this process's CPU is not put to sleep.
SPIN = 50e-6


CRASHED = -1  # a waiter's item: the child ended (payload: the exception)
TOO_LARGE = -2  # a waiter's item: the reply was over the limit (and dropped)
#: Items that end a call (the reader forgets its waiter on them).
FINAL = frozenset({frames.RESULT, frames.RAISED, frames.READY, CRASHED, TOO_LARGE})


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
        grace: float = 5.0,
        output: str = "auto",
        prompts: CallbackDecider | None = None,
    ) -> None:
        from pysandboxes._host.childstart import objects_mode, start

        started = start(request, env, modules, workers, prompting=prompts is not None)
        self.spec: LaunchSpec = started.spec
        self._watch = started.watch
        self._audit = started.audit
        learning = started.learning
        self._learning: LearnRun | None = learning
        self._collector: Any = None
        self.result_limit = result_limit
        self.grace = grace
        #: Where the calls' standard output goes (``sandboxes(output=...)``).
        self.output = output
        self.objects = objects_mode(started.spec)
        #: A learning run's classes seen in results: name -> (the application's own, where).
        self.results_seen: dict[str, tuple[bool, str]] | None = {} if learning else None
        #: The modules of @sandbox functions this child was started with (its program).
        self.modules = frozenset(modules[2])
        self.pid = started.pid
        self.lifeline = started.lifeline
        ours, errors_read = started.sock, started.errors
        self._writer = self._audit.writer("partial") if self._audit is not None else None
        if learning is not None:
            from pysandboxes._host.learning.conclude import Collector

            self._collector = Collector(learning.read_fd)
        self.sock = ours
        #: Partial mode's answers to permission requests (``_host.prompts``), or ``None``.
        self.prompts = prompts
        self._broker = None
        if prompts is not None and started.asks is not None:
            from pysandboxes._host.prompts import Broker

            self._broker = Broker(started.asks, self.spec, prompts, self._asking, self._writer)
            self._broker.start()
        self._send_lock = threading.Lock()
        #: The child's relief pipe, and the call sent alone that runs there (0: none).
        self._relief = started.relief
        self._alone = 0
        self._alone_lock = threading.Lock()  # the reader clears it as senders set it
        self._ids = itertools.count(1)
        self._waiters: dict[int, Any] = {}
        self._changed = threading.Condition()
        self._ready = threading.Event()
        self.ended: SandboxCrashed | None = None
        self.retiring: str | None = None
        self._closing: str | None = None
        self._close_lock = threading.Lock()
        self._closed = False
        self.tail = Tail()
        self._untagged = Untagged(lambda taken: self.credit(0, taken))
        self._reaped = threading.Event()
        self._last_words = threading.Thread(target=self._read_errors, args=(errors_read,))
        self._last_words.daemon = True
        self._last_words.start()
        reader = frames.Reader(self.sock, spin=SPIN)
        self.leadership = Leadership(
            lambda ready, spin: reader.receive(self.result_limit, ready, spin),
            reader.buffered,
            self.sock.fileno(),
            self._route,
            self._ended_reading,
            self._passive,
            self._interrupted,
            lambda: len(self._waiters) <= 1,
        )
        if not self._ready.wait(_START_TIMEOUT) or self.ended is not None:
            self.close(0.0)
            said = "\n".join(self.tail.lines())
            raise SandBoxError(
                "the sandbox did not start"
                + (f": {self.ended}" if self.ended is not None else "")
                + (f"\n{said}" if said and self.ended is None else "")
            )
        try:
            from pysandboxes._host.limits import apply

            apply(self.pid, self.spec.policy)
        except OSError as exc:
            self.close(0.0)
            raise SandBoxError(f"the sandbox did not start: {exc}") from None

    def _read_errors(self, fd: int) -> None:
        """What the child writes on its first standard error: errors before it serves,
        then only its crash report (``faulthandler``)."""
        with os.fdopen(fd, "rb") as pipe:
            while chunk := pipe.read1(4096):
                self.tail.add(chunk)

    def _route(self, frame: tuple[int, int, bytearray | None]) -> bool:
        """Hand a frame to the call it belongs to (``False``: the protocol is broken)."""
        kind, call_id, payload = frame
        if kind not in frames.FROM_CHILD:
            return False  # a broken protocol: the child is not trusted further
        if payload is None:
            kind, payload = TOO_LARGE, bytearray()
        if kind == frames.STDERR:
            self.tail.add(payload)
        if call_id == 0:
            if kind == frames.READY:
                self._ready.set()
            elif kind in (frames.STDOUT, frames.STDERR):
                self._untagged.put(payload)
            return True
        waiter = self._waiters.get(call_id)
        if waiter is None:
            if kind in (frames.STDOUT, frames.STDERR):
                self.credit(call_id, len(payload))  # nobody takes it: not held
            return True  # output of a call nobody waits for any more
        if kind in FINAL:
            self._forget(call_id)
        self.leadership.put(waiter, (kind, payload))
        return True

    def _ended_reading(self) -> None:
        self._untagged.close()
        self._end()

    def _passive(self) -> bool:
        """Whether a call waits that does not read for itself (async, cancelled)."""
        return any(type(w) is not SyncWaiter for w in list(self._waiters.values()))

    def _interrupted(self) -> None:
        """The thread reading was stopped mid-frame (see ``_host.leading``): the child
        ends at once, its calls in flight fail, and the next call starts another."""
        if self._closing is None:
            self._closing = "stopped: a thread reading its replies was interrupted"
        kill_group(self.pid)
        self.leadership.close()  # the end is read, the calls in flight fail
        self.retire("a thread reading its replies was interrupted")

    def _asking(self, call_id: int) -> bool:
        """Whether ``call_id`` is a call in flight, which may ask a question."""
        waiter = self._waiters.get(call_id)
        return waiter is not None and not isinstance(waiter, _Watch)

    def _forget(self, call_id: int) -> None:
        if call_id == self._alone:  # its reply came: the child's worker reads again
            with self._alone_lock:  # unless another call was sent alone meanwhile
                if call_id == self._alone:
                    self._alone = 0
        if self.prompts is not None:
            self.prompts.forget(call_id)
        with self._changed:
            self._waiters.pop(call_id, None)
            if self._closed:  # closing waits for the calls in flight
                self._changed.notify_all()

    def _end(self) -> None:
        try:
            how, exitcode, number = reap(self.pid)
        finally:
            self._reaped.set()
        if self._closing is not None:
            message = f"{self._closing} ({how})"
        else:
            self._last_words.join(0.5)  # the crash report comes on its own pipe
            lines = self.tail.lines()
            said = "; its last lines on standard error:\n  " + "\n  ".join(lines) if lines else ""
            message = how + said
        crashed = SandboxCrashed(message, exitcode=exitcode, signal=number)
        self.ended = crashed
        self._ready.set()
        with self._changed:
            waiters, self._waiters = self._waiters, {}
            self._changed.notify_all()
        for waiter in waiters.values():
            self.leadership.put(waiter, (CRASHED, crashed))

    def send_call(self, kind: int, call: tuple[Any, ...], waiter: Any) -> int:
        """Send a call once; its items go to ``waiter``. Returns its id."""
        payload: bytes | frames.Parts
        if frames.holds_large(call[2]) or (call[3] and frames.holds_large(call[3].values())):
            payload = frames.Parts()  # a large argument is sent as it is, never copied
            pickle.Pickler(payload, protocol=5).dump(call)
        else:
            payload = pickle.dumps(call, protocol=5)
        call_id = next(self._ids)
        if self.prompts is not None:
            self.prompts.remember(call_id, type(waiter) is not SyncWaiter)
        self._waiters[call_id] = waiter
        self.leadership.activity += 1
        if self.ended is not None:
            self._forget(call_id)
            raise self.ended
        try:
            with self._send_lock:
                # Alone in flight: its reader in the child runs it, waking none (``_relieve``)
                if kind == frames.CALL and len(self._waiters) == 1:
                    with self._alone_lock:
                        if not self._alone:
                            kind, self._alone = frames.CALL_ALONE, call_id
                self._send(kind, call_id, payload)
        except OSError:
            self._forget(call_id)
            self.leadership.close()  # the end is read, the child reaped
            self._reaped.wait(5.0)
            raise self.ended or SandboxCrashed("the sandboxed process ended") from None
        if type(waiter) is not SyncWaiter:
            self.leadership.wake_background()  # it cannot read for itself
        return call_id

    def _send(self, kind: int, call_id: int, payload: bytes | frames.Parts = b"") -> None:
        """Send a frame (the send lock held); a call sent alone runs: relieve first."""
        if self._alone and kind != frames.CALL_ALONE:
            with self._alone_lock:
                alone, self._alone = self._alone, 0
            if alone:
                self._relieve(alone)
        frames.send(self.sock, kind, call_id, payload)

    def _relieve(self, alone: int) -> None:
        """While the call ``alone`` runs, nobody in the child reads: its id on the relief
        pipe has a worker read again (see ``_inside.turns``)."""
        try:
            os.write(self._relief, alone.to_bytes(8, "little"))
        except OSError:
            pass  # the child is gone: its end is read, nothing waits

    def credit(self, call_id: int, taken: int) -> None:
        """Tell the child the caller took ``taken`` bytes of the call's output: it may
        send that much more (``_host.output``)."""
        try:
            with self._send_lock:
                self._send(frames.CREDIT, call_id, frames.CREDIT_COUNT.pack(taken))
        except OSError:
            pass  # the child is gone: nothing waits for credit any more

    def cancel(self, call_id: int, *, stuck: bool = False) -> None:
        """Stop a call nobody waits for any more: the child cancels it, or says it cannot
        (or does not answer in ``CANCEL_GRACE``), and then it is retired. ``stuck``: it
        cannot be stopped in the child (a sync function): retire the child now."""
        watch = _Watch(self, call_id)
        with self._changed:
            if call_id not in self._waiters:
                return  # it ended meanwhile
            self._waiters[call_id] = watch
        try:
            with self._send_lock:
                self._send(frames.CANCEL, call_id)  # it may not have started
        except OSError:
            return  # the child is gone: nothing runs any more
        self.leadership.wake_background()  # the watch's items are read
        if stuck:
            self.retire(f"call {call_id} could not be stopped")
        else:
            watch.start()

    def retire(self, reason: str) -> None:
        """Let the other calls in flight end (up to the grace period), then kill the
        child: a call runs on in it that cannot be stopped. Calls go to another child."""
        with self._close_lock:
            if self.retiring is not None or self._closed:
                return
            self.retiring = reason
        arguments = (self.grace, reason, True)
        thread = threading.Thread(target=self.close, args=arguments, daemon=True)
        thread.start()

    def close(
        self, grace: float = 5.0, reason: str = "sandboxes() was left", kill: bool = False
    ) -> None:
        """End the child: wait up to ``grace`` seconds for the calls in flight, then end
        it (it ends when the connection closes; killed if it does not, or at once with
        ``kill``), remove its temporary directory, dismiss its reaper, and conclude a
        learning run."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        with self._changed:
            self._changed.wait_for(lambda: not self._calls_in_flight(), timeout=grace)
            running = self._calls_in_flight()
        if running and self.ended is None:
            self._closing = (
                f"{reason} while the call ran: it was stopped after the {grace:g} s grace period"
            )
        if (running or kill) and self.ended is None:
            if self._closing is None:
                self._closing = reason
            kill_group(self.pid)
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        with self._send_lock:  # its end read: a worker reads the end of the connection
            if self._relief >= 0:
                os.close(self._relief)
                self._relief = -1
        self.leadership.close()  # the end is read, the child reaped
        if not self._reaped.wait(2.0):
            kill_group(self.pid)
            self._reaped.wait(5.0)
        self.sock.close()
        if self._broker is not None:
            self._broker.close()
        remove_tempdir(self.spec)
        self.lifeline.release()
        check_rule_files(self._watch)
        if self._audit is not None and self._writer is not None:
            self._audit.conclude(self._writer)
        learning, self._learning = self._learning, None
        if learning is not None and self._collector is not None:
            conclude_learning(learning, self._collector, self.results_seen, self.spec)

    def _calls_in_flight(self) -> bool:
        return any(not isinstance(w, _Watch) for w in self._waiters.values())


class _Watch:
    """Stands for a cancelled call until the child ends it: retires the child if it
    says the call cannot be stopped, or is silent for ``CANCEL_GRACE``."""

    def __init__(self, child: Child, call_id: int) -> None:
        self._child = child
        self._call_id = call_id
        self._timer = threading.Timer(CANCEL_GRACE, self._expired)
        self._timer.daemon = True

    def start(self) -> None:
        self._timer.start()

    def put(self, item: tuple[int, Any]) -> None:
        if item[0] in FINAL:
            self._timer.cancel()
        elif item[0] == frames.STUCK:
            self._timer.cancel()
            self._child.retire(f"call {self._call_id} could not be stopped")

    def _expired(self) -> None:
        if self._child._waiters.get(self._call_id) is self:
            self._child.retire(f"call {self._call_id} did not stop in {CANCEL_GRACE:g} s")
