"""Partial mode, the trusted side: a sandboxed call's output, replayed where the caller is.

What a call writes (``sys.stdout``/``sys.stderr`` and descriptors 1 and 2 in the child)
arrives as frames while it runs. It is held per call and replayed when the call
returns, in the calling thread, in the order written, under one lock: the output of
two calls that ran at once never mixes, and a line is never split. A call that writes
more than ``SPILL`` bytes has its whole lines replayed as they fill the buffer, so
memory stays bounded; each such piece is still written in one go.

Backpressure: the child may have at most ``frames.OUTPUT_WINDOW`` bytes of a call's
output unacknowledged; the caller acknowledges (``CREDIT``) what it has taken into
its buffer. A caller blocked on a paused terminal stops taking, the child's writes
block, and nothing is lost; other calls' frames still arrive meanwhile.

Where: the caller's ``sys.stdout`` and ``sys.stderr``, or the streams given. While the
application serves the MCP protocol on its standard output (the ``mcp`` SDK's stdio
server is loaded) a call's standard output goes to standard error instead, flushed at
once (``sandboxes(output=...)`` says otherwise).
"""

from __future__ import annotations

import sys
import threading

from pysandboxes._wire import frames

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TextIO

#: Bytes of one call's output held before its whole lines are replayed.
SPILL = 1 << 20
#: Bytes taken before they are acknowledged to the child.
_CREDIT_STEP = frames.OUTPUT_WINDOW // 4
#: One call's output is replayed at a time.
_REPLAY = threading.Lock()
#: ``sandboxes(output=...)``: where a call's standard output goes.
OUTPUT_CHOICES = ("auto", "stdout", "stderr")


def stdio_protocol_served() -> bool:
    """Whether the application may speak a protocol on its standard output: the ``mcp``
    SDK's stdio transport is loaded (1.x serves on descriptor 1 itself, 2.x diverts it
    while serving but flushes what is left in ``sys.stdout`` onto it at the end)."""
    return "mcp.server.stdio" in sys.modules


class Output:
    """One call's output: held, then replayed where a local call's would go."""

    def __init__(
        self,
        credit: Callable[[int], None],
        streams: tuple[TextIO, TextIO] | None = None,
        where: str = "auto",
    ) -> None:
        self._credit = credit
        self._streams = streams
        self._to_stderr = where == "stderr" or (where == "auto" and stdio_protocol_served())
        self._held: list[tuple[int, str]] = []
        self._size = 0
        self._taken = 0
        self._decoders: dict[int, object] = {}

    def write(self, kind: int, data: bytes | bytearray) -> None:
        text = self._decode(kind, data)
        if text:
            self._held.append((kind, text))
            self._size += len(data)
            if self._size >= SPILL:
                self._replay(whole_lines=True)
        self._taken += len(data)
        if self._taken >= _CREDIT_STEP:
            taken, self._taken = self._taken, 0
            self._credit(taken)

    def flush(self) -> None:
        """Replay what is held (the call ended, or its caller stopped waiting)."""
        for kind in list(self._decoders):
            tail = self._decode(kind, b"", final=True)
            if tail:
                self._held.append((kind, tail))
        self._replay(whole_lines=False)

    def _decode(self, kind: int, data: bytes | bytearray, final: bool = False) -> str:
        decoder = self._decoders.get(kind)
        if decoder is None:
            if not data and not final:
                return ""
            import codecs

            decoder = self._decoders[kind] = codecs.getincrementaldecoder("utf-8")("replace")
        return decoder.decode(bytes(data), final)  # type: ignore[attr-defined]

    def _replay(self, *, whole_lines: bool) -> None:
        held, self._held, self._size = self._held, [], 0
        if whole_lines:  # the unfinished last line waits for its end
            kind, text = held[-1]
            cut = text.rfind("\n") + 1
            if cut < len(text):
                held[-1] = (kind, text[:cut])
                self._held, self._size = [(kind, text[cut:])], len(text) - cut
        if not any(text for _, text in held):
            return
        with _REPLAY:
            used: list[TextIO] = []
            for kind, text in held:
                if text:
                    stream = self._stream(kind)
                    stream.write(text)
                    if stream not in used:
                        used.append(stream)
            for stream in used:
                try:
                    stream.flush()  # nothing left in a buffer for later (a protocol's)
                except (OSError, ValueError):
                    pass

    def _stream(self, kind: int) -> TextIO:
        if self._streams is not None:
            return self._streams[0 if kind == frames.STDOUT else 1]
        if kind == frames.STDERR or self._to_stderr:
            return sys.stderr
        return sys.stdout


class Untagged:
    """Output of no single call (two calls ran at once, or a thread of the child's own):
    written on the caller's standard error by a thread of its own, so that a blocked
    stream holds back only this output, acknowledged as written."""

    def __init__(self, credit: Callable[[int], None]) -> None:
        import queue

        self._credit = credit
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def put(self, data: bytes | bytearray) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._write, name="pysandboxes-output", daemon=True
            )
            self._thread.start()
        self._queue.put(bytes(data))

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)

    def _write(self) -> None:
        while (data := self._queue.get()) is not None:
            try:
                sys.stderr.write(data.decode("utf-8", "replace"))
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
            self._credit(len(data))
