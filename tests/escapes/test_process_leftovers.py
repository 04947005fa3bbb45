"""Attack class: processes the program started outliving the run.

A process left running after the program ends is out of every check: in a learning run it
waits until the trusted side has written the rules, then adds its own (the rules shown for
review are not the rules the next run reads). Nothing the program started may outlive it,
however deep the chain or fast the forks: the program runs below a pid 1 of its own, whose
end the kernel makes the end of every process in its namespace, and the trusted side's
waiter, the reaper of every orphan, stops and ends what is left and checks that nothing
is before it writes or reads anything for the next run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pysandboxes._host.select import unavailable_reason

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

PROVIDERS = ("landlock", "subprocess", "unshare", "bwrap")

# 130 nested processes, each waiting for its child: a sweep that ends one level per round
# (and at most 100 rounds) leaves the deepest. The deepest waits until the rules are
# written, then appends a rule of its own through a shell (the Python layer refuses the
# name, a learning run lets a shell through).
CHAIN = """
import os, sys, time
APPEND = (
    "for i in $(seq 150); do sleep 0.1; "
    "if grep -q learned .py-sandboxes 2>/dev/null; then "
    "echo expose-ro=../outside >> .py-sandboxes; touch escaped; exit; fi; done"
)
def link(depth):
    if depth == 130:  # no output shared: a plain run's caller waits for none of them
        null = os.open("/dev/null", os.O_RDWR)
        for stream in (0, 1, 2):
            os.dup2(null, stream)
    if depth == 0:
        os.execv("/bin/sh", ["sh", "-c", APPEND])
    pid = os.fork()
    if pid == 0:
        link(depth - 1)
    os.waitpid(pid, 0)
    os._exit(0)
if os.fork() == 0:
    link(130)
time.sleep(1)
print("program ends")
"""

# Plain runs: the deepest of 130 links, or a chain moving as fast as it forks (each link
# forks the next and exits at once: a pid is gone before it can be signalled), keeps
# writing for seconds after the program ended.
DEEP = """
import os, sys, time
def link(depth):
    if depth == 130:
        null = os.open("/dev/null", os.O_RDWR)
        for stream in (0, 1, 2):
            os.dup2(null, stream)
    if depth == 0:
        for _ in range(30):
            time.sleep(0.1)
            with open(sys.argv[1], "a") as handle:
                handle.write(".")
        os._exit(0)
    pid = os.fork()
    if pid == 0:
        link(depth - 1)
    os.waitpid(pid, 0)
    os._exit(0)
if os.fork() == 0:
    link(130)
time.sleep(1)
print("program ends")
"""
RACE = """
import os, sys, time
end = time.monotonic() + 3
for _ in range(3):
    if os.fork() == 0:
        null = os.open("/dev/null", os.O_RDWR)
        for stream in (0, 1, 2):
            os.dup2(null, stream)
        generation = 0
        while time.monotonic() < end:
            if os.fork() != 0:
                os._exit(0)  # the parent goes at once, its child goes on
            generation += 1
            if generation % 20 == 0:
                with open(sys.argv[1], "a") as handle:
                    handle.write(".")
        os._exit(0)
