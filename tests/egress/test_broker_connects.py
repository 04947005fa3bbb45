"""The broker connects: under landlock, rules that reach out by name or wildcard put the
sandbox in a network namespace of its own, and the trusted side connects for it.

Each probe runs under plain python first (it reaches the listener: the test can fail),
then under python-sb. The names resolve with the test-only hosts file; ``127.0.0.2``
plays a public address on the trusted side (``PYSANDBOXES_TEST_PUBLIC``), ``127.0.0.3``
stays loopback. Only loopback addresses are ever connected to.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from egresslab import Hosts, Upstream

from listener import Listener

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="landlock")

URLLIB = """
import urllib.request
try:
    print('GOT', urllib.request.urlopen('http://{host}:{port}/', timeout=5).read())
except Exception as exc:
    print('REFUSED', type(exc).__name__, exc)
"""
HTTP_CLIENT = """
import http.client
c = http.client.HTTPConnection({host!r}, {port}, timeout=5)
c.request('GET', '/')
print('GOT', c.getresponse().read())
"""
ASYNCIO = """
import asyncio
async def main():
    r, w = await asyncio.open_connection({host!r}, {port})
    w.write(b'GET / HTTP/1.0\\r\\n\\r\\n')
    await w.drain()
    print('GOT', (await r.read()).split(b'\\r\\n\\r\\n')[-1])
    w.close()
asyncio.run(main())
"""
RAW = """
import socket
s = socket.socket()
s.settimeout(5)
try:
    s.connect(({host!r}, {port}))
    s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')
    print('GOT', b''.join(iter(lambda: s.recv(4096), b'')).split(b'\\r\\n\\r\\n')[-1])
except Exception as exc:
    print('REFUSED', type(exc).__name__, exc)
