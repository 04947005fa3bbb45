"""What Landlock does not mediate, the seccomp filter refuses, under every kernel provider.

Each native probe first works under plain python (the test can fail), then is refused with
``EPERM`` under python-sb with ``python-api=ALLOW:native`` (the Python layer steps aside),
and what it aimed at did not happen.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import pty
import queue
import socket
import subprocess
import termios
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernelprobes import CONNECT_MPTCP, NATIVE, NATIVE_RULES, SEND_FASTOPEN, Listener, mptcp_enabled

from pysandboxes._host.select import unavailable_reason

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

PROVIDERS = ("landlock", "bwrap", "unshare")


@pytest.fixture(params=PROVIDERS)
def provider(request: pytest.FixtureRequest, project: Path) -> str:
    name: str = request.param
    reason = unavailable_reason(name)
    if reason is not None:
        pytest.skip(f"{name} cannot run here: {reason}")
    (project / ".py-sandboxes").write_text(NATIVE_RULES + f"os-sandbox={name}\n")
    return name


TYPE_INTO_TERMINAL = """
import fcntl
for byte in b"echo INJECTED\\n":
    result = libc.ioctl(0, 0x5412, ctypes.c_char_p(bytes([byte])))  # TIOCSTI
    if result < 0:
        break
outcome(result)
"""


def _with_terminal(command: list[str], cwd: Path) -> tuple[str, bytes]:
    """Run ``command`` with a fresh pseudo-terminal as its controlling terminal; return
    what it printed and what then waited in the terminal's input."""
    try:
        master, slave = pty.openpty()
    except OSError as exc:
        pytest.skip(f"no pseudo-terminal on this host: {exc}")
    attributes = termios.tcgetattr(slave)
    attributes[3] &= ~termios.ECHO  # only what the probe prints comes back
    termios.tcsetattr(slave, termios.TCSANOW, attributes)

    def take_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    try:
        result = subprocess.run(
            command,
            cwd=cwd,
            stdin=slave,
            capture_output=True,
            text=True,
            start_new_session=True,
            preexec_fn=take_terminal,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"},
            timeout=60,
        )
        os.set_blocking(slave, False)
        try:
            waiting = os.read(slave, 1024)
        except BlockingIOError:
            waiting = b""
        return result.stdout + result.stderr, waiting
    finally:
        os.close(master)
        os.close(slave)


def test_cant_type_into_the_terminal(sb: Runner, py: Runner, project: Path, provider: str):
    (project / "probe.py").write_text(NATIVE + TYPE_INTO_TERMINAL)
    printed, waiting = _with_terminal([*py.command, "probe.py"], project)
    if printed.startswith("REFUSED"):
        pytest.skip(f"this kernel refuses TIOCSTI already (dev.tty.legacy_tiocsti=0): {printed}")
    assert (printed, waiting) == ("DONE\n", b"echo INJECTED\n")
    printed, waiting = _with_terminal([*sb.command, "probe.py"], project)
    assert (printed, waiting) == ("REFUSED EPERM\n", b"")


KEY_SPEC_USER_KEYRING, KEYCTL_READ, KEYCTL_REVOKE = -4, 11, 3

READ_KEY = """
buffer = ctypes.create_string_buffer(256)
size = libc.syscall(ctypes.c_long({keyctl}), ctypes.c_long({read}), ctypes.c_long({key}),
                    buffer, ctypes.c_long(256))
outcome(size)
if size > 0:
    print(buffer.raw[:size].decode())
"""


@pytest.fixture
def user_key() -> Iterator[tuple[int, str]]:
    """A secret in this user's keyring: the kernel lets every process of the user read it."""
    if KEYCTL_SYSCALL < 0:
        pytest.skip(f"no keyring call numbers known for {os.uname().machine}")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    secret = f"KEYRING-SECRET-{uuid.uuid4().hex[:8]}"
    key = libc.syscall(
        ctypes.c_long(ADD_KEY_SYSCALL),
        b"user",
        f"pysandboxes-test-{secret}".encode(),
        secret.encode(),
        ctypes.c_size_t(len(secret)),
        ctypes.c_long(KEY_SPEC_USER_KEYRING),
    )
    if key < 0:
        pytest.skip(f"this kernel keeps no user keyring here ({os.strerror(ctypes.get_errno())})")
    yield key, secret
    libc.syscall(ctypes.c_long(KEYCTL_SYSCALL), ctypes.c_long(KEYCTL_REVOKE), ctypes.c_long(key))


