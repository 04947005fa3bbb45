"""Helpers of the learning tests: the rules a file grants, and a loopback server."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

#: The active lines of a fresh template: they grant nothing.
TEMPLATE_LINES = frozenset({"py-sandbox=true", "os-sandbox=${OS_SANDBOX:-landlock}"})


def granted(path: Path) -> list[str]:
    """The active rule lines of a rule file, comments and template lines left out."""
    rules: list[str] = []
    for line in path.read_text().splitlines():
        text = line.split("  #", 1)[0].strip()
        if text and not text.startswith("#") and text not in TEMPLATE_LINES:
            rules.append(text)
    return rules


class Server:
    """A TCP server on 127.0.0.1 that answers every connection with ``pong``."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._socket.accept()
            except OSError:
                return
            with conn:
                conn.recv(16)
                conn.sendall(b"pong")

    def close(self) -> None:
        self._socket.close()
