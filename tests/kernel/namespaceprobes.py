"""Native probes shared by the namespace providers' tests (``bwrap``, ``unshare``).

Each test module subclasses ``NamespaceProbes`` with the provider's name and ``hidden``,
the error a path outside the rules gives (bwrap's view does not have it, unshare's
Landlock refuses it); a provider this host cannot run is skipped with the reason. Every probe
runs first under plain python, where it works, then under python-sb with the Python layer
stepped aside (``python-api=ALLOW:native``, ``python-import=*``): only the kernel refuses.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from kernelprobes import NATIVE, NATIVE_RULES, Listener

from pysandboxes._host.select import unavailable_reason

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

O_RDONLY, O_WRONLY, O_CREAT = 0, 1, 0o100


def rules(provider: str) -> str:
    return NATIVE_RULES + f"os-sandbox={provider}\n"


def probe(project: Path, body: str) -> str:
    (project / "probe.py").write_text(NATIVE + body)
    return "probe.py"


CONNECT = """
import time
fd = libc.socket(2, 1, 0)
start = time.monotonic()
result = libc.connect(fd, sockaddr({port}), 16)
elapsed = time.monotonic() - start
outcome(result)
print(elapsed < 2)
"""


SENDTO = """
fd = libc.socket(2, 2, 0)
outcome(libc.sendto(fd, b"ping", 4, 0, sockaddr({port}), 16))
"""


READ_ENVIRONS = """
for pid in (1, os.getppid()):
    fd = libc.open(f"/proc/{pid}/environ".encode(), 0)
    if fd >= 0:
        buffer = ctypes.create_string_buffer(65536)
        size = libc.read(fd, buffer, 65536)
        print(buffer.raw[:max(size, 0)].replace(b"\\0", b"\\n").decode(errors="replace"))
print("END")
"""


# The control runs the probe as the child of a plain python holding the secret.


AS_CHILD = "import subprocess, sys\nsubprocess.run([sys.executable, 'probe.py'])\n"


READ_COMMAND_LINES = """
for pid in (1, os.getppid()):
    for path in (f"/proc/{pid}/cmdline", f"/proc/{pid}/task/{pid}/cmdline"):
        fd = libc.open(path.encode(), 0)
        if fd >= 0:
            buffer = ctypes.create_string_buffer(65536)
            size = libc.read(fd, buffer, 65536)
            print(buffer.raw[:max(size, 0)].replace(b"\\0", b" ").decode(errors="replace"))