ADD_KEY_SYSCALL, KEYCTL_SYSCALL = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(
    os.uname().machine, (-1, -1)
)


def test_cant_read_the_users_keyring(
    sb: Runner, py: Runner, project: Path, provider: str, user_key: tuple[int, str]
):
    key, secret = user_key
    body = READ_KEY.format(keyctl=KEYCTL_SYSCALL, read=KEYCTL_READ, key=key)
    (project / "probe.py").write_text(NATIVE + body)
    assert py("probe.py").stdout == f"DONE\n{secret}\n"
    result = sb("probe.py")
    assert result.stdout == "REFUSED EPERM\n", result.stderr


IO_URING_SETUP = """
params = ctypes.create_string_buffer(120)
outcome(libc.syscall(ctypes.c_long(425), ctypes.c_long(4), params))
"""


def test_cant_set_up_io_uring(sb: Runner, py: Runner, project: Path, provider: str):
    (project / "probe.py").write_text(NATIVE + IO_URING_SETUP)
    control = py("probe.py").stdout
    if control != "DONE\n":
        pytest.skip(f"io_uring is disabled on this host already ({control.strip()})")
    result = sb("probe.py")
    assert result.stdout == "REFUSED EPERM\n", result.stderr


ORDINARY_IOCTL = """
import termios
outcome(libc.ioctl(1, termios.FIONREAD, ctypes.create_string_buffer(4)))
"""


def test_ordinary_ioctls_still_work(sb: Runner, project: Path, provider: str):
    (project / "probe.py").write_text(NATIVE + ORDINARY_IOCTL)
    result = sb("probe.py")
    assert result.stdout == "DONE\n", result.stderr


CONNECT_UNIX = """
fd = libc.socket(1, 1, 0)  # AF_UNIX, SOCK_STREAM
if fd < 0:
    outcome(fd)
else:
    path = sys.argv[1].encode()
    address = (1).to_bytes(2, "little") + path + bytes(108 - len(path))
    result = libc.connect(fd, ctypes.create_string_buffer(address, 110), 110)
    if result == 0:
        libc.send(fd, b"FROM-SANDBOX", 12, 0)
    outcome(result)
"""


@pytest.fixture
def host_socket(tmp_path: Path) -> Iterator[tuple[str, queue.Queue[bytes]]]:
    """A listening socket file outside every exposure, like a daemon's (docker, D-Bus)."""
    path = tmp_path / "outside" / "daemon.sock"
    path.parent.mkdir()
    received: queue.Queue[bytes] = queue.Queue()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(4)
    server.settimeout(0.2)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            with connection:
                received.put(connection.recv(64))

    thread = threading.Thread(target=serve)
    thread.start()
    yield str(path), received
    done.set()
    thread.join()
    server.close()


def test_cant_reach_a_host_socket_without_a_writable_exposure(
    sb: Runner,
    py: Runner,
    project: Path,
    provider: str,
    host_socket: tuple[str, queue.Queue[bytes]],
):
    path, received = host_socket
    (project / "probe.py").write_text(NATIVE + CONNECT_UNIX)
    assert py("probe.py", path).stdout == "DONE\n"
    assert received.get(timeout=10) == b"FROM-SANDBOX"
    result = sb("probe.py", path)
    assert result.stdout == "REFUSED EPERM\n", result.stderr
    with pytest.raises(queue.Empty):  # nothing more came
        received.get(timeout=0.5)


def test_cant_reach_a_host_socket_with_a_writable_exposure(
    sb: Runner,
    py: Runner,
    project: Path,
    host_socket: tuple[str, queue.Queue[bytes]],
    provider: str,
):
    # A tmux server, an ssh agent, the D-Bus session bus: several run commands outside.
    # With a read-write exposure AF_UNIX sockets may be made, and Landlock cannot judge
    # where they connect: the trusted side's broker does (bwrap's view hides them).
    path, received = host_socket
    (project / "data").mkdir()
    rules = NATIVE_RULES + f"expose-rw=./data\nos-sandbox={provider}\n"
    (project / ".py-sandboxes").write_text(rules)
    (project / "probe.py").write_text(NATIVE + CONNECT_UNIX)
    assert py("probe.py", path).stdout == "DONE\n"
    assert received.get(timeout=5)  # the control reached it
    result = sb("probe.py", path)
    assert result.stdout.startswith("REFUSED"), result.stderr
    with pytest.raises(queue.Empty):
        received.get(timeout=0.5)
    # The positive control: a socket in the exposed folder is reached the same way.
    with socket.socket(socket.AF_UNIX) as server:
        mine = project / "data" / "mine.sock"
        server.bind(str(mine))
        server.listen()
        server.settimeout(10)
        result = sb("probe.py", str(mine))
        assert result.stdout == "DONE\n", result.stderr
        server.accept()[0].close()


