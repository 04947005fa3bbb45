"""A program on a real pseudo-terminal, as a user at a terminal drives it (stdlib ``pty``)."""

from __future__ import annotations

import os
import pty
import re
import select
import time
from pathlib import Path


class Terminal:
    """A program on a pseudo-terminal: type lines, read what the screen would show."""

    def __init__(self, command: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # pragma: no cover - the child
            os.chdir(cwd)
            os.execve(command[0], command, env)
        self.seen = ""

    def read_until(self, pattern: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while not re.search(pattern, plain_screen(self.seen)):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{pattern!r} never came; the screen:\n{self.seen}")
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    break
                self.seen += chunk.decode("utf-8", "replace")
        return self.seen

    def type(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\r")

    def close(self) -> None:
        if self.pid:  # still running: stopped by its own id
            try:
                os.kill(self.pid, 9)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
        os.close(self.fd)

    def send(self, keys: str) -> None:
        """Keys with no Enter after them (a Tab, Ctrl-D)."""
        os.write(self.fd, keys.encode())

    def wait(self, timeout: float = 30) -> int:
        """Read the screen until the program ends; its exit status."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self._drain()
                self.pid = 0
                return os.waitstatus_to_exitcode(status)
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                self._drain()
        raise AssertionError(f"the program never ended; the screen:\n{self.seen}")

    def _drain(self) -> None:
        while select.select([self.fd], [], [], 0.05)[0]:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.seen += chunk.decode("utf-8", "replace")


def plain_screen(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[>=]|\r", "", text)