"""
CTYPES = """
import ctypes, socket, struct
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
address = struct.pack('=HH4s8x', socket.AF_INET, socket.htons({port}), socket.inet_aton({host!r}))
result = libc.connect(fd, address, len(address))
print('GOT' if result == 0 else 'REFUSED errno %d' % ctypes.get_errno())
"""


def rules(project: Path, *lines: str) -> None:
    text = "\n".join(["expose-ro=.", "python-import=*", *lines]) + "\n"
    (project / ".py-sandboxes").write_text(text)


def env(hosts: Hosts) -> dict[str, str]:
    return {"PYSANDBOXES_TEST_HOSTS": str(hosts.path), "PYSANDBOXES_TEST_PUBLIC": "127.0.0.2"}


def hosted(hosts: Hosts, py: Runner, code: str) -> str:
    """The probe under plain python, the names mapped the way the trusted side maps them
    (the control: it reaches the listener)."""
    for line in hosts.path.read_text().splitlines():
        address, name = line.split()[:2]
        code = code.replace(name, address)
    return py("-c", code).stdout


@pytest.mark.parametrize(
    "probe", [URLLIB, HTTP_CLIENT, ASYNCIO, RAW], ids=["urllib", "http.client", "asyncio", "raw"]
)
def test_a_granted_name_is_reached_through_the_broker(
    sb: Runner, py: Runner, project: Path, hosts: Hosts, api_http: Upstream, probe: str
) -> None:
    code = probe.format(host="api.example.test", port=api_http.port)
    assert "hello from 127.0.0.2" in hosted(hosts, py, code)
    rules(project, f"net=ALLOW|tcp|api.example.test|{api_http.port}|OUT")
    result = sb("-c", code, env=env(hosts))
    assert "GOT b'hello from 127.0.0.2'" in result.stdout, result.stdout + result.stderr


def test_a_wildcard_reaches_a_name_it_matches(
    sb: Runner, py: Runner, project: Path, hosts: Hosts, api_http: Upstream
) -> None:
    code = URLLIB.format(host="api.example.test", port=api_http.port)
    assert "hello from 127.0.0.2" in hosted(hosts, py, code)
    rules(project, "net=ALLOW|tcp|*.example.test|*|OUT")
    result = sb("-c", code, env=env(hosts))
    assert "GOT b'hello from 127.0.0.2'" in result.stdout, result.stdout + result.stderr


def test_cant_reach_a_name_no_rule_grants(
    sb: Runner, py: Runner, project: Path, hosts: Hosts, api_http: Upstream, evil_http: Upstream
) -> None:
    code = URLLIB.format(host="evil.example.test", port=evil_http.port)
    assert "hello from 127.0.0.3" in hosted(hosts, py, code)
    rules(project, f"net=ALLOW|tcp|api.example.test|{api_http.port}|OUT")
    result = sb("-c", code, env=env(hosts))
    assert "REFUSED" in result.stdout
    assert "net=ALLOW|tcp|evil.example.test|" in result.stdout
    assert evil_http.requests == 1  # the control's alone


@pytest.mark.parametrize("host", ["127.0.0.3", "evil.example.test"])
def test_cant_reach_loopback_under_a_wildcard_rule(
    sb: Runner, py: Runner, project: Path, hosts: Hosts, evil_http: Upstream, host: str
) -> None:
    code = URLLIB.format(host=host, port=evil_http.port)
    assert "hello from 127.0.0.3" in hosted(hosts, py, code)
    rules(project, "net=ALLOW|tcp|*|*|OUT")
    result = sb("-c", code, env=env(hosts))
    assert "REFUSED" in result.stdout, result.stdout
    assert "loopback" in result.stdout, result.stdout
    assert f"net=ALLOW|tcp|127.0.0.3|{evil_http.port}|OUT" in result.stdout
    assert evil_http.requests == 1


def test_cant_reach_cloud_metadata_by_name_under_a_wildcard_rule(
    sb: Runner, project: Path, hosts: Hosts
) -> None:
    rules(project, "net=ALLOW|tcp|*|*|OUT")
    result = sb("-c", RAW.format(host="metadata.example.test", port=80), env=env(hosts))
    assert "REFUSED" in result.stdout
    assert "link-local (cloud metadata)" in result.stdout
    assert "net=ALLOW|tcp|169.254.169.254|80|OUT" in result.stdout


def test_cant_rebind_a_granted_name_to_a_refused_address(
    sb: Runner, project: Path, hosts: Hosts, api_http: Upstream, evil_http: Upstream
) -> None:
    # The rules pin 127.0.0.2; the trusted side resolves again at the connect: 127.0.0.3.
    rules(project, "net=ALLOW|tcp|api.example.test|*|OUT")
    code = URLLIB.format(host="api.example.test", port=evil_http.port)
    run_env = env(hosts)
    import threading
    import time

    def rebind() -> None:  # once the rules were read (the pin is 127.0.0.2)
        time.sleep(1.5)
        hosts.write("127.0.0.3 api.example.test\n")

    threading.Thread(target=rebind, daemon=True).start()
    result = sb("-c", "import time; time.sleep(3)\n" + code, env=run_env)
    assert "REFUSED" in result.stdout, result.stdout + result.stderr
    assert "loopback" in result.stdout, result.stdout + result.stderr
    assert evil_http.requests == 0


def test_native_code_has_no_route_to_a_listener_not_granted(
    sb: Runner, py: Runner, project: Path, hosts: Hosts, api_http: Upstream, tcp: Listener
) -> None:
    code = CTYPES.format(host="127.0.0.1", port=tcp.port)
    assert "GOT" in py("-c", code).stdout
    before = tcp.received
    rules(project, "python-api=ALLOW:native", f"net=ALLOW|tcp|api.example.test|{api_http.port}|OUT")
    result = sb("-c", code, env=env(hosts))
    assert "REFUSED errno" in result.stdout, result.stdout + result.stderr
    assert tcp.received == before


def test_broker_connects_are_logged_as_the_childs_own_decisions(
    sb: Runner, project: Path, hosts: Hosts, api_http: Upstream, evil_http: Upstream
) -> None:
    # A log whose broker lines point elsewhere than the child's (``file(3)``, no program
    # line) hides which rule let a connection out and which code made it.
    rules(
        project,
        f"net=ALLOW|tcp|api.example.test|{api_http.port}|OUT",
        f"net=ALLOW|tcp|*.example.test|{evil_http.port}|OUT",  # refused: 127.0.0.3, loopback
        "audit-log=audit.jsonl",
    )
    granted = RAW.format(host="api.example.test", port=api_http.port)
    refused = RAW.format(host="evil.example.test", port=evil_http.port)
    (project / "app.py").write_text(granted.strip() + "\n" + refused.strip() + "\n")
    result = sb("app.py", env=env(hosts))
    assert "GOT b'hello from 127.0.0.2'" in result.stdout, result.stdout + result.stderr
    log = [json.loads(line) for line in (project / "audit.jsonl").read_text().splitlines()]
    lines = {(line["verdict"], line["target"]): line for line in log if line["kind"] == "net"}
    allowed = lines["allowed", f"tcp:api.example.test:{api_http.port} (127.0.0.2)"]
    assert (allowed["rule"], allowed["where"]) == (".py-sandboxes:3", "app.py:5"), allowed
    assert allowed["rule_text"] == f"net=ALLOW|tcp|api.example.test|{api_http.port}|OUT"
    denied = lines["refused", f"tcp:evil.example.test:{evil_http.port}"]  # the broker's line
    assert (denied["rule"], denied["where"]) == ("no rule", "app.py:14"), denied
    assert evil_http.requests == 0