TAKE_OVER_THE_BROKER = """
import struct, threading, time
libc.syscall.restype = ctypes.c_long
libc.prctl(38, 1, 0, 0, 0)  # no new privileges: the sandbox has it already
def address(path):
    path = path.encode()
    return ctypes.create_string_buffer(struct.pack("=H", 1) + path + bytes(1), len(path) + 3)
def connect(path):
    return libc.connect(libc.socket(1, 1, 0), address(path), len(path) + 3)
# Connects to a socket that never accepts wait in the broker, every thread of it busy; the
# next wait in the kernel, where a signal takes them back before the broker reads them.
stalled = socket.socket(socket.AF_UNIX)
stalled.bind("data/stalled.sock")
stalled.listen(0)
handler = ctypes.CFUNCTYPE(None, ctypes.c_int)(lambda number: None)
libc.signal(10, handler)  # SIGUSR1
waiting = [threading.Thread(target=connect, args=("data/stalled.sock",)) for _ in range(40)]
for thread in waiting:
    thread.start()
time.sleep(1)
for _ in range(3):
    for thread in waiting:
        if thread.is_alive():
            libc.pthread_kill(ctypes.c_ulong(thread.ident), 10)
    time.sleep(0.1)
stalled.close()
for thread in waiting:
    thread.join()
served = socket.socket(socket.AF_UNIX)
served.bind("data/served.sock")
served.listen(1)
print("BROKER", end=" ")
outcome(connect("data/served.sock"))
# A listener of its own, answering CONTINUE, would take connect before the broker's.
code = struct.pack("=HBBI", 0x20, 0, 0, 0) + struct.pack("=HBBI", 0x15, 0, 1, 42)
code += struct.pack("=HBBI", 6, 0, 0, 0x7FC00000) + struct.pack("=HBBI", 6, 0, 0, 0x7FFF0000)
buffer = ctypes.create_string_buffer(code, len(code))
fprog = struct.pack("=HxxxxxxQ", len(code) // 8, ctypes.addressof(buffer))
listener = libc.syscall(ctypes.c_long(317), ctypes.c_long(1), ctypes.c_long(8), fprog)
print("LISTENER", end=" ")
outcome(listener)
def answer():
    notification = ctypes.create_string_buffer(80)
    while libc.ioctl(listener, ctypes.c_ulong(0xC0502100), notification) >= 0:
        reply = struct.pack("=QqiI", struct.unpack_from("=Q", notification.raw)[0], 0, 0, 1)
        libc.ioctl(listener, ctypes.c_ulong(0xC0182101), ctypes.create_string_buffer(reply))
if listener >= 0:
    threading.Thread(target=answer, daemon=True).start()
    sock = libc.socket(1, 1, 0)
    result = libc.connect(sock, address(sys.argv[1]), len(sys.argv[1]) + 3)
    outcome(result if result < 0 else libc.write(sock, b"FROM-SANDBOX", 12))
"""


def _brokered_project(project: Path, provider: str, probe: str) -> None:
    """A project whose rules start the socket broker (a read-write exposure, native code
    allowed) under ``provider``, with ``probe.py``; skipped where the provider cannot run."""
    reason = unavailable_reason(provider)
    if reason is not None:
        pytest.skip(f"{provider} cannot run here: {reason}")
    (project / "data").mkdir()
    rules = NATIVE_RULES + f"expose-rw=./data\nos-sandbox={provider}\n"
    (project / ".py-sandboxes").write_text(rules)
    (project / "probe.py").write_text(probe)


