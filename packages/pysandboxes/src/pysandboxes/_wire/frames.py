"""Frames on the partial-mode connection: a fixed header, then the payload.

One pre-connected socket pair links the trusted side and its sandboxed child; nothing
listens anywhere. Every message is a frame: payload length (4 bytes), call id (8
bytes), kind (1 byte), payload. Calls are multiplexed by id on the one connection, so
calls from many threads or tasks overlap. Payloads are encoded and decoded elsewhere
(the parent's side decodes only in ``codec``); this module moves bytes.
"""

from __future__ import annotations

import select
import struct
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from collections.abc import Callable, Iterable
    from typing import Any

HEADER = struct.Struct("<IQB")

# Trusted side -> child.
CALL = 1  # payload: pickle of (module, qualname, args, kwargs)
INIT = 2  # payload: pickle of (module, qualname) of init_fn; answered READY or RAISED
CANCEL = 3  # no payload: stop the call (never started, cancelled, or answered STUCK)
CREDIT = 4  # payload: CREDIT_COUNT, the bytes of the call's output the caller has taken
#: A call sent while no other is in flight: the trusted side sends nothing more before its
#: reply without a byte on the relief pipe first (``ServeSpec.relief``), so the worker that
#: reads it may run it without waking another to read meanwhile.
CALL_ALONE = 5
# Child -> trusted side.
RESULT = 10  # payload: the value, as codec decodes it
RAISED = 11  # payload: the exception, described as values (see replies)
STDOUT = 12  # payload: bytes the call wrote to standard output
STDERR = 13  # payload: bytes the call wrote to standard error
READY = 14  # no payload: the child serves calls (or init_fn returned)
STUCK = 15  # no payload: a cancelled call runs on in a thread: the child must be replaced

#: The most output bytes of one call (0: of none) the child may have sent and not yet
#: had acknowledged by a ``CREDIT``: past it, the call's writes wait.
OUTPUT_WINDOW = 4 << 20
#: Output goes in frames of at most this many bytes, each counted against the window.
OUTPUT_FRAME = 64 << 10
CREDIT_COUNT = struct.Struct("<Q")

#: Kinds a child may send; anything else ends the connection.
FROM_CHILD = frozenset({RESULT, RAISED, STDOUT, STDERR, READY, STUCK})


def pack(kind: int, call_id: int, payload: bytes | bytearray | memoryview = b"") -> bytes:
    """One frame, header and payload, ready for ``sendall``."""
    return HEADER.pack(len(payload), call_id, kind) + bytes(payload)


#: A part of a payload this large is sent as it is, never copied into a larger buffer.
LARGE = 1 << 16
#: Types of values large enough to be pickled in parts (``Parts``).
BLOBS = (bytes, bytearray, str)


class Parts(list["Any"]):
    """A payload in parts, as a pickler writes them to this list as to a file: a large
    bytes-like value comes as a part of its own (the very object, not a copy), so a
    16 MiB value is never copied into the pickle's buffer, nor that into the frame's."""

    def write(self, part: Any) -> None:
        self.append(part)


def holds_large(values: Iterable[Any]) -> bool:
    """Whether a value among ``values`` is worth pickling in parts."""
    return any(type(value) in BLOBS and len(value) >= LARGE for value in values)


def send(
    sock: socket.socket, kind: int, call_id: int, payload: bytes | bytearray | Parts = b""
) -> None:
    """Send one frame (the caller holds the connection's send lock): one write when it
    is small; a large part goes by itself, never copied to prepend what comes before."""
    if not isinstance(payload, Parts):
        header = HEADER.pack(len(payload), call_id, kind)
        if len(payload) < LARGE:
            sock.sendall(header + payload)
        else:
            sock.sendall(header)
            sock.sendall(payload)
        return
    sizes = [memoryview(part).nbytes for part in payload]
    pending: list[Any] = [HEADER.pack(sum(sizes), call_id, kind)]
    for part, size in zip(payload, sizes, strict=True):
        if size < LARGE:
            pending.append(part)
            continue
        sock.sendall(b"".join(pending))
        pending = []
        sock.sendall(part)
    if pending:
        sock.sendall(b"".join(pending))


