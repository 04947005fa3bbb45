"""An HTTP CONNECT proxy on the trusted side, for native code and subprocesses.

Code that ignores the Python layer (a ``curl`` subprocess, a C extension) is given the
network through a proxy: it asks ``CONNECT host:port``, and the proxy resolves, judges
and connects with ``_host.egress`` (the ``net=`` rules by name and address, the SSRF-safe
defaults, no rebinding between check and use), then relays bytes both ways. A refusal is
a ``403`` whose body says what was refused, by which rule or default, and the line that
would allow it.

What it reads from a client is bounded: the request line and headers together at most
``MAX_HEAD`` bytes, received within ``HEAD_TIMEOUT`` seconds; at most ``MAX_CLIENTS``
clients at once (the next ones get a ``503``). Only ``CONNECT`` is served: a plain
``GET http://...`` gets a ``405`` (``curl --proxytunnel`` tunnels plain HTTP too).

One thread per client, which relays with ``selectors`` once the tunnel is up: tunnels are
few and long (an agent's API calls), and a thread keeps each one's blocking connect out
of the others' way. The proxy serves a listening socket the trusted side made (a UNIX
socket, or TCP on ``127.0.0.1``). It is not wired into the launch yet: the network
namespace that leaves it the only way out is a later step (docs/security.md).
"""

from __future__ import annotations

import selectors
import socket
import threading
import time

from pysandboxes._host import egress
from pysandboxes.errors import RuleSocketConnectionRefusedError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from pysandboxes._host.egress import Resolver
    from pysandboxes._policy.judge import NetJudge

#: Most bytes of a request line and its headers.
MAX_HEAD = 8192
#: Seconds a client has to send its whole request head.
HEAD_TIMEOUT = 10.0
#: Clients served at once.
MAX_CLIENTS = 64
_CHUNK = 65536


class ConnectProxy:
    """Serves ``CONNECT`` on ``listener`` with ``judge``'s rules (see the module).

    ``log``, when given, is called for each request with (host, port, address or "",
    allowed, why): the decision log's entry. ``close()`` stops accepting and ends the
    tunnels.
    """

    def __init__(
        self,
        listener: socket.socket,
        judge: NetJudge,
        resolver: Resolver | None = None,
        *,
        head_timeout: float = HEAD_TIMEOUT,
        connect_timeout: float = egress.CONNECT_TIMEOUT,
        log: Callable[[str, int, str, bool, str], None] | None = None,
    ) -> None:
        self._listener = listener
        self._judge = judge
        self._resolver = resolver
        self._head_timeout = head_timeout
        self._connect_timeout = connect_timeout
        self._log = log
        self._slots = threading.BoundedSemaphore(MAX_CLIENTS)
        self._closed = threading.Event()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Accept clients on a thread of its own."""
        self._thread = threading.Thread(target=self._accept, name="connect-proxy", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop accepting, and end every tunnel."""
        self._closed.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            for sock in list(self._open):
                _shut(sock)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                if self._closed.is_set():
                    return
                time.sleep(0.05)  # EMFILE and kin: do not spin
                continue
            if not self._slots.acquire(blocking=False):
                _reply(client, 503, "too many clients of the proxy at once\n")
                client.close()
                continue
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            self._track(client)
            head, rest = _read_head(client, self._head_timeout)
            host, port = _target(head)
            upstream = self._tunnel(client, host, port)
            if upstream is not None:
                if rest:
                    upstream.sendall(rest)
                _relay(client, upstream)
        except _Refused as refused:
            _reply(client, refused.status, refused.body)
            _linger(client)
        except OSError:
            pass  # the client went away
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    self._untrack(sock)
                    sock.close()
            self._slots.release()

    def _tunnel(self, client: socket.socket, host: str, port: int) -> socket.socket | None:
        try:
            made = egress.judged_connect(
                host, port, "tcp", self._judge, self._resolver, self._connect_timeout
            )
        except RuleSocketConnectionRefusedError as exc:
            self._record(host, port, "", False, str(exc))
            _reply(client, 403, f"{exc}\n")
            return None
        except OSError as exc:
            self._record(host, port, "", False, f"could not connect: {exc}")
            _reply(client, 502, f"The connection to {host}:{port} failed: {exc}\n")
            return None
        self._record(host, port, made.address, True, str(made.rule) if made.rule else "")
        upstream = socket.socket(fileno=made.fd)
        self._track(upstream)
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        return upstream

    def _record(self, host: str, port: int, address: str, allowed: bool, why: str) -> None:
        if self._log is not None:
            self._log(host, port, address, allowed, why)

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)
        if self._closed.is_set():
            _shut(sock)

    def _untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)


class _Refused(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(status, body)
        self.status = status
        self.body = body


_REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    405: "Method Not Allowed",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def _reply(client: socket.socket, status: int, body: str) -> None:
    data = body.encode("utf-8", "replace")
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    )
    try:
        client.sendall(head.encode("ascii") + data)
    except OSError:
        pass


def _read_head(client: socket.socket, timeout: float) -> tuple[bytes, bytes]:
    """The request line and headers, and what came after them; bounded (see the module)."""
    deadline = time.monotonic() + timeout
    data = b""
    while True:
        end = data.find(b"\r\n\r\n")
        if end >= 0:
            return data[:end], data[end + 4 :]
        if len(data) > MAX_HEAD:
            raise _Refused(431, f"the request head is longer than {MAX_HEAD} bytes\n")
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Refused(408, f"the request head did not come within {timeout:g} s\n")
        client.settimeout(left)
        try:
            chunk = client.recv(MAX_HEAD + 1 - len(data))
        except TimeoutError:
            raise _Refused(408, f"the request head did not come within {timeout:g} s\n") from None
        if not chunk:
            raise OSError("the client closed before its request was complete")
        data += chunk


def _target(head: bytes) -> tuple[str, int]:
    """``(host, port)`` of a ``CONNECT``; ``_Refused`` for anything else."""
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _Refused(400, f"not an HTTP/1 request line: {line[:200]!r}\n")
    method, authority, _ = parts
    if method != "CONNECT":
        raise _Refused(405, f"only CONNECT is served (got {method[:20]!r}): use a tunnel\n")
    host, colon, port_text = authority.rpartition(":")
    if not colon or not port_text.isdigit() or not host or len(port_text) > 5:
        raise _Refused(400, f"CONNECT needs host:port, got {authority[:300]!r}\n")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port_text)


def _relay(client: socket.socket, upstream: socket.socket) -> None:
    """Copy bytes both ways until both sides are done (a half-close is passed on)."""
    peers = {client: upstream, upstream: client}
    open_reads = {client, upstream}
    with selectors.DefaultSelector() as selector:
        for sock in peers:
            sock.setblocking(True)
            selector.register(sock, selectors.EVENT_READ)
        while open_reads:
            for key, _ in selector.select():
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    data = sock.recv(_CHUNK)
                except OSError:
                    data = b""
                if data:
                    try:
                        peers[sock].sendall(data)
                        continue
                    except OSError:
                        return
                selector.unregister(sock)
                open_reads.discard(sock)
                try:
                    peers[sock].shutdown(socket.SHUT_WR)
                except OSError:
                    pass


def _linger(client: socket.socket) -> None:
    """Close gently after a refusal: what the client still sends is read and dropped
    (at most ``MAX_HEAD`` bytes more, for a moment), or closing with unread data would
    reset the connection before the client reads why it was refused."""
    try:
        client.shutdown(socket.SHUT_WR)
        client.settimeout(0.2)
        for _ in range(4):
            if not client.recv(MAX_HEAD):
                return
    except OSError:
        pass


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
