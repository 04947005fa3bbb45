"""Partial mode, the trusted side: waiting for one call, its output, its end.

The calling thread (or task) waits for its call's items (a thread reads them itself
when nobody else reads: ``leading``), writes its output where a local call's would go,
and decodes the reply itself. A call past its timeout, or whose
waiting task is cancelled (or whose thread gets ^C), is cancelled in the child
(``Child.cancel``): the caller gets ``SandboxTimeout`` (or its ``CancelledError``)
at once, and the child is replaced if the call cannot be stopped there.
"""

from __future__ import annotations

import collections
import time
import weakref

from pysandboxes._host.leading import SyncWaiter
from pysandboxes._host.output import Output
from pysandboxes._host.partial import CRASHED, FINAL, TOO_LARGE
from pysandboxes._wire import frames
from pysandboxes.errors import RuleResultRefusedError, SandBoxError, SandboxTimeout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TextIO

    from pysandboxes._host.partial import Child
    from pysandboxes._policy.model import Policy


class Timeout:
    """A call's timeout and where it comes from, for the message."""

    def __init__(self, seconds: float, source: str) -> None:
        self.seconds = seconds
        self.source = source

    def error(self, what: str) -> SandboxTimeout:
        return SandboxTimeout(
            f"{what} did not finish within {self.seconds:g} s ({self.source}): it was stopped "
            "(cancelled in the sandboxed process, or the process replaced when the call could "
            "not be interrupted)",
            timeout=self.seconds,
        )


def wait(
    child: Child,
    kind: int,
    call: tuple[Any, ...],
    decode: Callable[[bytes, tuple[Any, ...]], Any],
    timeout: Timeout | None = None,
) -> tuple[bool, Any]:
    """Send a call and wait for its reply in this thread, writing its output here.

    ``decode`` gets the result's bytes and the call. Returns ``(True, result)``, or
    ``(False, exception)`` for the caller to raise (so that its traceback goes from the
    caller's line to the remote frames)."""
    waiter = SyncWaiter()
    output: Output | None = None  # made for the first output: most calls write none
    deadline = None if timeout is None else time.monotonic() + timeout.seconds
    leadership = child.leadership
    next_item = leadership.next_item
    leadership.claim(waiter)
    try:
        call_id = child.send_call(kind, call, waiter)
    except BaseException:
        leadership.release(waiter)
        raise
    try:
        while True:
            item_kind, data = next_item(waiter, deadline)
            if item_kind in FINAL:
                if output is not None:
                    output.flush()
                return outcome(item_kind, data, lambda raw: decode(raw, call), child.spec.policy)
            if item_kind in (frames.STDOUT, frames.STDERR):
                if output is None:
                    output = _output(child, call_id)
                output.write(item_kind, data)
    except TimeoutError:
        assert timeout is not None
        if output is not None:
            output.flush()
        # A sync function runs in a thread of the child, which nothing can interrupt:
        # the next call must not wait behind it, so the child is replaced at once.
        child.cancel(call_id, stuck=True)
        return False, timeout.error(f"{call[0]}.{call[1]}")
    except BaseException:  # ^C while waiting: the call is stopped, not left running
        leadership.release(waiter)
        child.cancel(call_id, stuck=True)
        if output is not None:
            output.flush()
        raise


def _output(child: Child, call_id: int) -> Output:
    return Output(lambda taken: child.credit(call_id, taken), where=child.output)


