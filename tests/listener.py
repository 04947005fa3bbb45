"""A loopback listener for the network tests: it counts what reaches it.

Security tests show a probe reaches it under plain python, then that under python-sb the
count does not move. Shared by tests/complete and tests/kernel (tests/ is on sys.path).
"""

from __future__ import annotations

import socket
import threading


class Listener:
    """A loopback TCP or UDP listener that counts what reaches it."""

    def __init__(self, kind: int = socket.SOCK_STREAM, host: str = "127.0.0.1") -> None:
        self.sock = socket.socket(socket.AF_INET, kind)
        self.sock.bind((host, 0))
        self.host = host
        self.port = self.sock.getsockname()[1]
        self.kind = kind
        self.received = 0
        self.sock.settimeout(0.2)
        if kind == socket.SOCK_STREAM:
            self.sock.listen()
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                if self.kind == socket.SOCK_STREAM:
                    conn, _ = self.sock.accept()
                    self.received += 1  # counted before the client can see the reply
                    conn.sendall(b"hello\n")
                    conn.close()
                else:
                    self.sock.recvfrom(100)
                    self.received += 1
            except OSError:
                continue

    def close(self) -> None:
        self._stop = True
        self._thread.join(timeout=2)
        self.sock.close()
