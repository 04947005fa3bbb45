"""The kernel is the wall: native code the Python layer lets through still meets a refusal.

Each test runs the same native probe under plain python (it works: the test can fail),
then under python-sb with ``python-api=ALLOW:native`` (the Python layer steps aside), and
checks the kernel refused it and nothing happened.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kernelprobes import (
    NATIVE,
    NATIVE_RULES,
    Listener,
    need_abi,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

O_RDONLY, O_WRONLY, O_CREAT, O_TRUNC = 0, 1, 0o100, 0o1000


def probe(project: Path, body: str) -> str:
    (project / "probe.py").write_text(NATIVE + body)
    return "probe.py"


def test_cant_read_outside_exposed_paths(sb: Runner, py: Runner, project: Path, tmp_path: Path):
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("TOP-SECRET")
    (project / ".py-sandboxes").write_text(NATIVE_RULES)
    script = probe(project, f"outcome(libc.open({str(secret).encode()!r}, {O_RDONLY}))")
    assert py(script).stdout == "DONE\n"
    result = sb(script)
    assert result.stdout == "REFUSED EACCES\n", result.stderr


def test_cant_write_in_a_read_only_exposure(sb: Runner, py: Runner, project: Path):
    data = project / "data"
    data.mkdir()
    (data / "kept.txt").write_text("original")
    (project / ".py-sandboxes").write_text(NATIVE_RULES)
    body = (
        f"outcome(libc.open(b'data/new.txt', {O_WRONLY | O_CREAT}, 0o644))\n"
        f"outcome(libc.open(b'data/kept.txt', {O_WRONLY | O_TRUNC}))\n"
    )
    script = probe(project, body)
    assert py(script).stdout == "DONE\nDONE\n"
    (data / "new.txt").unlink()
    (data / "kept.txt").write_text("original")
    result = sb(script)
    assert result.stdout == "REFUSED EACCES\nREFUSED EACCES\n", result.stderr
    assert not (data / "new.txt").exists()
    assert (data / "kept.txt").read_text() == "original"


CONNECT = """
fd = libc.socket(2, 1, 0)
outcome(libc.connect(fd, sockaddr({port}), 16))
"""


def test_cant_connect_to_a_port_no_rule_allows(
    sb: Runner, py: Runner, project: Path, tcp: Listener
):
    need_abi(4, "TCP port rules")
    other = 1 if tcp.port != 1 else 2
    rules = NATIVE_RULES + f"net=ALLOW|tcp|127.0.0.1|{other}|OUT\n"
    (project / ".py-sandboxes").write_text(rules)
    script = probe(project, CONNECT.format(port=tcp.port))
    assert py(script).stdout == "DONE\n"
    time.sleep(0.3)
    assert tcp.received == 1
    result = sb(script)
    assert result.stdout == "REFUSED EACCES\n", result.stderr
    time.sleep(0.3)
    assert tcp.received == 1


def test_cant_connect_anywhere_without_network_rules(
    sb: Runner, py: Runner, project: Path, tcp: Listener
):
    (project / ".py-sandboxes").write_text(NATIVE_RULES)
    script = probe(project, CONNECT.format(port=tcp.port))
    assert py(script).stdout == "DONE\n"
    result = sb(script)
    # A network namespace of its own, loopback down: no route at all.
    assert result.stdout.startswith("REFUSED"), result.stderr
    time.sleep(0.3)
    assert tcp.received == 1


SENDTO = """
fd = libc.socket(2, 2, 0)
outcome(libc.sendto(fd, b"ping", 4, 0, sockaddr({port}), 16))
"""


def test_cant_send_udp_without_network_rules(sb: Runner, py: Runner, project: Path, udp: Listener):
    (project / ".py-sandboxes").write_text(NATIVE_RULES)
    script = probe(project, SENDTO.format(port=udp.port))
    assert py(script).stdout == "DONE\n"
    time.sleep(0.3)
    assert udp.received == 1
    result = sb(script)
    assert result.stdout == "REFUSED ENETUNREACH\n", result.stderr
    time.sleep(0.3)
    assert udp.received == 1


def test_cant_execute_a_program_without_process_exec(sb: Runner, py: Runner, project: Path):
    out = project / "out"
    out.mkdir()
    marker = out / "executed"
    (project / ".py-sandboxes").write_text(NATIVE_RULES + "expose-rw=out\n")
    body = (
        "argv = (ctypes.c_char_p * 3)(b'touch', b'out/executed', None)\n"
        "outcome(libc.execv(b'/usr/bin/touch', argv))\n"
    )
    script = probe(project, body)
    py(script)
    assert marker.exists(), "touch did not run under plain python"
    marker.unlink()
    result = sb(script)
    assert result.stdout == "REFUSED EACCES\n", result.stderr
    assert not marker.exists()


def test_started_programs_stay_inside_the_rules(
    sb: Runner, py: Runner, project: Path, tmp_path: Path
):
    """A process-exec grant lets programs run, but under the same rules, not around them."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    (project / ".py-sandboxes").write_text(
        "expose-ro=.\npython-api=ALLOW:subprocess.run\npython-import=*\n"
    )
    code = f"import subprocess; subprocess.run(['cat', {str(secret)!r}])"
    assert "TOP-SECRET" in py("-c", code).stdout
    result = sb("-c", code)
    assert "TOP-SECRET" not in result.stdout
    assert "Permission denied" in result.stderr, result.stderr


