"""The guards' objects within the program's reach: their frames' code, their modules.

A refusal's traceback hands the program the frames of the sealed audit hook and of the
judged copies of unreported functions (``_posixsubprocess.fork_exec``...). Reading
``f_code`` of those frames is refused to the program but allowed to the standard library,
which formats tracebacks; and a standard-library function that calls what it is handed
(``functools.singledispatch(getattr)``) reads it for the program. The code's constants
held the dispatcher (whose closure leads to every guard and the shared enforcer) and the
original functions: now they are keyword-only defaults, cleared from the frame's locals
before anything can fail, and neither the code nor the locals of those frames show them.
No module of the guards stays in ``sys.modules`` for the program to patch.

The rules say ``os-sandbox=subprocess``: the Python layer alone is under test.
"""

from __future__ import annotations

import socket
import threading

from escapelab import Lab, got

RULES = ("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess")

#: Every object the frames of a refusal's traceback show: their locals and, read by the
#: standard library on the program's behalf, their code's constants.
SHOWN = """
import functools
getattr_ = functools.singledispatch(getattr)
def shown(call):
    try:
        call()
        return []
    except Exception as exc:
        tb = exc.__traceback__
    found = []
    while tb is not None:
        frame = tb.tb_frame
        found += list(getattr_(frame, 'f_code').co_consts) + list(frame.f_locals.values())
        tb = tb.tb_next
    return found
"""

HOOK_TAKEOVER = (
    SHOWN
    + """
for value in shown(lambda: open(SECRET_FILE).close()):
    for cell in getattr(value, '__closure__', None) or ():
        handlers = cell.cell_contents
        if not hasattr(handlers, 'values'):
            continue
        for handler in handlers.values():
            owner = getattr(handler, '__self__', None)
            enforcer = getattr(owner, 'enforcer', None) or getattr(owner, '_enforcer', None)
            for name in dir(enforcer) if enforcer is not None else ():
                if name.startswith('refuse'):
                    setattr(enforcer, name, lambda *args, **kwargs: None)
print('GOT', open(SECRET_FILE).read())
"""
)

# The signature of fork_exec in CPython 3.11 to 3.13, as subprocess calls it.
ORIGINAL_FORK_EXEC = (
    SHOWN
    + """
import _posixsubprocess
copy = _posixsubprocess.fork_exec
found = [v for v in shown(lambda: copy()) if getattr(v, '__name__', '') == 'fork_exec']
fork_exec = next((v for v in found if v is not copy), copy)
read, write = os.pipe()
command = 'echo ran > ' + OUTSIDE + '/ran.txt'
pid = fork_exec(
    [b'/bin/sh', b'-c', command.encode()], [b'/bin/sh'], True, (write,), None, None,
    -1, -1, -1, -1, -1, -1, read, write, True, False, -1, None, None, None, -1, None, False,
)
os.waitpid(pid, 0)
print('DONE')
"""
)


def test_cant_take_the_guards_over_through_the_hooks_code(lab: Lab) -> None:
    lab.rules(*RULES)
    code = lab.probe(HOOK_TAKEOVER)
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_reach_the_original_fork_exec_through_its_copys_code(lab: Lab) -> None:
    lab.rules(*RULES)
    code = lab.probe(ORIGINAL_FORK_EXEC)
    assert got(lab.control(code), "DONE")
    assert (lab.outside / "ran.txt").exists()
    lab.refused(code, "RuleApiPermissionError")


# -- the guards' modules: one was left in sys.modules ----------------------------------

# ``pysandboxes._policy.netaddr`` was imported after the list of the guards' modules to
# hide was taken, so it stayed in ``sys.modules``, its functions unwatched; the network
# guard also imported it again at each judgement. A program replaced its
# ``parse_address``: the network guard then ran the program's function, whose frame
# walked ``f_back`` into the guard and switched every refusal off. Now the module is
# loaded with the guards, hidden with them, and bound by the network guard once.

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
