"""Round seven, the guards' modules: one was left in ``sys.modules``.

``pysandboxes._policy.netaddr`` was imported after the list of the guards' modules to
hide was taken, so it stayed in ``sys.modules``, its functions unwatched; the network
guard also imported it again at each judgement. A program replaced its
``parse_address``: the network guard then ran the program's function, whose frame
walked ``f_back`` into the guard and switched every refusal off. Now the module is
loaded with the guards, hidden with them, and bound by the network guard once.

The rules say ``os-sandbox=subprocess``: the Python layer alone is under test.
"""

from __future__ import annotations

import socket
import threading

from escapelab import Lab, got

TAKEOVER = """
netaddr = sys.modules.get('pysandboxes._policy.netaddr')
if netaddr is not None:
    parse = netaddr.parse_address
    def parse_address(text):
        frame = sys._getframe(0)
        while frame is not None:
            owner = frame.f_locals.get('self')
            enforcer = getattr(owner, '_enforcer', None)
            for name in dir(enforcer) if enforcer is not None else ():
                if name.startswith('refuse'):
                    setattr(enforcer, name, lambda *args, **kwargs: None)
            frame = frame.f_back
        return parse(text)
    netaddr.parse_address = parse_address
client = socket.socket()
client.settimeout(5)
client.connect(('127.0.0.1', PORT))
client.sendall(b'LEAK')
client.close()
print('DONE')
"""


def test_cant_hijack_the_network_guards_address_parser(lab: Lab) -> None:
    lab.rules("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    received: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    received.append(conn.recv(64))
                except OSError:
                    received.append(b"")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        code = lab.probe(f"PORT = {port}\n{TAKEOVER}", imports="os, sys, socket")
        assert got(lab.control(code), "DONE")
        stop.wait(0.5)
        assert received == [b"LEAK"]
        received.clear()
        lab.refused(code, "RuleSocketConnectionRefusedError")
        stop.wait(0.5)
        assert received == []
    finally:
        stop.set()
        thread.join(2)
        server.close()


def test_no_guard_module_stays_in_sys_modules(lab: Lab) -> None:
    lab.rules("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess")
    code = "import sys\nprint('LEFT', sorted(n for n in sys.modules if '._policy' in n))\n"
    result = lab.run_sandboxed(code)
    assert "LEFT []" in result.stdout, result.stdout + result.stderr