def test_cant_signal_a_process_outside_the_sandbox(
    sb: Runner, py: Runner, project: Path, victims: list[subprocess.Popen[bytes]]
):
    need_abi(6, "signal scoping")
    (project / ".py-sandboxes").write_text(NATIVE_RULES)
    body = f"outcome(libc.kill(int(sys.argv[1]), {int(signal.SIGTERM)}))\n"
    script = probe(project, body)
    assert py(script, str(victims[0].pid)).stdout == "DONE\n"
    assert victims[0].wait(timeout=10) == -signal.SIGTERM
    result = sb(script, str(victims[1].pid))
    # ESRCH: no such process in the sandbox's pid namespace; EPERM: Landlock's scope.
    assert result.stdout in ("REFUSED ESRCH\n", "REFUSED EPERM\n"), result.stderr
    time.sleep(0.2)
    assert victims[1].poll() is None, "the victim died"


READ_PARENT = """
fd = libc.open(f"/proc/{os.getppid()}/environ".encode(), 0)
outcome(fd)
if fd >= 0:
    buffer = ctypes.create_string_buffer(65536)
    size = libc.read(fd, buffer, 65536)
    print(buffer.raw[:size].replace(b"\\0", b"\\n").decode(errors="replace"))
"""

# The control runs the probe as the child of a plain python holding the secret, as
# python-sb's launcher is the parent of the sandboxed interpreter.
AS_CHILD = "import subprocess, sys\nsubprocess.run([sys.executable, 'probe.py'])\n"


def test_cant_read_the_parents_environment(sb: Runner, py: Runner, project: Path):
    secret = "PARENT-TOKEN-4242"
    (project / ".py-sandboxes").write_text(NATIVE_RULES)
    probe(project, READ_PARENT)
    control = py("-c", AS_CHILD, env={"API_TOKEN": secret})
    assert secret in control.stdout, control.stderr
    result = sb("probe.py", env={"API_TOKEN": secret})
    assert result.stdout == "REFUSED EACCES\n", result.stderr


REPORT = """
from pysandboxes._kernel import landlock
from pysandboxes._policy.plan import ConfinementPlan
plan = ConfinementPlan(read=("/usr/lib", "/nonexistent"), network=True, tcp_connect=None,
                       tcp_bind=(8080,))
layer = landlock.apply(plan)
print(layer.provider, layer.abi >= 6, sorted(layer.enforced), layer.skipped)
try:
    open("/etc/hostname").close()
except PermissionError:
    print("REFUSED")
"""


def test_the_applied_layer_says_what_it_enforces(py: Runner) -> None:
    need_abi(6, "scopes to report")
    result = py("-c", REPORT)
    enforced = [
        "abstract-sockets",
        "device-ioctl",
        "execute",
        "files",
        "refer",
        "signals",
        "tcp-bind",
        "truncate",
    ]
    assert result.stdout == f"landlock True {enforced} ('/nonexistent',)\nREFUSED\n", result.stderr


LOAD_CERTIFICATES = """
import ssl, sys
try:
    ssl.create_default_context().load_verify_locations(sys.argv[1])
except OSError as exc:
    print(type(exc).__name__)
"""


