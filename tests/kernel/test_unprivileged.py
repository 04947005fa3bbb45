"""Without root the kernel layer still applies: Landlock and a user-owned network namespace.

The suite usually runs as root; this test drops to ``nobody`` with ``setpriv``. The
installed packages are copied to a directory ``nobody`` can read and run with a system
Python that ``nobody`` can execute (the test environment's own may live under ``/root``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernelprobes import NATIVE, NATIVE_RULES, Listener

import pysandboxes
import python_sb

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
# Start python-sb from the copied packages, as its console script would.
LAUNCH = "import sys; sys.path.insert(0, {lib!r}); import python_sb; sys.exit(python_sb.main())"


def _system_python() -> str:
    if os.geteuid() != 0:
        pytest.skip("already unprivileged: the whole suite shows the layer without root")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed: cannot drop to nobody")
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/{version}", f"/usr/local/bin/{version}", "/usr/bin/python3"):
        if os.access(candidate, os.X_OK):
            check = subprocess.run([*NOBODY, candidate, "-c", "pass"], check=False)
            if check.returncode == 0:
                return candidate
    pytest.skip("no system Python that the user nobody can run")


@pytest.fixture
def world() -> Iterator[Path]:
    """A directory every user can read, with the packages under ``lib``."""
    base = Path(tempfile.mkdtemp(prefix="pysandboxes-kernel-"))
    try:
        base.chmod(0o755)
        for package in (pysandboxes, python_sb):
            source = Path(package.__file__).parent
            shutil.copytree(source, base / "lib" / source.name, ignore=_no_cache)
        (base / "project").mkdir()
        yield base
    finally:
        shutil.rmtree(base)


def _no_cache(directory: str, names: list[str]) -> list[str]:
    return [name for name in names if name == "__pycache__"]


PROBE = """
outcome(libc.open({secret!r}, 0))
fd = libc.socket(2, 2, 0)
outcome(libc.sendto(fd, b"ping", 4, 0, sockaddr({port}), 16))
print(os.getuid())
"""


def test_layer_applies_to_an_unprivileged_user(world: Path) -> None:
    python = _system_python()
    secret = world / "secret.txt"
    secret.write_text("readable by nobody, outside the rules")
    project = world / "project"
    (project / ".py-sandboxes").write_text(NATIVE_RULES)
    listener = Listener(2)  # SOCK_DGRAM
    try:
        body = PROBE.format(secret=str(secret).encode(), port=listener.port)
        (project / "probe.py").write_text(NATIVE + body)
        for path in [world, *world.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}

        def run(*command: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*NOBODY, *command],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )

        control = run(python, "probe.py")
        assert control.stdout == "DONE\nDONE\n65534\n", control.stderr
        time.sleep(0.3)
        received = listener.received
        assert received == 1, "the datagram did not arrive under plain python"
        result = run(python, "-I", "-c", LAUNCH.format(lib=str(world / "lib")), "probe.py")
        # The same uid inside its user namespace; the file and the datagram are refused.
        assert result.stdout == "REFUSED EACCES\nREFUSED ENETUNREACH\n65534\n", result.stderr
        time.sleep(0.3)
        assert listener.received == received
    finally:
        listener.close()


@pytest.mark.parametrize(("provider", "hidden"), [("bwrap", "ENOENT"), ("unshare", "EACCES")])
def test_namespace_providers_run_for_an_unprivileged_user(
    world: Path, provider: str, hidden: str
) -> None:
    from pysandboxes._host.select import unavailable_reason

    python = _system_python()
    reason = unavailable_reason(provider)
    if reason is not None:
        pytest.skip(f"{provider} cannot run here: {reason}")
    secret = world / "secret.txt"
    secret.write_text("readable by nobody, outside the rules")
    project = world / "project"
    (project / ".py-sandboxes").write_text(NATIVE_RULES + f"os-sandbox={provider}\n")
    listener = Listener(2)  # SOCK_DGRAM
    try:
        body = PROBE.format(secret=str(secret).encode(), port=listener.port)
        (project / "probe.py").write_text(NATIVE + body)
        for path in [world, *world.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        launch = LAUNCH.format(lib=str(world / "lib"))
        result = subprocess.run(
            [*NOBODY, python, "-I", "-c", launch, "probe.py"],
            cwd=project,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        lines = [*result.stdout.splitlines(), "", "", ""]
        assert lines[0] == f"REFUSED {hidden}", result.stderr
        assert lines[2] == "65534", result.stderr  # the same user inside its namespace
        time.sleep(0.3)
        assert listener.received == 0, "the datagram left the sandbox's network namespace"
    finally:
        listener.close()


def _run_as_nobody(
    world: Path, *args: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    python = _system_python()
    for path in [world, *world.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o777 if path.is_dir() else 0o666)
    launch = LAUNCH.format(lib=str(world / "lib"))
    return subprocess.run(
        [*NOBODY, python, "-I", "-c", launch, *args],
        cwd=world / "project",
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


APPEND_RULES = """
fd = libc.open(b".py-sandboxes", 0o2001)  # O_WRONLY | O_APPEND
outcome(fd)
libc.write(fd, b"expose-ro=/\\n", 12)
"""


@pytest.mark.parametrize("provider", ["landlock", "unshare", "bwrap", "subprocess"])
def test_rule_files_stay_the_reviewed_ones_for_an_unprivileged_user(
    world: Path, provider: str
) -> None:
    # The read-only bind needs a mount namespace, which an unprivileged user makes with
    # a user namespace; without a kernel layer the trusted side sets the file back.
    from pysandboxes._host.select import unavailable_reason

    reason = unavailable_reason(provider)
    if reason is not None:
        pytest.skip(f"{provider} cannot run here: {reason}")
    project = world / "project"
    rules = "expose-rw=.\npython-api=ALLOW:native\npython-import=*\n"
    (project / ".py-sandboxes").write_text(rules)
    (project / "probe.py").write_text(NATIVE + APPEND_RULES)
    result = _run_as_nobody(world, f"--os-sandbox={provider}", "probe.py", env={})
    if provider == "subprocess":
        assert result.stdout == "DONE\n", result.stderr
        assert ".py-sandboxes was changed while the program ran" in result.stderr
    else:
        assert result.stdout == "REFUSED EROFS\n", result.stderr
    assert (project / ".py-sandboxes").read_text() == rules


LINGER = """
import os, sys, time
print(os.getpid())
sys.stdout.flush()
if os.fork() == 0:
    os.setsid()
    null = os.open("/dev/null", os.O_RDWR)
    for stream in (0, 1, 2):
        os.dup2(null, stream)
    for _ in range(40):
        time.sleep(0.1)
        with open("alive", "a") as handle:
            handle.write(".")
    os._exit(0)
time.sleep(0.5)
"""


@pytest.mark.parametrize("provider", ["landlock", "subprocess"])
def test_nothing_outlives_the_run_of_an_unprivileged_user(world: Path, provider: str) -> None:
    # Unprivileged, the pid namespace comes with a user namespace of its own.
    project = world / "project"
    (project / ".py-sandboxes").write_text(
        "expose-rw=.\npython-api=ALLOW:os.fork, os.setsid\npython-import=*\n"
    )
    (project / "app.py").write_text(LINGER)
    result = _run_as_nobody(world, f"--os-sandbox={provider}", "app.py", env={})
    assert result.stdout == "2\n", result.stderr  # pid 2 of a namespace of its own
    alive = project / "alive"
    size = alive.stat().st_size if alive.exists() else 0
    time.sleep(1)
    assert (alive.stat().st_size if alive.exists() else 0) == size, "the daemon still runs"
