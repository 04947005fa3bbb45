"""Frames on the partial-mode connection: a fixed header, then the payload.

One pre-connected socket pair links the trusted side and its sandboxed child; nothing
listens anywhere. Every message is a frame: payload length (4 bytes), call id (8
bytes), kind (1 byte), payload. Calls are multiplexed by id on the one connection, so
calls from many threads or tasks overlap. Payloads are encoded and decoded elsewhere
(the parent's side decodes only in ``codec``); this module moves bytes.
"""

from __future__ import annotations

import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    import io
    import socket

HEADER = struct.Struct("<IQB")

# Trusted side -> child.
CALL = 1  # payload: pickle of (module, qualname, args, kwargs)
INIT = 2  # payload: pickle of (module, qualname) of init_fn; answered READY or RAISED
CANCEL = 3  # no payload: stop the call (never started, cancelled, or answered STUCK)
CREDIT = 4  # payload: CREDIT_COUNT, the bytes of the call's output the caller has taken
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


def send(sock: socket.socket, kind: int, call_id: int, payload: bytes = b"") -> None:
    """Send one frame (the caller holds the connection's send lock)."""
    header = HEADER.pack(len(payload), call_id, kind)
    if len(payload) < 65536:
        sock.sendall(header + payload)
    else:  # a large payload is not copied once more to prepend 13 bytes
        sock.sendall(header)
        sock.sendall(payload)


class Reader:
    """The frames of one connection, read through a buffer: a frame that fits in it
    takes one ``recv``, header and payload together (the same for frames sent in a row)."""

    def __init__(self, sock: socket.socket) -> None:
        self._file: io.BufferedReader = sock.makefile("rb", buffering=1 << 16)  # type: ignore[assignment]

    def receive(self, limit: int) -> tuple[int, int, bytearray | None] | None:
        """The next frame as ``(kind, call_id, payload)``, or ``None`` at the end of the
        connection. A payload over ``limit`` bytes is read and dropped: it comes as
        ``None`` (its call fails, the connection goes on).

        Raises:
            OSError: the connection failed.
        """
        read = self._file.read
        header = read(HEADER.size)
        if len(header) < HEADER.size:
            return None
        size, call_id, kind = HEADER.unpack(header)
        if size > limit:
            while size > 0:  # dropped as it comes: never held whole
                chunk = read(min(size, 1 << 20))
                if not chunk:
                    return None
                size -= len(chunk)
            return kind, call_id, None
        payload = bytearray(size)
        if size and self._file.readinto(payload) < size:
            return None
        return kind, call_id, payload

    def close(self) -> None:
        self._file.close()
