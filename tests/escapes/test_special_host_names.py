"""The host names C reads itself: ``""`` and ``"<broadcast>"``.

CPython turns two host strings into addresses without any lookup: ``""`` is the wildcard
address (``0.0.0.0``, which reaches this host when connecting) and ``"<broadcast>"`` is
``255.255.255.255``. The network guard took both for names and judged the addresses
``getaddrinfo`` gave for them: none, so nothing was judged, and once a rule allowed more
than single addresses (``net=ALLOW|tcp|*|443|OUT``) ``connect(("", port))`` reached every
loopback port, and a datagram went to the broadcast address. Both are now judged as the
addresses C uses.

The rules say ``os-sandbox=subprocess``: the Python layer alone is under test.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from conftest import Runner
    from listener import Listener

RULES = (
    "os-sandbox=subprocess",
    "python-import=socket",
    "python-import=time",
    "net=ALLOW|tcp|*|443|OUT",  # any host, one port: lookups are allowed
    "net=ALLOW|udp|*|53|OUT",
)

CONNECT = """\
import socket
s = socket.socket(socket.{family})
s.settimeout(5)
try:
    s.connect(('', {port}))
    print('GOT', s.recv(10))
except OSError as exc:
    print('REFUSED', type(exc).__name__, exc)
"""

SEND = """\
import socket, time
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
try:
    u.sendto(b'x', ({host!r}, {port}))
    print('SENT')
except OSError as exc:
    print('REFUSED', type(exc).__name__, exc)
time.sleep(0.3)
"""


def rules(project: Path) -> None:
    (project / ".py-sandboxes").write_text("\n".join(RULES) + "\n")


def test_cant_connect_to_the_empty_host(
    sb: Runner, py: Runner, project: Path, tcp: Listener
) -> None:
    rules(project)
    code = CONNECT.format(family="AF_INET", port=tcp.port)
    assert "GOT b'hello" in py("-c", code).stdout
    before = tcp.received
    result = sb("-c", code, timeout=30)
    assert "REFUSED RuleSocketConnectionRefusedError" in result.stdout, (
        result.stdout + result.stderr
    )
    assert f"net=ALLOW|tcp|127.0.0.1|{tcp.port}|OUT" in result.stdout
    assert tcp.received == before


def test_cant_send_a_datagram_to_the_empty_host(
    sb: Runner, py: Runner, project: Path, udp: Listener
) -> None:
    rules(project)
    code = SEND.format(host="", port=udp.port)
    assert "SENT" in py("-c", code).stdout
    time.sleep(0.3)
    before = udp.received
    result = sb("-c", code, timeout=30)
    assert "REFUSED RuleSocketConnectionRefusedError" in result.stdout, (
        result.stdout + result.stderr
    )
    time.sleep(0.3)
    assert udp.received == before


def test_cant_send_a_datagram_to_broadcast(sb: Runner, py: Runner, project: Path) -> None:
    rules(project)
    # Whether the host may broadcast at all decides the control; the verdict must not.
    port = 9  # discard: nothing listens, only the verdict matters
    code = SEND.format(host="<broadcast>", port=port)
    control = py("-c", code).stdout
    if "SENT" not in control:
        pytest.skip(f"no broadcast on this host: {control}")
    result = sb("-c", code, timeout=30)
    assert "REFUSED RuleSocketConnectionRefusedError" in result.stdout, (
        result.stdout + result.stderr
    )
    assert "255.255.255.255" in result.stdout


def test_a_rule_for_the_port_still_allows_it(sb: Runner, project: Path, tcp: Listener) -> None:
    rules(project)
    with (project / ".py-sandboxes").open("a") as file:
        file.write(f"net=ALLOW|tcp|127.0.0.1|{tcp.port}|OUT\n")
    result = sb("-c", CONNECT.format(family="AF_INET", port=tcp.port), timeout=30)
    assert "GOT b'hello" in result.stdout, result.stdout + result.stderr