@pytest.mark.parametrize("brokered", ["landlock", "unshare"])
def test_cant_take_over_the_socket_brokers_calls_with_a_listener_of_its_own(
    sb: Runner,
    py: Runner,
    project: Path,
    host_socket: tuple[str, queue.Queue[bytes]],
    brokered: str,
):
    """A seccomp listener of the sandbox's own, answering CONTINUE, lets connect go on
    unjudged. The kernel refuses it while the broker's is open: the sandbox cannot end
    the broker (an interrupted call it had not read yet), nor make one once it ended."""
    path, received = host_socket
    _brokered_project(project, brokered, NATIVE + "import socket\n" + TAKE_OVER_THE_BROKER)
    assert py("probe.py", path).stdout == "BROKER DONE\nLISTENER DONE\nDONE\n"
    assert received.get(timeout=5) == b"FROM-SANDBOX"
    for name in ("stalled.sock", "served.sock"):
        (project / "data" / name).unlink()
    result = sb("probe.py", path)
    assert result.stdout == "BROKER DONE\nLISTENER REFUSED EPERM\n", result.stderr
    with pytest.raises(queue.Empty):
        received.get(timeout=0.5)


SEND_UNSPECIFIED = """
fd = libc.socket(2, 2, 0)  # IPv4, UDP
address = sockaddr(int(sys.argv[1]))
address[0] = 0  # AF_UNSPEC, which IPv4 reads as AF_INET
outcome(libc.sendto(fd, b"ping", 4, 0, address, 16))
"""


@pytest.mark.parametrize("brokered", ["landlock", "unshare"])
def test_cant_send_udp_to_a_port_no_rule_allows_with_an_unspecified_family(
    sb: Runner, py: Runner, project: Path, udp: Listener, brokered: str
):
    """IPv4 sends to an AF_UNSPEC address as to an AF_INET one: the broker judges it."""
    reason = unavailable_reason(brokered)
    if reason is not None:
        pytest.skip(f"{brokered} cannot run here: {reason}")
    (project / "data").mkdir()
    other = udp.port + 1 if udp.port < 65535 else udp.port - 1  # the network is shared
    rules = f"expose-rw=./data\nos-sandbox={brokered}\nnet=ALLOW|udp|127.0.0.1|{other}|OUT\n"
    (project / ".py-sandboxes").write_text(NATIVE_RULES + rules)
    (project / "probe.py").write_text(NATIVE + SEND_UNSPECIFIED)
    assert py("probe.py", str(udp.port)).stdout == "DONE\n"
    time.sleep(0.3)
    assert udp.received == 1
    result = sb("probe.py", str(udp.port))
    assert result.stdout == "REFUSED EACCES\n", result.stderr
    time.sleep(0.3)
    assert udp.received == 1


@pytest.mark.parametrize("brokered", ["landlock", "unshare"])
def test_a_brokered_connect_that_fails_says_why(
    sb: Runner, py: Runner, project: Path, brokered: str
):
    # The broker's connect failed as 4294967295 with no error (an int read as ssize_t):
    # the program saw -1 and a stale errno, a non-blocking connect no EINPROGRESS.
    _brokered_project(project, brokered, NATIVE + CONNECT_UNIX)
    with socket.socket(socket.AF_UNIX) as bound:  # bound, not listening
        bound.bind(str(project / "data" / "closed.sock"))
        assert py("probe.py", "data/closed.sock").stdout == "REFUSED ECONNREFUSED\n"
        result = sb("probe.py", "data/closed.sock")
        assert result.stdout == "REFUSED ECONNREFUSED\n", result.stderr