def test_cant_load_certificates_from_outside_the_rules(
    sb: Runner, py: Runner, project: Path, tmp_path: Path
) -> None:
    """OpenSSL opens the file in C, unaudited: the kernel refuses the open itself."""
    outside = tmp_path / "outside.pem"
    outside.write_text("not a certificate\n")
    (project / ".py-sandboxes").write_text("expose-ro=.\npython-import=*\n")
    assert py("-c", LOAD_CERTIFICATES, str(outside)).stdout == "SSLError\n"  # opened, parsed
    result = sb("-c", LOAD_CERTIFICATES, str(outside))
    assert result.stdout == "PermissionError\n", result.stderr


CAPABILITIES = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
header = (ctypes.c_uint32 * 2)(0x20080522, 0)
sets = (ctypes.c_uint32 * 6)()
libc.capget(ctypes.byref(header), ctypes.byref(sets))
print("EFFECTIVE", sets[0] | sets[3] << 32)
"""


def test_root_keeps_no_capability(sb: Runner, py: Runner, project: Path):
    if os.geteuid() != 0:
        pytest.skip("not running as root: there are no capabilities to drop")
    script = probe(project, CAPABILITIES)
    assert py(script).stdout != "EFFECTIVE 0\n"
    (project / ".py-sandboxes").write_text(NATIVE_RULES)
    result = sb(script)
    assert result.stdout == "EFFECTIVE 0\n", result.stderr


KEYCTL = 250  # x86-64

READ_SESSION_KEY = """
libc.syscall.restype = ctypes.c_long
key = libc.syscall(KEYCTL, 10, -3, b"user", b"pysandboxes-probe", 0)  # SEARCH, session
outcome(key)
if key >= 0:
    buffer = ctypes.create_string_buffer(100)
    size = libc.syscall(KEYCTL, 11, ctypes.c_long(key), buffer, 100)  # READ
    print(buffer.raw[:max(size, 0)].decode())
"""

# Started by plain python in a session keyring of its own holding one key, as a shell's
# session holds Kerberos tickets or cached passwords; argv is the command to run.
IN_A_SESSION_WITH_A_KEY = """
import ctypes, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
assert libc.syscall(KEYCTL, 1, b"pysandboxes-test") > 0  # JOIN_SESSION_KEYRING
assert libc.syscall(248, b"user", b"pysandboxes-probe", b"SESSION-SECRET", 14, -3) > 0
sys.exit(subprocess.run(sys.argv[1:], check=False).returncode)
"""


def test_cant_read_the_launching_sessions_keys(py: Runner, project: Path, python_sb: str) -> None:
    """keyctl is not mediated by Landlock nor the namespaces: the sandbox leaves the
    session keyring it inherited before the program runs."""
    if os.uname().machine != "x86_64":
        pytest.skip("the probe knows the keyctl and add_key numbers of x86-64 only")
    (project / ".py-sandboxes").write_text(NATIVE_RULES)
    probe(project, f"KEYCTL = {KEYCTL}\n" + READ_SESSION_KEY)
    launcher = project / "launcher.py"
    launcher.write_text(f"KEYCTL = {KEYCTL}\n" + IN_A_SESSION_WITH_A_KEY)
    control = py("launcher.py", sys.executable, "probe.py")
    assert control.stdout == "DONE\nSESSION-SECRET\n", control.stderr
    result = py("launcher.py", python_sb, "probe.py")
    # ENOKEY: a session keyring of its own; EPERM: keyctl itself is filtered.
    assert result.stdout in ("REFUSED ENOKEY\n", "REFUSED EPERM\n"), result.stderr


READ_SHARED_MEMORY = """
libc.shmat.restype = ctypes.c_void_p
segment = libc.shmget(int(sys.argv[1]), 0, 0)
outcome(segment)
if segment >= 0:
    print(ctypes.string_at(libc.shmat(segment, None, 0), 13).decode())
