"""The network: no net= rule, no connection; a rule opens exactly what it names.

Each test starts a listener on 127.0.0.1 in the test process, shows the probe reaches it
under plain python, then that under python-sb the listener gets nothing.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from listener import Listener

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner


CONNECT = """
import socket
import threading
s = socket.socket(socket.AF_INET6 if ':' in {host!r} else socket.AF_INET)
s.settimeout(5)
try:
    s.connect(({host!r}, {port}))
    print('GOT', s.recv(10))
except OSError as exc:
    print('REFUSED', type(exc).__name__, exc)
"""


def rules(project: Path, *lines: str) -> None:
    (project / ".py-sandboxes").write_text(
        "\n".join(["expose-ro=.", *lines, "python-import=*"]) + "\n"
    )


@pytest.mark.parametrize("host", ["127.0.0.1", "0x7f.1", "2130706433", "127.1", "0.0.0.0"])
def test_cant_connect_without_a_rule(
    sb: Runner, py: Runner, project: Path, tcp: Listener, host: str
) -> None:
    rules(project)
    code = CONNECT.format(host=host, port=tcp.port)
    assert "GOT b'hello" in py("-c", code).stdout
    before = tcp.received
    result = sb("-c", code, timeout=30)
    assert "REFUSED RuleSocketConnectionRefusedError" in result.stdout, (
        result.stdout + result.stderr
    )
    assert f"net=ALLOW|tcp|127.0.0.1|{tcp.port}|OUT" in result.stdout
    assert tcp.received == before


def test_cant_reach_another_port_than_the_rule_names(
    sb: Runner, project: Path, tcp: Listener
) -> None:
    rules(project, f"net=ALLOW|tcp|127.0.0.1|{tcp.port + 1}|OUT")
    result = sb("-c", CONNECT.format(host="127.0.0.1", port=tcp.port))
    assert "REFUSED RuleSocketConnectionRefusedError" in result.stdout
    assert tcp.received == 0


def test_cant_connect_through_ipv4_mapped_ipv6(
    sb: Runner, py: Runner, project: Path, tcp: Listener
) -> None:
    rules(project, f"net=ALLOW|tcp|127.0.0.0/8|{tcp.port}|OUT", "net=DENY|tcp|127.0.0.1|*|OUT")
    code = CONNECT.format(host="::ffff:127.0.0.1", port=tcp.port)
    result = sb("-c", code)
    assert "REFUSED RuleSocketConnectionRefusedError" in result.stdout
    assert "net=DENY|tcp|127.0.0.1|*|OUT" in result.stdout
    assert tcp.received == 0


def test_allowed_connection_works(sb: Runner, project: Path, tcp: Listener) -> None:
    rules(project, f"net=ALLOW|tcp|127.0.0.1|{tcp.port}|OUT")
    result = sb("-c", CONNECT.format(host="127.0.0.1", port=tcp.port))
    assert "GOT b'hello" in result.stdout, result.stdout + result.stderr


def test_allowed_name_is_judged_on_its_addresses(sb: Runner, project: Path, tcp: Listener) -> None:
    rules(project, f"net=ALLOW|tcp|localhost|{tcp.port}|OUT")
    result = sb("-c", CONNECT.format(host="localhost", port=tcp.port))
    assert "GOT b'hello" in result.stdout, result.stdout + result.stderr


def test_cant_send_a_datagram_without_a_rule(
    sb: Runner, py: Runner, project: Path, udp: Listener
) -> None:
    rules(project, f"net=ALLOW|tcp|127.0.0.1|{udp.port}|OUT")  # tcp only: no UDP
    code = (
        "import socket, time\n"
        "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "try:\n"
        f"    u.sendto(b'x', ('127.0.0.1', {udp.port})); print('SENT')\n"
        "except OSError as exc:\n"
        "    print('REFUSED', type(exc).__name__)\n"
        "time.sleep(0.3)\n"
    )
    assert "SENT" in py("-c", code).stdout
    before = udp.received
    result = sb("-c", code)
    assert "REFUSED RuleSocketConnectionRefusedError" in result.stdout, (
        result.stdout + result.stderr
    )
    assert udp.received == before


def test_cant_bind_a_server_without_a_rule(sb: Runner, py: Runner, project: Path) -> None:
    rules(project)
    code = (
        "import socket\n"
        "s = socket.socket()\n"
        "try:\n"
        "    s.bind(('127.0.0.1', 0)); print('BOUND')\n"
        "except OSError as exc:\n"
        "    print('REFUSED', type(exc).__name__)\n"
    )
    assert "BOUND" in py("-c", code).stdout
    assert "REFUSED RuleSocketConnectionRefusedError" in sb("-c", code).stdout


LOOKUPS = {
    "getaddrinfo": "socket.getaddrinfo(name, 80)",
    "gethostbyname": "socket.gethostbyname(name)",
    "gethostbyaddr": "socket.gethostbyaddr(name)",
    "getnameinfo": "socket.getnameinfo((name, 80), 0)",
}


@pytest.mark.parametrize("lookup", sorted(LOOKUPS))
def test_cant_look_up_names_no_rule_names(sb: Runner, project: Path, lookup: str) -> None:
    rules(project, "net=ALLOW|tcp|127.0.0.1|80|OUT")
    code = (
        "import socket\n"
        "for name in ('localhost', 'exfiltrate.example.invalid'):\n"
        "    try:\n"
        f"        {LOOKUPS[lookup]}; print('RESOLVED', name)\n"
        "    except OSError as exc:\n"
        "        print('REFUSED', type(exc).__name__, name)\n"
    )
    result = sb("-c", code)
    assert result.stdout.splitlines() == [
        "REFUSED RuleSocketConnectionRefusedError localhost",
        "REFUSED RuleSocketConnectionRefusedError exfiltrate.example.invalid",
    ], result.stderr


def test_cant_connect_to_an_abstract_unix_socket(sb: Runner, project: Path) -> None:
    # A read-write exposure: without one, the kernel layer makes no AF_UNIX socket at all.
    (project / "run").mkdir()
    rules(project, "expose-rw=./run")
    code = (
        "import socket\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        "    s.connect('\\0some-daemon'); print('CONNECTED')\n"
        "except OSError as exc:\n"
        "    print('REFUSED', type(exc).__name__)\n"
    )
    assert "REFUSED RuleSocketConnectionRefusedError" in sb("-c", code).stdout


def test_an_allowed_address_opens_nothing_else_later(
    sb: Runner, project: Path, tcp: Listener
) -> None:
    """Allowed connections are remembered for speed; a refusal must not be."""
    rules(project, f"net=ALLOW|tcp|127.0.0.1|{tcp.port}|OUT")
    code = (
        "import socket\n"
        f"for port in ({tcp.port}, {tcp.port + 1}, {tcp.port}):\n"
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', port), timeout=5).close(); print('OK')\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__)\n"
    )
    result = sb("-c", code)
    assert result.stdout.splitlines() == ["OK", "RuleSocketConnectionRefusedError", "OK"]


def test_http_request_to_an_allowed_port_works(sb: Runner, project: Path) -> None:
    import http.server

    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        code = (
            "import urllib.request\n"
            f"print(urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=10).status)\n"
        )
        rules(project, f"net=ALLOW|tcp|127.0.0.1|{port}|OUT")
        assert sb("-c", code).stdout.strip() == "200"
        rules(project)
        assert "RuleSocketConnectionRefusedError" in sb("-c", code).stderr
    finally:
        server.shutdown()
        server.server_close()


def test_cant_listen_on_a_socket_never_bound(sb: Runner, py: Runner, project: Path) -> None:
    # listen() binds such a socket to a free port on every address, with no audit event.
    rules(project)
    code = "import socket\ns = socket.socket()\ns.listen()\nprint('LISTENING')\n"
    assert "LISTENING" in py("-c", code).stdout
    result = sb("-c", code)
    assert "LISTENING" not in result.stdout
    assert "The bind to [0.0.0.0]:0 is refused" in result.stderr, result.stderr


TUPLE_SUBCLASS = """
import socket
import threading
class Address(tuple):
    def __iter__(self):
        return iter(('127.0.0.1', 1))
    def __getitem__(self, index):
        return ('127.0.0.1', 1)[index]
