"""Drives the MCP samples (examples/mcp) with the real stdio client of the `mcp` package.

`Session` starts a sample as its client would (through stdio_tap.py, which keeps a copy
of the server's standard output), and `pages()` serves local pages on 127.0.0.1 for the
fetching sample: one port the rules name, others they do not, and a page that never
answers, which tells when its caller hung up.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "mcp"
TAP = Path(__file__).resolve().with_name("stdio_tap.py")
PYTHON_SB = str(Path(sys.executable).with_name("python-sb"))


def sample(name: str, where: Path) -> Path:
    """A copy of the sample (its rule files too), without caches."""
    target = where / name
    shutil.copytree(EXAMPLES / name, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def server_parameters(command: list[str], cwd: Path, copy: Path, env: dict[str, str]) -> Any:
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable,
        args=[str(TAP), str(copy), *command],
        cwd=str(cwd),
        env={"PYTHONDONTWRITEBYTECODE": "1", **env},
    )


def protocol_lines(copy: Path) -> list[dict[str, Any]]:
    """Every line the server wrote on standard output, each a JSON-RPC 2.0 message
    (json.loads raises on anything else)."""
    messages: list[dict[str, Any]] = []
    for line in copy.read_bytes().splitlines():
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0", line
        messages.append(message)
    return messages


def text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


class Pages:
    """Local HTTP servers: `allowed` (the port the rules name), `other` (one they do
    not), and on `allowed` the path /hang, which answers nothing and sets `hung_up`
    when the caller closes the connection."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, str, str]] = []
        self.hung_up = threading.Event()
        self._servers = [self._serve(), self._serve()]
        self.allowed, self.other = (server.server_address[1] for server in self._servers)

    def _serve(self) -> ThreadingHTTPServer:
        pages = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                port = self.server.server_address[1]
                pages.requests.append((port, self.path, str(self.headers)))
                if self.path == "/hang":
                    self.connection.settimeout(60)
                    try:
                        while self.connection.recv(1024):  # the caller never sends more
                            pass
                    except OSError:
                        pass
                    pages.hung_up.set()
                    return
                body = f"page {self.path} of port {port}".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def close(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()


@contextmanager
def pages() -> Iterator[Pages]:
    served = Pages()
    try:
        yield served
    finally:
        served.close()


def base_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"}