CONNECT_BY_INT_0X80 = """
import struct
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t] + [ctypes.c_int] * 3 + [ctypes.c_long]
# Read, write, run; private, anonymous, below 4 GiB: int 0x80 takes 32-bit pointers.
page = libc.mmap(None, 4096, 7, 0x62, -1, 0)
fd = libc.socket(1, 1, 0)
path = sys.argv[1].encode()
address = struct.pack("=H", 1) + path + bytes(1)
ctypes.memmove(page + 512, address, len(address))
ctypes.memmove(page + 256, struct.pack("=III", fd, page + 512, len(address)), 12)
# push rbx; socketcall(SYS_CONNECT, arguments) by int 0x80; pop rbx; ret
code = b"\\x53\\xb8" + struct.pack("<I", 102) + b"\\xbb" + struct.pack("<I", 3)
code += b"\\xb9" + struct.pack("<I", page + 256) + b"\\xcd\\x80\\x5b\\xc3"
ctypes.memmove(page, code, len(code))
result = ctypes.CFUNCTYPE(ctypes.c_int)(page)()
if result == 0:
    libc.send(fd, b"FROM-SANDBOX", 12, 0)
    print("DONE")
else:
    print("REFUSED", errno.errorcode[-result])
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the 32-bit gate of x86_64")
@pytest.mark.parametrize("brokered", ["landlock", "unshare"])
def test_cant_reach_a_host_socket_through_the_32_bit_system_call_gate(
    sb: Runner,
    py: Runner,
    project: Path,
    host_socket: tuple[str, queue.Queue[bytes]],
    brokered: str,
):
    """int 0x80 has its own numbers (socketcall), which the broker's filter lets by: the
    main filter refuses every call of another ABI."""
    path, received = host_socket
    _brokered_project(project, brokered, NATIVE + CONNECT_BY_INT_0X80)
    control = py("probe.py", path)
    if control.stdout != "DONE\n":
        pytest.skip(f"no 32-bit system calls here: {control.stdout}{control.stderr}")
    assert received.get(timeout=5) == b"FROM-SANDBOX"
    result = sb("probe.py", path)
    assert result.stdout == "REFUSED EPERM\n", result.stderr
    with pytest.raises(queue.Empty):
        received.get(timeout=0.5)


RACE_THE_BROKER = """
import threading
# A second thread rewrites the address, and swaps a link in ./data, while connect waits.
host, mine = sys.argv[1].encode(), os.path.abspath("data/mine.sock").encode()
address = ctypes.create_string_buffer(110)
names = [(1).to_bytes(2, "little") + name + bytes(108 - len(name)) for name in (mine, host)]
names.append((1).to_bytes(2, "little") + b"data/link.sock" + bytes(94))
stop = False
def rewrite():
    while not stop:
        for name in names:
            ctypes.memmove(address, name, 110)
def swap():
    while not stop:
        for target in (mine, host):
            try:
                os.symlink(target, "data/next.lnk")
                os.rename("data/next.lnk", "data/link.sock")
            except OSError:
                pass
threads = [threading.Thread(target=rewrite), threading.Thread(target=swap)]
for thread in threads:
    thread.start()
for index in range(300):
    ctypes.memmove(address, names[index % 3], 110)  # each name, whoever wins the race
    fd = libc.socket(1, 1, 0)
    if libc.connect(fd, address, 110) == 0:
        libc.send(fd, b"FROM-SANDBOX", 12, 0)
    os.close(fd)
stop = True
for thread in threads:
    thread.join()
print("DONE")
"""


def _accept_all(server: socket.socket) -> int:
    """How many connections were waiting on ``server``, each accepted and closed."""
    server.setblocking(False)
    count = 0
    while True:
        try:
            server.accept()[0].close()
        except BlockingIOError:
            return count
        count += 1


@pytest.mark.parametrize("brokered", ["landlock", "unshare"])
def test_cant_reach_a_host_socket_by_racing_the_brokers_reads(
    sb: Runner,
    py: Runner,
    project: Path,
    host_socket: tuple[str, queue.Queue[bytes]],
    brokered: str,
):
    """The broker reads the address once and connects to the file it opened and judged."""
    path, received = host_socket
    _brokered_project(project, brokered, NATIVE + RACE_THE_BROKER)
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(project / "data" / "mine.sock"))
        server.listen(512)
        assert py("probe.py", path).stdout == "DONE\n"
        assert received.get(timeout=5) == b"FROM-SANDBOX"  # the race reaches it unjudged
        while not received.empty():
            received.get()
        _accept_all(server)
        result = sb("probe.py", path)
        assert result.stdout == "DONE\n", result.stderr
        assert _accept_all(server)  # the calls to the exposed socket still went through
    with pytest.raises(queue.Empty):
        received.get(timeout=0.5)


def test_socket_pairs_still_work_without_a_writable_exposure(
    sb: Runner, project: Path, provider: str
):
    code = "import socket; a, b = socket.socketpair(); a.send(b'x'); print(b.recv(1))"
    result = sb("-c", code)
    assert result.stdout == "b'x'\n", result.stderr


SEND_FROM_A_DATAGRAM_PAIR = """
pair = (ctypes.c_int * 2)()
result = libc.socketpair(1, 2, 0, pair)  # AF_UNIX, SOCK_DGRAM
if result == 0:
    path = sys.argv[1].encode()
    address = (1).to_bytes(2, "little") + path + bytes(108 - len(path))
    address = ctypes.create_string_buffer(address, 110)
    result = libc.sendto(pair[0], b"FROM-SANDBOX", 12, 0, address, 110)
    if result >= 0:
        result = libc.connect(pair[1], address, 110)