s = socket.socket()
s.settimeout(5)
try:
    s.connect(Address(('127.0.0.1', {port}))); print('GOT', s.recv(10))
except OSError as exc:
    print('REFUSED', type(exc).__name__)
"""


def test_cant_connect_with_a_tuple_subclass(
    sb: Runner, py: Runner, project: Path, tcp: Listener
) -> None:
    """C reads the tuple's own items, whatever the subclass says: so does the guard."""
    rules(project, f"net=ALLOW|tcp|127.0.0.1|{tcp.port + 1}|OUT")
    code = TUPLE_SUBCLASS.format(port=tcp.port)
    assert "GOT b'hello" in py("-c", code).stdout
    before = tcp.received
    result = sb("-c", code)
    assert "REFUSED RuleSocketConnectionRefusedError" in result.stdout, result.stderr
    assert tcp.received == before


PINNED_LOOKUP = """
import socket, sys
asked = []
sys.addaudithook(lambda e, args: asked.append(args[0]) if e == "socket.getaddrinfo" else None)
infos = socket.getaddrinfo("LocalHost", {port}, type=socket.SOCK_STREAM)
print("ANSWER", sorted({{info[4][0] for info in infos}}))
print("SYSTEM ASKED", asked)
with socket.create_connection(("localhost", {port}), timeout=5) as conn:
    print("GOT", conn.recv(10))
"""


def test_names_of_the_rules_resolve_to_their_pinned_addresses(
    sb: Runner, py: Runner, project: Path, tcp: Listener
) -> None:
    # The answer comes from the rules (pinned when they were read), not from a fresh
    # lookup a DNS server could change: the system resolver is never asked.
    control = py("-c", PINNED_LOOKUP.format(port=tcp.port))
    assert "SYSTEM ASKED ['LocalHost']" in control.stdout, control.stdout + control.stderr
    rules(project, f"net=ALLOW|tcp|localhost|{tcp.port}|OUT", "python-api=ALLOW:sys.addaudithook")
    result = sb("-c", PINNED_LOOKUP.format(port=tcp.port))
    assert result.returncode == 0, result.stderr
    assert "ANSWER ['127.0.0.1']" in result.stdout
    assert "SYSTEM ASKED []" in result.stdout
    assert "GOT b'hello\\n'" in result.stdout
