"""What the sandbox's start-up loads is what every short program pays for.

``python-sb -c pass`` pays the interpreter's start, the guards' modules and the kernel
layer. The guards judge without the heavy standard modules (``json``, ``threading``,
``runpy``, ``signal``'s enums, ``importlib.util``; the ``ctypes`` package: the kernel
layer calls libc through ``_ctypes``; ``pathlib`` and ``re``: the file guard reads a
path object's slot by the standard code, see ``guards/pathobjects``): a program that
wants one imports it, as under plain python. ``python-sb`` plans a run without ``re``
and ``ctypes``. The cyclic collector waits until the walls are up, then the start-up's
objects are frozen out of every later collection. Counted here, not timed:
``benchmarks/complete.py`` times it.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

# ctypes._endian: the real ctypes package (``import ctypes`` may give the stand-in).
HEAVY = ["json", "threading", "signal", "ctypes._endian", "pathlib", "re", "urllib.parse"]
if sys.version_info < (3, 13):
    # 3.13 imports its frozen modules (these two) through marshal.loads, which the guards
    # charge to the program: the start-up loads them there.
    HEAVY += ["runpy", "importlib.util", "contextlib"]
PROBE = (
    "import sys, gc\n"
    f"loaded = [name for name in {HEAVY!r} if name in sys.modules]\n"
    "print(repr((loaded, gc.isenabled(), gc.get_freeze_count())))\n"
)


def probe(result: subprocess.CompletedProcess[str]) -> tuple[list[str], bool, int]:
    assert result.returncode == 0, result.stderr
    loaded, enabled, frozen = ast.literal_eval(result.stdout.strip())
    return loaded, enabled, frozen


def test_the_start_up_loads_no_heavy_standard_module(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text("python-import=gc\n")
    plain = probe(subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True))
    assert plain[:2] == ([], True)
    for provider in ("subprocess", "landlock"):
        loaded, enabled, frozen = probe(sb(f"--os-sandbox={provider}", "-c", PROBE))
        assert (loaded, enabled) == ([], True), provider
        assert frozen > plain[2] + 1000, "the start-up's objects are not frozen"


def test_a_module_the_program_runs_with_dash_m_still_runs(sb: Runner, project: Path) -> None:
    # runpy is loaded for -m only, before the guards.
    (project / ".py-sandboxes").write_text("expose-ro=.\npython-import=json,tool\n")
    (project / "tool.py").write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    result = sb("-m", "tool", "a", "b")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["a", "b"]


#: Planning a run: reading the rules and compiling the launch, as python-sb does first.
PLAN_PROBE = """
import os, sys
from pysandboxes._host.launchplan import LaunchRequest, build_spec
from pysandboxes._wire.spec import Program
build_spec(LaunchRequest(program=Program("command", "pass", ())), os.getcwd(), os.environ, None)
heavy = ("re", "ctypes", "json", "threading", "encodings.idna")
print([name for name in heavy if name in sys.modules])
"""


def test_planning_a_run_loads_no_heavy_standard_module(project: Path) -> None:
    (project / ".py-sandboxes").write_text(
        "expose-ro=.\nnet=ALLOW|tcp|127.0.0.1|8000|OUT\nnet=ALLOW|tcp|localhost|8001|OUT\n"
        "python-import=json\nenv=HOME=${HOME}\nos-sandbox=landlock\n"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", PLAN_PROBE], capture_output=True, text=True, cwd=project
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
