"""What the egress tests share (see ``conftest``): the hosts file and ``PLAYS_PUBLIC``."""

from __future__ import annotations

from ipaddress import IPv4Network
from pathlib import Path

from pysandboxes._policy.netclasses import DEFAULTED, AddressClass

_LOOPBACK = IPv4Network("127.0.0.0/8")
PLAYS_PUBLIC = tuple(
    AddressClass(part, "loopback")
    for part in _LOOPBACK.address_exclude(IPv4Network("127.0.0.2/32"))
) + tuple(c for c in DEFAULTED if c.network != _LOOPBACK)

HOSTS = """\
127.0.0.1 localhost
127.0.0.2 api.example.test
127.0.0.3 evil.example.test
169.254.169.254 metadata.example.test
"""


class Hosts:
    """The hosts file, and a way to rewrite it (the resolver reads it at each lookup)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.write(HOSTS)

    def write(self, text: str) -> None:
        self.path.write_text(text)


class Upstream:
    """A loopback HTTP server behind a name: it answers ``hello from <host>`` and counts
    the requests reaching it."""

    def __init__(self, host: str) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                served.requests += 1
                body = f"hello from {host}".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.requests = 0
        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)