outcome(result)
"""


def test_cant_reach_a_host_socket_from_a_datagram_socket_pair(
    sb: Runner, py: Runner, project: Path, provider: str, tmp_path: Path
):
    """A datagram socket of a pair still sends to (and connects to) any socket file, like
    a host's /dev/log or journal: without AF_UNIX sockets, no datagram pair is made."""
    path = tmp_path / "outside" / "log.sock"
    path.parent.mkdir()
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(path))
        server.settimeout(0.5)
        (project / "probe.py").write_text(NATIVE + SEND_FROM_A_DATAGRAM_PAIR)
        assert py("probe.py", str(path)).stdout == "DONE\n"
        assert server.recv(64) == b"FROM-SANDBOX"
        result = sb("probe.py", str(path))
        assert result.stdout == "REFUSED EPERM\n", result.stderr
        with pytest.raises(TimeoutError):  # nothing more came
            server.recv(64)


def test_bwrap_hides_host_sockets_even_with_a_writable_exposure(
    sb: Runner, project: Path, host_socket: tuple[str, queue.Queue[bytes]]
):
    reason = unavailable_reason("bwrap")
    if reason is not None:
        pytest.skip(f"bwrap cannot run here: {reason}")
    path, received = host_socket
    (project / "data").mkdir()
    rules = NATIVE_RULES + "expose-rw=./data\nos-sandbox=bwrap\n"
    (project / ".py-sandboxes").write_text(rules)
    (project / "probe.py").write_text(NATIVE + CONNECT_UNIX)
    result = sb("probe.py", path)
    assert result.stdout == "REFUSED ENOENT\n", result.stderr
    with pytest.raises(queue.Empty):
        received.get(timeout=0.5)


def test_the_report_says_who_judges_socket_addresses(sb: Runner, project: Path):
    (project / ".py-sandboxes").write_text("expose-rw=.\nos-sandbox=landlock\n")
    report = json.loads(sb("--show-layers=json").stdout)
    row = next(r for r in report["rules"] if r["rule"].startswith("AF_UNIX"))
    assert row["kernel"] == "seccomp socket broker: the trusted side judges each address"
    assert "abstract socket names are refused" in row["note"]


LISTEN_UNBOUND = """
import _socket, socket
s = socket.socket()
try:
    _socket.socket.listen(s, 1)  # the C method: no audit event, a port of the system's choice
    print("LISTENING", s.getsockname()[1] > 0)
except OSError as exc:
    print("REFUSED", type(exc).__name__)
"""


def test_cant_listen_on_a_port_of_the_systems_choosing(
    sb: Runner, py: Runner, project: Path, provider: str
):
    (project / ".py-sandboxes").write_text(
        f"expose-ro=.\npython-import=*\nnet=ALLOW|tcp|127.0.0.1|80|OUT\nos-sandbox={provider}\n"
    )
    (project / "probe.py").write_text(LISTEN_UNBOUND)
    assert py("probe.py").stdout == "LISTENING True\n"
    result = sb("probe.py")
    assert result.stdout == "REFUSED PermissionError\n", result.stderr


READ_SHARED_MEMORY = """
libc.shmat.restype = ctypes.c_void_p
address = libc.shmat(int(sys.argv[1]), None, 0o10000)  # SHM_RDONLY
if address in (None, ctypes.c_void_p(-1).value):
    outcome(-1)
else:
    outcome(0)
    print(ctypes.string_at(address).decode())
"""


@pytest.fixture
def host_segment() -> Iterator[tuple[int, str]]:
    """A System V shared memory segment of another process, holding a secret."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    segment = libc.shmget(0, 4096, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
    if segment < 0:
        pytest.skip(f"no System V shared memory here ({os.strerror(ctypes.get_errno())})")
    secret = f"SHM-SECRET-{uuid.uuid4().hex[:8]}"
    address = libc.shmat(segment, None, 0)
    ctypes.memmove(address, secret.encode() + b"\0", len(secret) + 1)
    yield segment, secret
    libc.shmdt(ctypes.c_void_p(address))
    libc.shmctl(segment, 0, None)  # IPC_RMID


def test_cant_read_the_hosts_shared_memory(
    sb: Runner, py: Runner, project: Path, provider: str, host_segment: tuple[int, str]
):
    segment, secret = host_segment
    (project / "probe.py").write_text(NATIVE + READ_SHARED_MEMORY)
    assert py("probe.py", str(segment)).stdout == f"DONE\n{secret}\n"
    result = sb("probe.py", str(segment))
    assert result.stdout.startswith("REFUSED"), result.stderr
    assert secret not in result.stdout


OTHER_FAMILIES = """
for family, kind in ((16, 3), (40, 1), (17, 3)):  # AF_NETLINK, AF_VSOCK, AF_PACKET
    outcome(libc.socket(family, kind, 0))