class InPlace:
    """A payload as an unpickler reads it, as a file, in place: a large bytes value is
    copied once, straight into the object it becomes (``readinto``)."""

    def __init__(self, payload: bytes | bytearray) -> None:
        self._view = memoryview(payload)
        self._at = 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._view) if size < 0 else min(len(self._view), self._at + size)
        piece = self._view[self._at : end].tobytes()
        self._at = end
        return piece

    def readinto(self, target: Any) -> int:
        size = min(len(target), len(self._view) - self._at)
        target[:size] = self._view[self._at : self._at + size]
        self._at += size
        return size

    def readline(self) -> bytes:  # only text opcodes read lines, and prescan refused them
        return b""


class Reader:
    """The frames of one connection, read through a buffer of its own: a frame that fits
    in it takes one ``recv``, header and payload together (and the frames sent in a row
    come with it); a larger payload is read straight into its own buffer, never copied.

    Its state is kept between calls, so a frame left half read (a signal raised out of
    ``recv`` in the thread reading) is finished by the next reader: who reads may change
    from one frame to the next (``_host.leading``)."""

    def __init__(self, sock: socket.socket, size: int = 1 << 16, spin: float = 0.0) -> None:
        self._sock = sock
        #: How long to look for data before sleeping in ``recv`` (see ``_spin``).
        self._spin_for = spin
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLIN)
        self._buffer = bytearray(size)
        self._view = memoryview(self._buffer)
        self._start = 0
        self._end = 0
        #: A large frame being read: kind, call id, its payload (None: dropped), bytes
        #: still to come.
        self._large: tuple[int, int, bytearray | None, int] | None = None

    def buffered(self) -> bool:
        """Whether bytes wait in the buffer (the next frame may need no ``recv``)."""
        return self._end > self._start or self._large is not None

    def receive(
        self, limit: int, ready: Callable[[], bool] | None = None, spin: bool = False
    ) -> tuple[int, int, bytearray | None] | None:
        """The next frame as ``(kind, call_id, payload)``, or ``None`` at the end of the
        connection. A payload over ``limit`` bytes is read and dropped: it comes as
        ``None`` (its call fails, the connection goes on). ``ready``, if given, is asked
        before each ``recv`` whether data comes in time; with ``spin``, data is looked
        for a while before ``recv`` sleeps (``_spin``).

        Raises:
            OSError: the connection failed.
            TimeoutError: ``ready`` said no (the frame is finished by the next call).
        """
        header = HEADER.size
        while self._large is None:
            held = self._end - self._start
            if held >= header:
                size, call_id, kind = HEADER.unpack_from(self._buffer, self._start)
                begin = self._start + header
                if held - header >= size:
                    self._start = begin + size
                    if size > limit:
                        return kind, call_id, None
                    return kind, call_id, self._buffer[begin : begin + size]
                if header + size > len(self._buffer):  # it cannot fit: read apart
                    have = held - header
                    payload = bytearray(size) if size <= limit else None
                    if payload is not None:
                        payload[:have] = self._view[begin : begin + have]
                    self._start = self._end = 0
                    self._large = (kind, call_id, payload, size - have)
                    break
            if self._start:  # what is held moves to the front, the rest is free
                self._buffer[:held] = self._view[self._start : self._end]
                self._start, self._end = 0, held
            if ready is not None and not ready():
                raise TimeoutError
            if spin and self._spin_for:
                self._spin()
            got = self._sock.recv_into(self._view[self._end :])
            if not got:
                return None
            self._end += got
        return self._rest(ready)

    def _spin(self) -> None:
        """Look for data a little while before sleeping in ``recv``: a reply that comes
        within it is read by a thread still running, and on a machine whose idle CPUs
        sleep, waking a sleeping thread there costs more than the whole round trip."""
        poll, end = self._poll.poll, time.perf_counter() + self._spin_for
        while not poll(0) and time.perf_counter() < end:
            pass

    def _rest(self, ready: Callable[[], bool] | None) -> tuple[int, int, bytearray | None] | None:
        assert self._large is not None
        kind, call_id, payload, left = self._large
        while left:
            if ready is not None and not ready():
                raise TimeoutError
            if payload is None:  # dropped as it comes: never held whole
                got = self._sock.recv_into(self._view, min(left, len(self._buffer)))
            else:
                got = self._sock.recv_into(memoryview(payload)[len(payload) - left :])
            if not got:
                return None
            left -= got
            self._large = (kind, call_id, payload, left)
        self._large = None
        return kind, call_id, payload

    def close(self) -> None:
        """Forget what is held (the connection ended)."""
        self._start = self._end = 0
        self._large = None