async def await_call(
    child: Child,
    kind: int,
    call: tuple[Any, ...],
    decode: Callable[[bytes, tuple[Any, ...]], Any],
    limit: Timeout | None = None,
    streams: tuple[TextIO, TextIO] | None = None,
    sync: bool = False,
) -> tuple[bool, Any]:
    """``wait`` for a coroutine: the reply is awaited on the caller's loop; cancelling
    the awaiting task cancels the call in the child. ``streams``: where the call's
    output goes instead of ``sys.stdout``/``sys.stderr`` (a stdio server's stderr).
    ``sync``: the function is a sync one, which nothing stops but replacing the child
    (at once, as ``wait`` does: the next call must not queue behind it)."""
    import asyncio

    items: asyncio.Queue[tuple[int, Any]] = asyncio.Queue()
    waiter = _TaskWaiter(_inbox(asyncio.get_running_loop()), items)
    call_id = child.send_call(kind, call, waiter)
    output = Output(lambda taken: child.credit(call_id, taken), streams, child.output)
    deadline = None if limit is None else time.monotonic() + limit.seconds
    try:
        while True:
            if deadline is None:
                item_kind, data = await items.get()
            else:
                remaining = max(0.0, deadline - time.monotonic())
                item_kind, data = await asyncio.wait_for(items.get(), remaining)
            if item_kind in (frames.STDOUT, frames.STDERR):
                output.write(item_kind, data)
            elif item_kind in FINAL:
                output.flush()
                return outcome(item_kind, data, lambda raw: decode(raw, call), child.spec.policy)
    except TimeoutError:
        if limit is None:
            raise
        output.flush()
        child.cancel(call_id, stuck=sync)
        return False, limit.error(f"{call[0]}.{call[1]}")
    except BaseException:  # the awaiting task was cancelled: so is the call
        child.cancel(call_id, stuck=sync)
        output.flush()
        raise


class _TaskWaiter:
    """A waiter for an async call: items go to the caller's loop, from the reader."""

    def __init__(self, inbox: _Inbox, items: Any) -> None:
        self._inbox = inbox
        self._items = items

    def put(self, item: tuple[int, Any]) -> None:
        self._inbox.put(self._items, item)


class _Inbox:
    """The items of one loop's async calls, handed over in batches: the loop is woken
    once for all the frames read meanwhile (fifty calls gathered), not once a frame."""

    def __init__(self, loop: Any) -> None:
        self._loop = loop
        self._items: collections.deque[tuple[Any, tuple[int, Any]]] = collections.deque()
        self._scheduled = False

    def put(self, queue: Any, item: tuple[int, Any]) -> None:
        self._items.append((queue, item))
        if not self._scheduled:  # else the drain to come takes it too
            self._scheduled = True
            try:
                self._loop.call_soon_threadsafe(self._drain)
            except RuntimeError:
                self._items.clear()  # the caller's loop is closed: nobody waits any more

    def _drain(self) -> None:
        self._scheduled = False  # first: what comes from now on schedules another drain
        items = self._items
        while items:
            queue, item = items.popleft()
            queue.put_nowait(item)


_inboxes: weakref.WeakKeyDictionary[Any, _Inbox] = weakref.WeakKeyDictionary()


def _inbox(loop: Any) -> _Inbox:
    try:
        inbox = _inboxes.get(loop)
        if inbox is None:
            inbox = _inboxes.setdefault(loop, _Inbox(loop))
    except TypeError:  # a loop no weak reference can name (a C one): a call's own inbox
        inbox = _Inbox(loop)
    return inbox


def outcome(
    kind: int, data: Any, decode: Callable[[bytes], Any], policy: Policy | None = None
) -> tuple[bool, Any]:
    """What a call's final item means for its caller (``policy``: the limits a raised
    exception may have hit, named in a note)."""
    if kind == frames.RESULT:
        try:
            return True, decode(data)
        except SandBoxError as refused:
            return False, refused.with_traceback(None)
    if kind == frames.READY:
        return True, None
    if kind == CRASHED:
        return False, data
    if kind == TOO_LARGE:
        return False, RuleResultRefusedError(
            "the sandboxed function's reply was larger than sandboxes(result_limit=...) "
            "and was dropped; return less, or raise the limit"
        )
    from pysandboxes._host.remote import rebuild
    from pysandboxes._wire.codec import RefusedValue, decode_value

    try:
        description = decode_value(data)
    except RefusedValue as exc:  # over the reply budget, or not a description of values
        return False, RuleResultRefusedError(
            f"the sandboxed function's exception was refused, not rebuilt: {exc}"
        )
    from pysandboxes._host.limits import note

    raised = rebuild(description)
    note(raised, policy)
    return False, raised
