"""What a sandboxed call writes to standard output and error, sent to its caller.

Two levels. ``sys.stdout``/``sys.stderr`` become streams that send what a call writes,
tagged with the call (a context variable: it follows threads and asyncio tasks). Below
them, descriptors 1 and 2 become pipes this process reads itself: what native code, a
program started by the call, or ``os.write(1, ...)`` writes there is sent too, tagged
with the call when only one is running, else untagged (the caller shows it on its
standard error). Before a call's result is sent, the pipes are drained, so its output
arrives first. Nothing reaches the caller's own descriptors: a caller speaking a
protocol on its standard output (an MCP server) is never corrupted.
"""

from __future__ import annotations

import contextvars
import os
import select
import threading

from pysandboxes._wire import frames

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

#: The call the running code serves (0: none, e.g. a thread the program started).
current_call: contextvars.ContextVar[int] = contextvars.ContextVar("pysandboxes_call", default=0)


#: The most a call's unfinished line holds before it is sent as it is.
_HELD = 1 << 16


class CallStream:
    """``sys.stdout`` or ``sys.stderr`` of the sandboxed process, per call."""

    def __init__(self, kind: int, send: Callable[[int, int, bytes], None], fd: int) -> None:
        self._kind = kind
        self._send = send
        self._fd = fd
        self._partial: dict[int, bytes] = {}  # per call: written after its last line end
        self.encoding = "utf-8"
        self.errors = "backslashreplace"

    def write(self, text: str) -> int:
        data = text.encode("utf-8", "backslashreplace")
        call = current_call.get()
        if not call:
            os.write(self._fd, data)  # the pipe below: sent untagged
            return len(text)
        # Whole lines: print() writes a line and its end apart, and what the call writes
        # to the descriptor meanwhile must not land in the middle of it.
        held = self._partial.pop(call, b"") + data
        cut = len(held) if len(held) >= _HELD else held.rfind(b"\n") + 1
        if cut:
            self._send(self._kind, call, held[:cut])
        if cut < len(held):
            self._partial[call] = held[cut:]
        return len(text)

    def writelines(self, lines: list[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        call = current_call.get()
        if call:
            self.end(call)

    def end(self, call: int) -> None:
        """Send what ``call`` wrote after its last line end (its result is next)."""
        rest = self._partial.pop(call, b"")
        if rest:
            self._send(self._kind, call, rest)

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd


class DescriptorPump:
    """Reads descriptors 1 and 2 (pipes now) and sends what comes, per call if it can."""

    def __init__(self, send: Callable[[int, int, bytes], None]) -> None:
        self._send = send
        self._lock = threading.Lock()
        self.running: set[int] = set()
        self._pipes: dict[int, int] = {}
        for fd, kind in ((1, frames.STDOUT), (2, frames.STDERR)):
            read_end, write_end = os.pipe()
            os.dup2(write_end, fd)
            os.close(write_end)
            os.set_blocking(read_end, False)
            self._pipes[read_end] = kind
        # One look at both pipes per drain (a call's end): two failed reads cost more.
        self._pending = select.poll()
        for fd in self._pipes:
            self._pending.register(fd, select.POLLIN)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._pump, name="pysandboxes-output", daemon=True)
        thread.start()
        return thread

    def _pump(self) -> None:
        poller = select.poll()
        for fd in self._pipes:
            poller.register(fd, select.POLLIN)
        while True:
            poller.poll()
            self.drain()

    def drain(self) -> None:
        """Send what the pipes hold now (called before a call's result is sent)."""
        with self._lock:
            if not self._pending.poll(0):
                return
            running = self.running
            call = next(iter(running)) if len(running) == 1 else 0
            for fd, kind in self._pipes.items():
                while True:
                    try:
                        data = os.read(fd, 1 << 16)
                    except BlockingIOError:
                        break
                    if not data:
                        break
                    self._send(kind, call, data)
