"""What the sandbox's start-up loads is what every short program pays for.

``python-sb -c pass`` pays the interpreter's start, the guards' modules and the kernel
layer. The guards judge without the heavy standard modules (``json``, ``threading``,
``runpy``, ``signal``'s enums, ``importlib.util``): a program that wants one imports it,
as under plain python. The cyclic collector waits until the walls are up, then the
start-up's objects are frozen out of every later collection. Counted here, not timed:
``benchmarks/complete.py`` times it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

HEAVY = ("json", "threading", "runpy", "signal", "importlib.util", "contextlib")
PROBE = (
    "import sys, gc\n"
    f"loaded = [name for name in {HEAVY!r} if name in sys.modules]\n"
    "print(repr((loaded, gc.isenabled(), gc.get_freeze_count() > 0)))\n"
)


def test_the_start_up_loads_no_heavy_standard_module(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text("python-import=gc\n")
    plain = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True)
    assert plain.stdout.strip() == "([], True, False)", plain.stderr
    for provider in ("subprocess", "landlock"):
        result = sb(f"--os-sandbox={provider}", "-c", PROBE)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "([], True, True)", (provider, result.stdout)


def test_a_module_the_program_runs_with_dash_m_still_runs(sb: Runner, project: Path) -> None:
    # runpy is loaded for -m only, before the guards.
    (project / ".py-sandboxes").write_text("expose-ro=.\npython-import=json,tool\n")
    (project / "tool.py").write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    result = sb("-m", "tool", "a", "b")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["a", "b"]
