"""Subinterpreters: code run in a new interpreter of the same process.

The audit hook, the guards and the patched modules belong to the interpreter they were
installed in; a new interpreter has none of them. Reported: with
``python-import=_interpreters`` (3.13's name), a subinterpreter imported what no rule
allows and read a file hidden by ``ignore=``; on 3.12, refusing the creation event crashed
the program (SIGSEGV). The modules that create interpreters (``_xxsubinterpreters`` on
3.11 and 3.12, ``_interpreters`` from 3.13, CPython's C-API test modules) are now refused
at import unless a rule names a subinterpreter function, and learning never names one.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

#: This version's module, and how it runs a string in a new interpreter.
if importlib.util.find_spec("_interpreters") is not None:  # 3.13 and later
    MODULE, RUN = "_interpreters", "s.exec(i, {code!r})"
else:
    MODULE, RUN = "_xxsubinterpreters", "s.run_string(i, {code!r})"

INNER = "import json; open('out/leak', 'w').write(open('secret.txt').read())"
PROBE = f"import {MODULE} as s\ni = s.create()\n{RUN.format(code=INNER)}\nprint('RAN')\n"


@pytest.fixture
def files(project: Path) -> Path:
    (project / "secret.txt").write_text("the secret")
    (project / "out").mkdir()
    return project / "out" / "leak"


def test_a_subinterpreter_cant_read_what_ignore_hides(
    sb: Runner, py: Runner, project: Path, files: Path
) -> None:
    py("-c", PROBE)
    assert files.read_text() == "the secret", "the control failed"
    files.unlink()
    rules = f"expose-ro=.\nexpose-rw=./out\nignore=secret.txt\npython-import={MODULE}\n"
    (project / ".py-sandboxes").write_text(rules)
    result = sb("-c", PROBE)
    assert result.returncode == 1
    assert "RAN" not in result.stdout
    assert f"RuleModuleNotFoundError: Importing {MODULE} is denied by the API guard" in (
        result.stderr
    )
    assert f"'python-api=ALLOW:{MODULE}.create'" in result.stderr
    assert not files.exists()


def test_a_c_api_test_module_cant_start_a_subinterpreter(
    sb: Runner, py: Runner, project: Path, files: Path
) -> None:
    pytest.importorskip("_testcapi", reason="this build has no C-API test module")
    code = f"import _testcapi\n_testcapi.run_in_subinterp({INNER!r})\nprint('RAN')\n"
    py("-c", code)
    assert files.read_text() == "the secret", "the control failed"
    files.unlink()
    rules = "expose-ro=.\nexpose-rw=./out\nignore=secret.txt\npython-import=*\n"
    (project / ".py-sandboxes").write_text(rules)
    result = sb("-c", code)
    assert "RAN" not in result.stdout
    assert "Importing _testcapi is denied by the API guard (category: native)" in result.stderr
    assert not files.exists()


def test_a_grant_lets_the_program_start_one(sb: Runner, project: Path, files: Path) -> None:
    """Named by a rule, a subinterpreter runs (on 3.12 too, where a refused creation
    crashed the interpreter)."""
    rules = f"expose-ro=.\nexpose-rw=./out\npython-api=ALLOW:{MODULE}.create\npython-import=*\n"
    (project / ".py-sandboxes").write_text(rules)
    result = sb("-c", PROBE)
    assert result.returncode == 0, result.stderr
    assert "RAN" in result.stdout
    assert files.read_text() == "the secret"


def test_learning_never_grants_a_subinterpreter(sb: Runner, project: Path, files: Path) -> None:
    (project / "app.py").write_text(PROBE)
    result = sb("--learn", "app.py")
    assert "RAN" not in result.stdout
    assert f"Importing {MODULE} is denied by the API guard" in result.stderr
    assert not files.exists()
    text = (project / ".py-sandboxes").read_text()
    rules = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert f"python-import={MODULE}  # learned: imported by app.py:1" in rules
    assert not [rule for rule in rules if rule.startswith("python-api=")], rules