"""


def test_cant_make_sockets_no_rule_can_speak_of(
    sb: Runner, py: Runner, project: Path, provider: str
):
    (project / "probe.py").write_text(NATIVE + OTHER_FAMILIES)
    assert py("probe.py").stdout.splitlines()[0] == "DONE"  # netlink, at least, here
    result = sb("probe.py")
    assert result.stdout == "REFUSED EPERM\n" * 3, result.stderr


NEW_USER_NAMESPACE = """
outcome(libc.unshare(0x10000000))  # CLONE_NEWUSER: every capability over a namespace
"""


def test_cant_make_a_user_namespace(sb: Runner, py: Runner, project: Path, provider: str):
    (project / "probe.py").write_text(NATIVE + NEW_USER_NAMESPACE)
    control = py("probe.py").stdout
    if control != "DONE\n":
        pytest.skip(f"this host refuses user namespaces already ({control.strip()})")
    result = sb("probe.py")
    assert result.stdout == "REFUSED EPERM\n", result.stderr


THREADS_AND_PROCESSES = """
import subprocess, threading
thread = threading.Thread(target=print, args=("THREAD",), kwargs={"flush": True})
thread.start()
thread.join()
print(subprocess.run([sys.executable, "-c", "print('CHILD')"]).returncode)
"""


def test_threads_and_processes_still_start(sb: Runner, project: Path, provider: str):
    rules = NATIVE_RULES + "python-api=ALLOW:process-exec\npython-api=ALLOW:threads\n"
    (project / ".py-sandboxes").write_text(rules + f"os-sandbox={provider}\n")
    (project / "probe.py").write_text(NATIVE + THREADS_AND_PROCESSES)
    result = sb("probe.py")
    assert result.stdout == "THREAD\nCHILD\n0\n", result.stderr


@pytest.mark.parametrize("probe", ["mptcp", "tcp-fast-open"])
def test_cant_reach_a_port_no_rule_allows_past_the_tcp_rules(
    sb: Runner, py: Runner, project: Path, provider: str, tcp: Listener, probe: str
):
    """Landlock's port rules hold for TCP sockets and the connect hook: an MPTCP socket
    (plain TCP to a server without MPTCP) and TCP Fast Open (sendto connects) pass both."""
    if probe == "mptcp" and not mptcp_enabled():
        pytest.skip("MPTCP is disabled on this host: nothing to refuse")
    allow = "net=ALLOW|tcp|127.0.0.1|443|OUT\n"
    (project / ".py-sandboxes").write_text(NATIVE_RULES + allow + f"os-sandbox={provider}\n")
    body = CONNECT_MPTCP if probe == "mptcp" else SEND_FASTOPEN
    (project / "probe.py").write_text(NATIVE + body.format(port=tcp.port))
    assert py("probe.py").stdout == "DONE\n"
    time.sleep(0.3)
    assert tcp.received == 1
    result = sb("probe.py")
    assert result.stdout == "REFUSED EPERM\n", result.stderr
    time.sleep(0.3)
    assert tcp.received == 1


def test_a_refused_unix_socket_says_why_and_how_to_allow_it(sb: Runner, project: Path):
    (project / ".py-sandboxes").write_text("expose-ro=.\npython-import=*\n")
    code = (
        "import socket\n"
        "try:\n"
        "    socket.socket(socket.AF_UNIX)\n"
        "except PermissionError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    result = sb("-c", code)
    assert result.stdout.startswith("RulePermissionError Creating an AF_UNIX socket"), result.stderr
    assert "Add 'expose-rw=<the socket's directory>' to .py-sandboxes" in result.stdout
    uncaught = sb("-c", "import socket\nsocket.socket(socket.AF_UNIX)\n")
    assert uncaught.returncode == 1
    assert "RulePermissionError: Creating an AF_UNIX socket" in uncaught.stderr
    assert "pysandboxes/_inside/adjust.py" not in uncaught.stderr  # no frame of the wrapper


SET_USER_ID_BY_MKNOD = """
path = os.path.abspath(sys.argv[1]).encode()
outcome(libc.mknod(path, 0o100000 | 0o4755, 0))  # S_IFREG, set-user-ID
"""


def test_cant_make_a_set_user_id_file_with_mknod(
    sb: Runner, py: Runner, project: Path, provider: str
):
    """``mknod`` makes regular files too, with any mode: as root, an empty set-user-ID
    file owned by root, which a privileged writer outside the sandbox may later fill."""
    (project / "data").mkdir()
    rules = NATIVE_RULES + f"expose-rw=./data\nos-sandbox={provider}\n"
    (project / ".py-sandboxes").write_text(rules)
    (project / "probe.py").write_text(NATIVE + SET_USER_ID_BY_MKNOD)
    made = project / "data" / "program"
    assert py("probe.py", str(made)).stdout == "DONE\n"
    assert made.stat().st_mode & 0o4000
    made.unlink()
    result = sb("probe.py", str(made))
    assert result.stdout == "REFUSED EPERM\n", result.stderr
    assert not made.exists()


USERFAULTFD_BY_DEVICE = """
fd = os.open("/dev/userfaultfd", os.O_RDWR)
outcome(libc.ioctl(fd, 0xAA00, 0))  # USERFAULTFD_IOC_NEW: a userfaultfd without the call
"""


def test_cant_get_a_userfaultfd_through_its_device(
    sb: Runner, py: Runner, project: Path, provider: str
):
    if not os.path.exists("/dev/userfaultfd"):
        pytest.skip("this kernel has no /dev/userfaultfd")
    rules = NATIVE_RULES + f"expose-rw=/dev/userfaultfd\nos-sandbox={provider}\n"
    (project / ".py-sandboxes").write_text(rules)
    (project / "probe.py").write_text(NATIVE + USERFAULTFD_BY_DEVICE)
    control = py("probe.py")
    if control.stdout != "DONE\n":
        pytest.skip(f"this user may not use /dev/userfaultfd: {control.stdout or control.stderr}")
    result = sb("probe.py")
    assert result.stdout == "REFUSED EPERM\n", result.stderr


SENDMSG_TO_A_PATH = """
import socket
fd = libc.socket(1, 2, 0)  # AF_UNIX, SOCK_DGRAM
path = sys.argv[1].encode()
name = ctypes.create_string_buffer((1).to_bytes(2, "little") + path + bytes(108 - len(path)), 110)
data = ctypes.create_string_buffer(b"FROM-SANDBOX", 12)
iov = (ctypes.c_void_p * 2)(ctypes.addressof(data), 12)
header = (ctypes.c_uint64 * 7)(ctypes.addressof(name), 110, ctypes.addressof(iov), 1, 0, 0, 0)
outcome(libc.sendmsg(fd, header, 0) if fd >= 0 else fd)
"""


def test_cant_send_a_datagram_to_a_host_socket_with_sendmsg_natively(
    sb: Runner, py: Runner, project: Path, provider: str, tmp_path: Path
):
    # sendto was judged, sendmsg (its address inside a structure) was not.
    path = tmp_path / "outside" / "log.sock"
    path.parent.mkdir()
    (project / "data").mkdir()
    rules = (project / ".py-sandboxes").read_text() + "expose-rw=./data\n"
    (project / ".py-sandboxes").write_text(rules)
    (project / "probe.py").write_text(NATIVE + SENDMSG_TO_A_PATH)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(path))
        server.settimeout(0.5)
        assert py("probe.py", str(path)).stdout == "DONE\n"
        assert server.recv(64) == b"FROM-SANDBOX"
        result = sb("probe.py", str(path))
        assert result.stdout.startswith("REFUSED"), result.stderr
        with pytest.raises(TimeoutError):  # nothing more came
            server.recv(64)
    # The positive control: a socket in the exposed folder gets it the same way.
    mine = project / "data" / "mine.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(mine))
        server.settimeout(5)
        result = sb("probe.py", str(mine))
        assert result.stdout == "DONE\n", result.stderr
        assert server.recv(64) == b"FROM-SANDBOX"
