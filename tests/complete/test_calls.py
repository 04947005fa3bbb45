"""Sensitive calls: running programs, signalling others, native code, unpickling code.

Each probe tries to create a marker file through a process or native code that the Python
layer cannot follow. Under plain python the marker appears; under python-sb the call is
refused with RuleApiPermissionError and the marker never appears.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

PROBES = {
    "os_system": "import os; os.system('touch {marker}')",
    "os_popen": "import os; os.popen('touch {marker}').read()",
    "subprocess_run": "import subprocess; subprocess.run(['touch', '{marker}'])",
    "os_execv": "import os; os.execv('/usr/bin/touch', ['touch', '{marker}'])",
    "os_posix_spawn": (
        "import os; pid = os.posix_spawn('/usr/bin/touch', ['touch', '{marker}'], {{}}); "
        "os.waitpid(pid, 0)"
    ),
    "os_spawnv": "import os; os.spawnv(os.P_WAIT, '/usr/bin/touch', ['touch', '{marker}'])",
    "os_fork": (
        "import os\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    open('{marker}', 'w').close(); os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
    ),
    "pty_fork": (
        "import os, pty\n"
        "pid, fd = pty.fork()\n"
        "if pid == 0:\n"
        "    os.execv('/usr/bin/touch', ['touch', '{marker}'])\n"
        "os.waitpid(pid, 0)\n"
    ),
    "asyncio_subprocess": (
        "import asyncio\n"
        "async def main():\n"
        "    p = await asyncio.create_subprocess_exec('touch', '{marker}')\n"
        "    await p.wait()\n"
        "asyncio.run(main())\n"
    ),
    "multiprocessing_spawn": (
        "import multiprocessing, work\n"
        "if __name__ == '__main__':\n"
        "    multiprocessing.set_start_method('spawn')\n"
        "    p = multiprocessing.Process(target=work.touch, args=('{marker}',))\n"
        "    p.start(); p.join()\n"
    ),
    "posixsubprocess_reimported": (
        "import sys, subprocess\n"
        "del sys.modules['_posixsubprocess']\n"
        "import _posixsubprocess\n"
        "subprocess._fork_exec = _posixsubprocess.fork_exec\n"
        "subprocess.run(['touch', '{marker}'])\n"
    ),
    "ctypes_libc_system": "import ctypes; ctypes.CDLL(None).system(b'touch {marker}')",
    "ctypes_load_library": "import ctypes; ctypes.CDLL('libc.so.6').system(b'touch {marker}')",
    "pickle_reduce": ("import pickle; pickle.loads(b\"cos\\nsystem\\n(S'touch {marker}'\\ntR.\")"),
}


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    return outside / "escaped"


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_cant_run_outside_the_python_layer(
    sb: Runner, py: Runner, project: Path, marker: Path, probe: str
) -> None:
    (project / ".py-sandboxes").write_text("expose-ro=.\n")
    (project / "work.py").write_text("def touch(path):\n    open(path, 'w').close()\n")
    (project / "probe.py").write_text(PROBES[probe].format(marker=marker))
    if probe != "posixsubprocess_reimported":  # plain python needs no reimport: same probe
        py("probe.py", timeout=60)
        assert marker.exists(), f"the probe {probe} does nothing under plain python"
        marker.unlink()
    result = sb("probe.py", timeout=60)
    assert "RuleApiPermissionError" in result.stderr, result.stdout + result.stderr
    assert "python-api=ALLOW:" in result.stderr
    assert not marker.exists()


def test_cant_signal_another_process(sb: Runner, py: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text("expose-ro=.\n")
    victims = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]
    try:
        code = f"import os, sys; os.kill(int(sys.argv[1]), {int(signal.SIGTERM)})"
        py("-c", code, str(victims[0].pid))
        assert victims[0].wait(timeout=10) == -signal.SIGTERM
        result = sb("-c", code, str(victims[1].pid))
        assert "os.kill() is denied by the API guard (category: process-control)" in result.stderr
        assert victims[1].poll() is None, "the victim died"
    finally:
        for victim in victims:
            victim.kill()
            victim.wait()


def test_cant_read_memory_through_ctypes(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text("expose-ro=.\n")
    code = "import ctypes; print(ctypes.string_at(id(1), 16))"
    result = sb("-c", code)
    assert "ctypes.string_at() is denied by the API guard (category: native)" in result.stderr


def test_cant_create_a_subinterpreter(sb: Runner, py: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text("expose-ro=.\n")
    module = pytest.importorskip("_xxsubinterpreters", reason="no subinterpreters module")
    code = f"import {module.__name__} as s; s.destroy(s.create()); print('CREATED')"
    assert "CREATED" in py("-c", code).stdout
    result = sb("-c", code)
    assert "CREATED" not in result.stdout
    # CPython turns the hook's refusal inside interpreter creation into this error.
    assert "RuntimeError: interpreter creation failed" in result.stderr, result.stderr
    rules = "expose-ro=.\npython-api=ALLOW:_xxsubinterpreters.create\n"
    (project / ".py-sandboxes").write_text(rules)
    assert "CREATED" in sb("-c", code).stdout, "the refusal was not the guard's"


def test_a_grant_allows_the_whole_family(sb: Runner, project: Path, marker: Path) -> None:
    """Granting subprocess.run must not be undone by the Popen that run makes."""
    (project / ".py-sandboxes").write_text("expose-ro=.\npython-api=ALLOW:subprocess.run\n")
    result = sb("-c", PROBES["subprocess_run"].format(marker=marker))
    assert result.returncode == 0, result.stderr
    assert marker.exists()


def test_everyday_code_keeps_working(sb: Runner, project: Path) -> None:
    """ctypes imports, plain data unpickles, a program may signal itself."""
    (project / ".py-sandboxes").write_text("expose-ro=.\n")
    code = (
        "import ctypes, pickle, os, signal\n"
        "signal.signal(signal.SIGUSR1, lambda *a: print('SIGNALLED'))\n"
        "os.kill(os.getpid(), signal.SIGUSR1)\n"
        "print(pickle.loads(pickle.dumps({'a': [1, 2.0, None]})))\n"
    )
    result = sb("-c", code)
    assert result.stdout.splitlines() == ["SIGNALLED", "{'a': [1, 2.0, None]}"], result.stderr


def test_a_deny_naming_the_function_wins_over_its_category(
    sb: Runner, project: Path, marker: Path
) -> None:
    rules = "expose-ro=.\npython-api=ALLOW:process-exec\npython-api=DENY:os.system\n"
    (project / ".py-sandboxes").write_text(rules)
    result = sb("-c", PROBES["os_system"].format(marker=marker))
    expected = "os.system() is denied by 'python-api=DENY:os.system' from .py-sandboxes(3)"
    assert expected in result.stderr, result.stderr
    assert "Remove that line to allow it." in result.stderr
    assert not marker.exists()
    result = sb("-c", PROBES["subprocess_run"].format(marker=marker))
    assert marker.exists(), result.stderr