time.sleep(1)
print("program ends")
"""
PLAIN_RULES = "expose-ro=.\nexpose-rw=./out\npython-api=ALLOW:os.fork, os.execv\npython-import=*\n"


def _grows(path: Path, seconds: float = 0.8) -> bool:
    """Whether something still writes ``path``."""
    before = path.stat().st_size if path.exists() else 0
    time.sleep(seconds)
    return (path.stat().st_size if path.exists() else 0) != before


def test_a_deep_process_chain_cant_edit_the_learned_rules(
    sb: Runner, py: Runner, project: Path
) -> None:
    (project / "app.py").write_text(CHAIN)
    # Control: under plain python the deepest link outlives the program and writes the
    # file as soon as it holds learned rules (written here, as the trusted side would).
    assert py("app.py").stdout == "program ends\n"
    (project / ".py-sandboxes").write_text("# learned rules\n")
    for _ in range(100):
        if (project / "escaped").exists():
            break
        time.sleep(0.1)
    assert "expose-ro=../outside" in (project / ".py-sandboxes").read_text()
    (project / ".py-sandboxes").unlink()
    (project / "escaped").unlink()
    result = sb("--learn", "app.py")
    assert result.stdout == "program ends\n", result.stderr
    assert "learned" in (project / ".py-sandboxes").read_text(), result.stderr
    time.sleep(3)
    assert not (project / "escaped").exists(), "a process of the program outlived the run"
    assert "expose-ro=../outside" not in (project / ".py-sandboxes").read_text()


@pytest.mark.parametrize("program", ["deep", "race"])
def test_nothing_the_program_started_outlives_the_run(
    sb: Runner, py: Runner, project: Path, program: str
) -> None:
    (project / "out").mkdir()
    alive = project / "out" / "alive"
    (project / "app.py").write_text(DEEP if program == "deep" else RACE)
    assert py("app.py", "out/control").stdout == "program ends\n"
    control = project / "out" / "control"
    for _ in range(300):  # on a loaded machine the deepest link may start late
        if control.exists():
            break
        time.sleep(0.1)
    assert _grows(control), "the control's processes did not outlive it"
    for provider in PROVIDERS:  # one control for all: it is the same program
        if unavailable_reason(provider) is not None:
            continue  # each provider's own tests say why it cannot run
        alive.unlink(missing_ok=True)
        (project / ".py-sandboxes").write_text(PLAIN_RULES + f"os-sandbox={provider}\n")
        result = sb("app.py", "out/alive")
        assert result.stdout == "program ends\n", (provider, result.stderr)
        assert not _grows(alive), f"a process of the program outlived the run ({provider})"


# Where no pid namespace can be made (here: a user namespace whose limits allow none),
# the waiter's sweep alone ends them, and the check that nothing is left still holds.
NO_NAMESPACES = (
    "echo 0 > /proc/sys/user/max_pid_namespaces && "
    'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"'
)


def _without_pid_namespaces(
    python_sb: str, project: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("util-linux unshare is not installed: cannot take pid namespaces away")
    probe = subprocess.run(
        [unshare, "--user", "--map-root-user", "sh", "-c", NO_NAMESPACES, "sh", "true"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot make a user namespace without pid namespaces: {probe.stderr!r}")
    return subprocess.run(
        [unshare, "--user", "--map-root-user", "sh", "-c", NO_NAMESPACES, "sh", python_sb, *args],
        cwd=project,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("program", ["deep", "race"])
def test_the_waiter_alone_ends_what_no_pid_namespace_holds(
    python_sb: str, project: Path, program: str
) -> None:
    (project / "out").mkdir()
    alive = project / "out" / "alive"
    code = (DEEP if program == "deep" else RACE).replace(
        'print("program ends")', 'print("program ends", os.getpid())'
    )
    (project / "app.py").write_text(code)
    (project / ".py-sandboxes").write_text(PLAIN_RULES + "os-sandbox=subprocess\n")
    result = _without_pid_namespaces(python_sb, project, "app.py", "out/alive")
    assert result.stdout.startswith("program ends"), result.stderr
    assert result.stdout != "program ends 2\n", "the run had a pid namespace after all"
    assert not _grows(alive), "a process of the program outlived the run"


def test_the_waiter_alone_keeps_a_deep_chain_from_the_learned_rules(
    python_sb: str, project: Path
) -> None:
    (project / "app.py").write_text(CHAIN)
    result = _without_pid_namespaces(python_sb, project, "--learn", "app.py")
    assert result.stdout == "program ends\n", result.stderr
    time.sleep(3)
    assert not (project / "escaped").exists(), "a process of the program outlived the run"
    assert "expose-ro=../outside" not in (project / ".py-sandboxes").read_text()


def test_python_sb_killed_takes_the_program_along(python_sb: str, project: Path) -> None:
    # The processes in front of the program die with their parent: python-sb killed
    # (SIGKILL, no waiter left to sweep), the pid namespace ends, and all it held.
    (project / "out").mkdir()
    alive = project / "out" / "alive"
    # The deepest link writes for a minute: 130 sandboxed forks may be slow to get there.
    program = DEEP.replace("time.sleep(1)", "time.sleep(60)").replace("range(30)", "range(600)")
    (project / "app.py").write_text(program)
    (project / ".py-sandboxes").write_text(PLAIN_RULES)
    run = subprocess.Popen(
        [python_sb, "app.py", "out/alive"],
        cwd=project,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        stdout=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            if alive.exists():
                break
            time.sleep(0.1)
        assert _grows(alive), "the program's deepest process did not start"
    finally:
        run.kill()
        run.wait()
    time.sleep(0.5)
    assert not _grows(alive), "the program outlived python-sb"


def test_a_program_killed_by_a_signal_ends_python_sb_by_it(sb: Runner, project: Path) -> None:
    # The processes in front of the program pass its end on: a death by signal stays one.
    (project / ".py-sandboxes").write_text("python-import=os, signal\n")
    code = "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == -15
    assert sb("-c", code).returncode == -15
