"""The processes of a running sandbox: what each is for, and that none outlives python-sb.

Under ``landlock`` and ``subprocess`` a run is three processes: ``python-sb`` (the
waiter, in the host's pid namespace), the sandbox's pid 1 and the program (pid 2). The
sandboxed interpreter that made the namespace has left: its pid 1 was handed to the
waiter. Killing ``python-sb`` (SIGKILL: no waiter left to sweep) ends them all at once.
``benchmarks/complete.py`` prints the same count.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysandboxes._kernel.handoff import _plausible  # pyright: ignore[reportPrivateUsage]

WAITS = "import os\nos.read(0, 1)\n"  # a program that waits on its standard input


def descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{current}/task/{task}/children") as listing:
                    todo += [int(number) for number in listing.read().split()]
            except OSError:
                continue
    return found


def pid_in_namespace(pid: int) -> int:
    """The pid ``pid`` has in the innermost pid namespace it is in."""
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("NSpid:"))
    return int(line.split()[-1])


def running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its reaper has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def settled(run: subprocess.Popen[bytes], count: int) -> list[int]:
    """The processes below ``run`` once the program waits (``count`` of them, or what
    there is after 10 s)."""
    found: list[int] = []
    for _ in range(200):
        found = descendants(run.pid)
        if len(found) >= count and pid_in_namespace(found[-1]) == 2:
            time.sleep(0.2)  # the program is at its read
            return descendants(run.pid)
        time.sleep(0.05)
    return found


@pytest.mark.parametrize("provider", ["landlock", "subprocess"])
def test_a_running_sandbox_is_the_waiter_its_pid_one_and_the_program(
    python_sb: str, project: Path, provider: str
) -> None:
    (project / ".py-sandboxes").write_text(f"os-sandbox={provider}\npython-import=os\n")
    plain = subprocess.Popen([sys.executable, "-c", WAITS], stdin=subprocess.PIPE)
    try:
        time.sleep(0.3)
        assert descendants(plain.pid) == [plain.pid]  # the control: one process
        assert pid_in_namespace(plain.pid) == plain.pid
    finally:
        assert plain.stdin is not None
        plain.stdin.close()
        plain.wait()
    run = subprocess.Popen([python_sb, "-c", WAITS], cwd=project, stdin=subprocess.PIPE)
    try:
        chain = settled(run, 3)
        assert [pid_in_namespace(pid) for pid in chain] == [run.pid, 1, 2], chain
    finally:
        assert run.stdin is not None
        run.stdin.close()
        assert run.wait(timeout=30) == 0


@pytest.mark.parametrize("provider", ["landlock", "subprocess"])
def test_killing_python_sb_ends_the_sandbox_within_a_second(
    python_sb: str, project: Path, provider: str
) -> None:
    (project / ".py-sandboxes").write_text(f"os-sandbox={provider}\npython-import=os\n")
    run = subprocess.Popen([python_sb, "-c", WAITS], cwd=project, stdin=subprocess.PIPE)
    chain = settled(run, 3)
    assert len(chain) == 3
    assert all(running(pid) for pid in chain)
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    assert run.stdin is not None
    run.stdin.close()
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and any(running(pid) for pid in chain[1:]):
        time.sleep(0.02)
    assert not [pid for pid in chain[1:] if running(pid)], "the sandbox outlived python-sb"


@settings(max_examples=500, deadline=None)
@given(st.integers(-(2**31), 2**31 - 1))
def test_no_status_pid_one_reports_can_end_the_waiter_before_its_clean_up(status: int) -> None:
    # Pid 1 writes the program's wait status to the waiter, which ends by it: a number no
    # process can end with would raise there, before the temporary directory is removed.
    if _plausible(status):
        code = os.waitstatus_to_exitcode(status)
        assert -65 < code < 256
