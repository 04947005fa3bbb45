"""The sandbox's own modules used as tools by the program.

``from pysandboxes import _runner`` needed no rule (the whole ``pysandboxes`` package was
kept), and the runner's ``compile_program(obj)`` with ``obj.kind = "command"`` compiled
any string the program chose: any frame under site-packages counted as an installed
package's code, the sandbox's own included. The runner is within reach whatever the
import rules say: it sits under the program's first frame.

Now the sandbox's modules other than ``pysandboxes`` and ``pysandboxes.errors`` are out of
``sys.modules`` and refused to the program by the import guard, whatever the rules; and
frames of the sandbox's own files lend no trust to anyone: they act for their caller.
"""

from __future__ import annotations

import pytest
from escapelab import Lab, got

#: Compiles and runs a string through the runner: the one under the program's first
#: frame (under python-sb), else the module itself (plain python).
THROUGH_THE_RUNNER = """
frame, runner = sys._getframe(), None
while frame is not None and runner is None:
    if 'compile_program' in frame.f_globals:
        runner = frame.f_globals
    frame = frame.f_back
if runner is None:
    from pysandboxes._inside import runner as module
    runner = vars(module)
class program:
    kind, target = 'command', "print('RAN')"
exec(runner['compile_program'](program))
print('DONE')
"""


@pytest.mark.parametrize(
    "rules",
    [("python-import=*",), ("python-import=pysandboxes",), ("python-import=sys",)],
    ids=["any_module", "pysandboxes_allowed", "sys_only"],
)
def test_cant_compile_a_string_through_the_runner(lab: Lab, rules: tuple[str, ...]) -> None:
    lab.rules("expose-ro=./data", "expose-rw=./out", *rules)
    code = lab.probe(THROUGH_THE_RUNNER, imports="sys")
    assert got(lab.control(code), "RAN")
    result = lab.refused(code, "RuleApiPermissionError")
    assert "RAN" not in result.stdout


@pytest.mark.parametrize(
    "module",
    [
        "pysandboxes._inside.runner",
        "pysandboxes._inside.guards.filewraps",
        "pysandboxes._policy.judge",
        "pysandboxes._mode",
    ],
)
def test_cant_import_the_sandboxs_own_modules(lab: Lab, module: str) -> None:
    lab.rules("expose-ro=./data", "python-import=pysandboxes", "python-import=importlib")
    code = lab.probe(f"importlib.import_module({module!r})\nprint('DONE')", imports="importlib")
    assert got(lab.control(code), "DONE")
    result = lab.refused(code, "RuleModuleNotFoundError")
    assert "the sandbox's own code" in result.stdout


def test_the_public_modules_stay_importable(lab: Lab) -> None:
    lab.rules("expose-ro=./data", "python-import=sys")
    code = (
        "import pysandboxes, pysandboxes.errors\n"
        "from pysandboxes import is_in_sandbox, sandbox_denials\n"
        "import sys\n"
        "own = sorted(n for n in sys.modules if n.startswith('pysandboxes.'))\n"
        "print('IN', is_in_sandbox(), own)\n"
    )
    result = lab.run_sandboxed(code)
    assert "IN True ['pysandboxes._mode', 'pysandboxes._record', 'pysandboxes._version', " in (
        result.stdout
    ), result.stdout + result.stderr
    assert "'pysandboxes.errors']" in result.stdout


# The sandbox's own frames, found under the program's, lend no trust: the import
# statements of the runner's session are the sandbox's only when run by its frames alone.
THROUGH_THE_SESSION = """
import sys
frame, runner = sys._getframe(), None
while frame is not None and runner is None:
    if 'interact' in frame.f_globals and 'compile_program' in frame.f_globals:
        runner = frame.f_globals
    frame = frame.f_back
if runner is not None:
    try:
        runner['interact']({})
    except BaseException as exc:
        print('REFUSED', type(exc).__name__)
else:
    import pydoc
print('LOADED', 'pydoc' in sys.modules)
"""


def test_cant_import_through_the_runners_session(lab: Lab) -> None:
    lab.rules("expose-ro=./data", "python-import=sys")
    code = THROUGH_THE_SESSION
    assert got(lab.py("-c", code), "LOADED True")
    result = lab.sb("-c", code, stdin="")
    assert "LOADED False" in result.stdout, result.stdout + result.stderr


def test_cant_load_the_sandboxs_files_under_another_name(lab: Lab) -> None:
    # The import guard judges the code a module runs by the file it comes from too.
    lab.rules("expose-ro=./data", "python-import=importlib,pysandboxes,harmless")
    code = lab.probe(
        """
        import importlib.util, pysandboxes
        path = pysandboxes.__path__[0] + '/_inside/runner.py'
        spec = importlib.util.spec_from_file_location('harmless', path)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        print('DONE')
        """,
        imports="sys",
    )
    assert got(lab.control(code), "DONE")
    result = lab.refused(code, "RuleModuleNotFoundError")
    assert "pysandboxes._inside.runner" in result.stdout
