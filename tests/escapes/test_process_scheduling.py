"""Other processes: their scheduling policy.

``os.setpriority`` and ``os.sched_setaffinity`` of another process were refused (judged
copies stand in, CPython reports neither), but their siblings ``os.sched_setscheduler``
and ``os.sched_setparam``, listed as ``process-control`` too, were not watched at all: a
program put another process of the same user under ``SCHED_IDLE``, where it runs only
when nothing else wants the processor. Judged copies stand in for them now; a program
may still change its own.

The rules say ``os-sandbox=subprocess``: the Python layer alone is under test.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

RULES = "expose-ro=.\npython-import=*\nos-sandbox=subprocess\n"
IDLE = "import os, sys\nos.sched_setscheduler(int(sys.argv[1]), os.SCHED_IDLE, os.sched_param(0))\n"


@pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="no scheduling calls")
def test_cant_change_the_scheduling_policy_of_another_process(
    sb: Runner, py: Runner, project: Path, victims: list[subprocess.Popen[bytes]]
) -> None:
    (project / ".py-sandboxes").write_text(RULES)
    control = py("-c", IDLE, str(victims[0].pid))
    assert os.sched_getscheduler(victims[0].pid) == os.SCHED_IDLE, control.stderr
    before = os.sched_getscheduler(victims[1].pid)
    result = sb("-c", IDLE, str(victims[1].pid))
    assert "is denied by the API guard" in result.stderr, result.stderr
    assert os.sched_getscheduler(victims[1].pid) == before


@pytest.mark.skipif(not hasattr(os, "sched_setparam"), reason="no scheduling calls")
def test_cant_set_the_scheduling_parameters_of_another_process(
    sb: Runner, project: Path, victims: list[subprocess.Popen[bytes]]
) -> None:
    (project / ".py-sandboxes").write_text(RULES)
    code = "import os, sys\nos.sched_setparam(int(sys.argv[1]), os.sched_param(0))\n"
    result = sb("-c", code, str(victims[1].pid))
    assert "os.sched_setparam() is denied by the API guard" in result.stderr, result.stderr


@pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="no scheduling calls")
def test_a_program_may_change_its_own_scheduling(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text(RULES)
    code = (
        "import os\n"
        "os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))\n"
        "os.sched_setparam(os.getpid(), os.sched_param(0))\n"
        "print(os.sched_getscheduler(0) == os.SCHED_BATCH)\n"
    )
    result = sb("-c", code)
    assert result.stdout == "True\n", result.stderr
