"""Limits from the rules (``sandbox-memory=``, ``sandbox-open-files=``,
``sandbox-processes=``): a call that reaches one fails, alone, with an error naming the
rule; the application and the child's next calls go on. Each probe first runs without
the rule (the positive control: it succeeds).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from partiallab import App  # type: ignore[import-not-found]

import pysandboxes

TOOLS = """
    import os, threading, time
    from pysandboxes import sandbox

    # Which child: each imports this module afresh (pids repeat: each child is pid 2
    # of a pid namespace of its own).
    PROCESS = os.urandom(8).hex()

    @sandbox
    def allocate(mib):
        return len(bytearray(mib << 20))

    @sandbox
    def open_many(directory, count):
        handles = [open(os.path.join(directory, f"f{n}"), "w") for n in range(count)]
        for handle in handles:
            handle.close()
        return len(handles)

    @sandbox
    def start_threads(count):
        threads = [threading.Thread(target=time.sleep, args=(1,)) for _ in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return count

    @sandbox
    def pid():
        return PROCESS
"""
MAIN = """
    import tools
    from pysandboxes import sandboxes
    with sandboxes():
        first = tools.pid()
        try:
            print("done", {call})
        except Exception as exc:
            print("failed", type(exc).__name__, " ".join(getattr(exc, "__notes__", [])))
        print("same child", tools.pid() == first, {after})
"""


def _run(app: App, rules: str, call: str, after: str) -> list[str]:
    (app.project / ".py-sandboxes").write_text("python-import=os, threading, time\n" + rules)
    result = app.run(MAIN.format(call=call, after=after), TOOLS)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_cant_take_more_memory_than_the_rules_give(app: App) -> None:
    control = _run(app, "", "tools.allocate(256)", "tools.allocate(1)")
    assert control == ["done 268435456", "same child True 1048576"]
    limited = _run(app, "sandbox-memory=64MiB\n", "tools.allocate(256)", "tools.allocate(1)")
    assert limited[0].startswith("failed MemoryError")
    assert "'sandbox-memory=64MiB' (.py-sandboxes(2))" in limited[0]
    assert limited[1] == "same child True 1048576"


def test_cant_open_more_files_than_the_rules_give(app: App, tmp_path: Path) -> None:
    files = tmp_path / "files"
    files.mkdir()
    rules = f"expose-rw={files}\n"
    call = f"tools.open_many({str(files)!r}, 40)"
    after = f"tools.open_many({str(files)!r}, 2)"
    assert _run(app, rules, call, after) == ["done 40", "same child True 2"]
    limited = _run(app, rules + "sandbox-open-files=8\n", call, after)
    assert limited[0].startswith("failed OSError")
    assert "'sandbox-open-files=8' (.py-sandboxes(3))" in limited[0]
    assert limited[1] == "same child True 2"


#: A user of this run alone: the kernel counts every process of a user against
#: ``RLIMIT_NPROC``, so the probe run by another test session at the same moment (the
#: other Python versions' suites) as the same user would eat into, or add to, this one's.
_UID = 20000 + os.getpid() % 30000
ANOTHER_USER = ["setpriv", f"--reuid={_UID}", f"--regid={_UID}", "--clear-groups"]


@pytest.fixture
def world() -> Iterator[Path]:
    """A directory any user can read (the test's own lies under root's 0700 one)."""
    base = Path(tempfile.mkdtemp(prefix="pysandboxes-partial-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base)


def _as_another_user(base: Path, rules: str) -> list[str]:
    """Run the thread probe as a user of its own (the kernel never limits root's processes),
    with the system Python and a copy of the package that user can read."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to drop to another user")
    python = "/usr/bin/python3"
    probe = subprocess.run(
        [*ANOTHER_USER, python, "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0 or probe.stdout.strip() != "(3, 11)":
        pytest.skip("no system Python 3.11 that another user can run")
    world = base / "world"
    shutil.copytree(
        Path(pysandboxes.__file__).parent,
        world / "lib" / "pysandboxes",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    project = world / "project"
    project.mkdir()
    (project / "tools.py").write_text(textwrap.dedent(TOOLS))
    (project / ".py-sandboxes").write_text("python-import=os, threading, time\n" + rules)
    (project / "main.py").write_text(
        textwrap.dedent(MAIN.format(call="tools.start_threads(30)", after="len(tools.pid()) > 0"))
    )
    for path in (base, world, *world.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    result = subprocess.run(
        [*ANOTHER_USER, python, "main.py"],
        cwd=project,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(world / "lib"), "LC_ALL": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_cant_start_more_threads_or_processes_than_the_rules_give(world: Path) -> None:
    (world / "control").mkdir()
    (world / "limited").mkdir()
    assert _as_another_user(world / "control", "") == ["done 30", "same child True True"]
    limited = _as_another_user(world / "limited", "sandbox-processes=5\n")
    assert limited[0].startswith("failed RuntimeError")
    assert "'sandbox-processes=5' (.py-sandboxes(2))" in limited[0]
    assert limited[1] == "same child True True"
