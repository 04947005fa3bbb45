"""The CONNECT proxy of the trusted side, driven by real clients: ``curl`` and
``http.client``'s tunnel.

Threats: a client asking for a name no rule grants, or for a name that leads to loopback
or the cloud metadata service under a wildcard rule; a client holding the proxy with an
endless or slow request head. Each refusal is a ``403`` (or ``405``, ``408``, ``431``)
that says why, and nothing reaches the listener behind the refused name. Not wired into
the launch yet: these tests start the proxy themselves on ``127.0.0.1``.
"""

from __future__ import annotations

import http.client
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from egresslab import PLAYS_PUBLIC, Hosts, Upstream

from pysandboxes._host import egress
from pysandboxes._host.connectproxy import MAX_HEAD, ConnectProxy
from pysandboxes._policy.judge import NetJudge
from pysandboxes._policy.parser import parse_policy

Start = Callable[..., int]


@pytest.fixture
def proxy(hosts: Hosts) -> Iterator[Start]:
    """``start(*rules, classes=PLAYS_PUBLIC)``: a proxy on 127.0.0.1; its port."""
    started: list[ConnectProxy] = []
    resolver = egress.hosts_file_resolver(str(hosts.path))

    def start(*lines: str, classes: Any = PLAYS_PUBLIC) -> int:
        policy = parse_policy(None, extra_rules=list(lines), cwd="/", env={}, resolve_host=resolver)
        listener = socket.create_server(("127.0.0.1", 0))
        made = ConnectProxy(listener, NetJudge(policy.net, classes), resolver, head_timeout=0.5)
        made.start()
        started.append(made)
        return int(listener.getsockname()[1])

    yield start
    for made in started:
        made.close()


def curl(port: int, url: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("curl")
    if binary is None:
        pytest.skip("curl is not installed on this machine")
    command = [binary, "-sS", "--max-time", "10", "--proxytunnel"]
    command += ["--proxy", f"http://127.0.0.1:{port}", url]
    return subprocess.run(command, capture_output=True, text=True, env={}, timeout=30)


def exchange(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


def test_curl_reaches_a_granted_name_through_the_proxy(proxy: Start, api_http: Upstream) -> None:
    port = proxy(f"net=ALLOW|tcp|api.example.test|{api_http.port}|OUT")
    result = curl(port, f"http://api.example.test:{api_http.port}/")
    assert result.stdout == "hello from 127.0.0.2", result.stderr
    assert api_http.requests == 1


def test_curl_cant_reach_a_name_no_rule_grants(
    proxy: Start, api_http: Upstream, evil_http: Upstream
) -> None:
    open_port = proxy("net=ALLOW|tcp|*.example.test|*|OUT", classes=())  # no defaults
    result = curl(open_port, f"http://evil.example.test:{evil_http.port}/")
    assert result.stdout == "hello from 127.0.0.3", result.stderr  # the probe works
    before = evil_http.requests
    port = proxy(f"net=ALLOW|tcp|api.example.test|{api_http.port}|OUT")
    result = curl(port, f"http://evil.example.test:{evil_http.port}/")
    assert result.returncode != 0
    assert "403" in result.stderr
    assert evil_http.requests == before


def test_a_wildcard_rule_cant_reach_loopback_through_the_proxy(
    proxy: Start, api_http: Upstream, evil_http: Upstream
) -> None:
    port = proxy("net=ALLOW|tcp|*|*|OUT")
    assert curl(port, f"http://api.example.test:{api_http.port}/").stdout == "hello from 127.0.0.2"
    answer = exchange(port, f"CONNECT evil.example.test:{evil_http.port} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 403 Forbidden\r\n")
    body = answer.partition(b"\r\n\r\n")[2].decode()
    assert "the address is loopback" in body
    assert f"'net=ALLOW|tcp|127.0.0.3|{evil_http.port}|OUT' would allow it" in body
    assert evil_http.requests == 0


def test_cant_reach_cloud_metadata_through_the_proxy(proxy: Start) -> None:
    for line in ("net=ALLOW|tcp|*|*|OUT", "net=ALLOW|tcp|metadata.example.test|80|OUT"):
        port = proxy(line)  # 169.254.169.254 is judged, never connected to
        answer = exchange(port, b"CONNECT metadata.example.test:80 HTTP/1.1\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 403 Forbidden\r\n")
        assert b"link-local (cloud metadata)" in answer
        assert b"'net=ALLOW|tcp|169.254.169.254|80|OUT' would allow it" in answer


def test_http_client_tunnels_through_the_proxy(proxy: Start, api_http: Upstream) -> None:
    port = proxy("net=ALLOW|tcp|*.example.test|*|OUT")
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.set_tunnel("api.example.test", api_http.port)
    connection.request("GET", "/")
    assert connection.getresponse().read() == b"hello from 127.0.0.2"
    connection.close()
    refused = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    refused.set_tunnel("metadata.example.test", 80)
    with pytest.raises(OSError, match="403"):
        refused.request("GET", "/")
    refused.close()


def test_only_connect_is_served(proxy: Start, api_http: Upstream) -> None:
    port = proxy("net=ALLOW|tcp|*|*|OUT")
    url = f"http://api.example.test:{api_http.port}/"
    answer = exchange(port, f"GET {url} HTTP/1.1\r\nHost: api.example.test\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 405 ")
    assert exchange(port, b"CONNECT nowhere HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert api_http.requests == 0


def test_cant_hold_the_proxy_with_an_endless_request_head(proxy: Start) -> None:
    port = proxy("net=ALLOW|tcp|*|*|OUT")
    endless = b"CONNECT api.example.test:80 HTTP/1.1\r\n" + b"X: " + b"a" * (2 * MAX_HEAD)
    assert exchange(port, endless).startswith(b"HTTP/1.1 431 ")


def test_cant_hold_the_proxy_with_a_slow_request_head(proxy: Start) -> None:
    port = proxy("net=ALLOW|tcp|*|*|OUT")
    started = time.monotonic()
    assert exchange(port, b"CONNECT api.example.test:80 HTTP/1.1\r\n").startswith(b"HTTP/1.1 408 ")
    assert time.monotonic() - started < 5