"""


@pytest.mark.parametrize("network", [False, True], ids=["no-network", "with-network"])
def test_cant_read_the_hosts_system_v_shared_memory(
    sb: Runner, py: Runner, project: Path, network: bool
) -> None:
    """System V objects are found by a key, not a path: Landlock does not see them; an IPC
    namespace of the sandbox's own does (made with the network one, or alone as root)."""
    import ctypes

    if network and os.geteuid() != 0:
        pytest.skip("with net= rules, an unprivileged sandbox shares the host's IPC")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    key = int.from_bytes(os.urandom(3), "big") + 0x10000
    segment = libc.shmget(key, 4096, 0o1600)  # IPC_CREAT, owner-only
    assert segment >= 0
    try:
        ctypes.memmove(libc.shmat(segment, None, 0), b"HOST-SECRET-1\0", 14)
        rules = NATIVE_RULES + ("net=ALLOW|tcp|127.0.0.1|443|OUT\n" if network else "")
        (project / ".py-sandboxes").write_text(rules)
        script = probe(project, READ_SHARED_MEMORY)
        assert py(script, str(key)).stdout == "DONE\nHOST-SECRET-1\n"
        result = sb(script, str(key))
        assert result.stdout == "REFUSED EPERM\n", result.stderr  # System V IPC: filtered
    finally:
        libc.shmctl(segment, 0, None)  # IPC_RMID


LINGER = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:  # a daemon: no parent left in the program, no output shared
        null = os.open("/dev/null", os.O_RDWR)
        for stream in (0, 1, 2):
            os.dup2(null, stream)
        for _ in range(40):
            time.sleep(0.1)
            with open("out/alive", "a") as handle:
                handle.write(".")
    os._exit(0)
print("program ends")
"""


def test_nothing_the_program_started_outlives_the_run(sb: Runner, py: Runner, project: Path):
    """Every provider ends the program's pid namespace with it (under landlock the
    sandboxed interpreter makes its own), and the waiter, the reaper of what the program
    detached, ends what is left (see tests/escapes/test_process_leftovers.py)."""
    (project / "out").mkdir()
    alive = project / "out" / "alive"
    (project / "linger.py").write_text(LINGER)
    assert py("linger.py").stdout == "program ends\n"
    time.sleep(1)
    assert alive.exists(), "the daemon did not run under plain python"
    time.sleep(4)
    alive.unlink()
    rules = "expose-ro=.\nexpose-rw=./out\npython-api=ALLOW:os.fork, os.setsid\n"
    (project / ".py-sandboxes").write_text(rules + "python-import=os, time\n")
    result = sb("linger.py")
    assert result.stdout == "program ends\n", result.stderr
    size = alive.stat().st_size if alive.exists() else 0
    time.sleep(1)
    assert (alive.stat().st_size if alive.exists() else 0) == size, "the daemon still runs"


SET_USER_ID = """
outcome(libc.chmod(sys.argv[1].encode(), 0o4755))
"""


def test_cant_make_a_program_outside_the_rules_set_user_id(
    sb: Runner, py: Runner, project: Path, tmp_path: Path
) -> None:
    """Landlock does not mediate chmod: run as root, a sandbox could make any root-owned
    program set-user-ID, a root shell for every user of the host. The filter refuses the
    set-ID bits (other mode changes outside the rules stay open: docs/security.md)."""
    program = tmp_path / "program"
    program.write_bytes(b"#!/bin/sh\n")
    program.chmod(0o755)
    (project / ".py-sandboxes").write_text(NATIVE_RULES)
    script = probe(project, SET_USER_ID)
    assert py(script, str(program)).stdout == "DONE\n"
    assert program.stat().st_mode & 0o4000
    program.chmod(0o755)
    result = sb(script, str(program))
    assert result.stdout == "REFUSED EPERM\n", result.stderr
    assert not program.stat().st_mode & 0o4000


def test_a_refused_semaphore_says_which_rule_allows_it(sb: Runner, project: Path):
    # multiprocessing's locks are POSIX semaphores, files of /dev/shm created in C: the
    # kernel's bare EACCES names the rule to add, and that rule is enough.
    (project / ".py-sandboxes").write_text("python-import=multiprocessing\n")
    code = (
        "import multiprocessing\n"
        "try:\n"
        "    multiprocessing.Lock()\n"
        "except PermissionError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
        "else:\n"
        "    print('made')\n"
    )
    refused = sb("-c", code)
    assert refused.stdout.startswith("RulePermissionError Creating a semaphore"), refused.stderr
    assert "Add 'expose-rw=/dev/shm' to .py-sandboxes" in refused.stdout
    assert sb("--expose-rw=/dev/shm", "-c", code).stdout == "made\n"