print("END")
"""


CAPABILITIES = """
fd = libc.open(b"/proc/self/status", 0)
buffer = ctypes.create_string_buffer(65536)
size = libc.read(fd, buffer, 65536)
lines = buffer.raw[:max(size, 0)].decode().splitlines()
print(*[line.split()[1] for line in lines if line.startswith(("CapEff", "CapPrm"))])
"""


class NamespaceProbes:
    """The probes; a subclass names the provider and what a hidden path gives."""

    provider = ""
    hidden = ""

    @pytest.fixture(autouse=True)
    def _available(self) -> None:
        reason = unavailable_reason(self.provider)
        if reason is not None:
            pytest.skip(f"{self.provider} cannot run here: {reason}")

    def test_cant_read_outside_exposed_paths(
        self, sb: Runner, py: Runner, project: Path, tmp_path: Path
    ) -> None:
        secret = tmp_path / "outside" / "secret.txt"
        secret.parent.mkdir()
        secret.write_text("TOP-SECRET")
        (project / ".py-sandboxes").write_text(rules(self.provider))
        script = probe(project, f"outcome(libc.open({str(secret).encode()!r}, {O_RDONLY}))")
        assert py(script).stdout == "DONE\n"
        result = sb(script)
        assert result.stdout == f"REFUSED {self.hidden}\n", result.stderr

    def test_cant_write_outside_exposed_paths(
        self, sb: Runner, py: Runner, project: Path, tmp_path: Path
    ) -> None:
        outside = tmp_path / "outside"
        outside.mkdir()
        target = outside / "written.txt"
        (project / ".py-sandboxes").write_text(rules(self.provider))
        body = f"outcome(libc.open({str(target).encode()!r}, {O_WRONLY | O_CREAT}, 0o644))\n"
        script = probe(project, body)
        assert py(script).stdout == "DONE\n"
        target.unlink()
        result = sb(script)
        assert result.stdout == f"REFUSED {self.hidden}\n", result.stderr
        assert not target.exists()

    def test_cant_send_udp_without_network_rules(
        self, sb: Runner, py: Runner, project: Path, udp: Listener
    ) -> None:
        (project / ".py-sandboxes").write_text(rules(self.provider))
        script = probe(project, SENDTO.format(port=udp.port))
        assert py(script).stdout == "DONE\n"
        time.sleep(0.3)
        assert udp.received == 1
        result = sb(script)
        assert result.returncode == 0, result.stderr  # sent into an empty namespace, or refused
        time.sleep(0.3)
        assert udp.received == 1, "the datagram left the sandbox's network namespace"

    def test_cant_signal_a_process_outside_the_sandbox(
        self, sb: Runner, py: Runner, project: Path, victims: list[subprocess.Popen[bytes]]
    ) -> None:
        (project / ".py-sandboxes").write_text(rules(self.provider))
        body = f"outcome(libc.kill(int(sys.argv[1]), {int(signal.SIGTERM)}))\n"
        script = probe(project, body)
        assert py(script, str(victims[0].pid)).stdout == "DONE\n"
        assert victims[0].wait(timeout=10) == -signal.SIGTERM
        result = sb(script, str(victims[1].pid))
        assert result.stdout.startswith("REFUSED"), result.stderr  # ESRCH: not in its pids
        time.sleep(0.2)
        assert victims[1].poll() is None, "the victim died"

    def test_cant_read_the_launchers_environment_through_proc(
        self, sb: Runner, py: Runner, project: Path
    ) -> None:
        secret = "SECRET-TOKEN-4242"
        (project / ".py-sandboxes").write_text(rules(self.provider))
        probe(project, READ_ENVIRONS)
        control = py("-c", AS_CHILD, env={"SECRET": secret})
        assert secret in control.stdout, control.stderr
        result = sb("probe.py", env={"SECRET": secret})
        assert result.stdout.endswith("END\n"), result.stderr
        assert secret not in result.stdout

    def test_cant_read_the_bound_host_paths_from_a_command_line(
        self, sb: Runner, py: Runner, project: Path, tmp_path: Path
    ) -> None:
        # bwrap's init, the sandbox's pid 1, kept bwrap's command line: every host path
        # bound into the view, readable in /proc/1/cmdline by any code.
        bound = tmp_path / "host-only-name-4242"
        bound.mkdir()
        (project / ".py-sandboxes").write_text(rules(self.provider) + f"expose-ro={bound}\n")
        probe(project, READ_COMMAND_LINES)
        control = py("-c", AS_CHILD, str(bound))  # a parent started with the path
        assert bound.name in control.stdout, control.stderr
        result = sb("probe.py")
        assert result.stdout.endswith("END\n"), result.stderr
        assert "python" in result.stdout  # the command lines were read...
        assert bound.name not in result.stdout  # ...and name no bound path

    def test_keeps_no_capability_when_started_as_root(
        self, sb: Runner, py: Runner, project: Path
    ) -> None:
        if os.geteuid() != 0:
            pytest.skip("not root: no capability to drop")
        (project / ".py-sandboxes").write_text(rules(self.provider))
        script = probe(project, CAPABILITIES)
        assert py(script).stdout != "0000000000000000 0000000000000000\n"
        result = sb(script)
        assert result.stdout == "0000000000000000 0000000000000000\n", result.stderr
