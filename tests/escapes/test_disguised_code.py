"""Code that passes for the library's, or strings that pass for module files.

The guards trust code by the file it names: the import system's compiling of a module
file is the interpreter's, and a library's imports are its own. A program that compiles a
string under a real file's name, or names its code after a library file, must be judged as
the program. Each probe prints RAN when its string runs; plain python shows it does.
Code named like a frozen module (``<frozen json>``) may not pass for the library's either.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from escapelab import Lab, got

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

PROBES = {
    "source_to_code_under_a_real_name": (
        "import json, importlib.machinery as m\n"
        "code = m.SourceFileLoader.source_to_code(None, 'print(\"RAN\")', json.__file__)\n"
        "exec(code)\n"
    ),
    "run_path_of_a_written_file": (
        "import runpy, tempfile\n"
        "path = tempfile.gettempdir() + '/x.py'\n"
        "open(path, 'w').write('print(\"RAN\")')\n"
        "runpy.run_path(path)\n"
    ),
}
DISGUISES = {
    "compile_named_after_the_library": (
        "import json\nexec(compile('print(\"RAN\")', json.__file__, 'exec'))\n"
    ),
    "code_replace_named_after_the_library": (
        "import json\n"
        "code = compile('print(\"RAN\")', 'mine.py', 'exec').replace(co_filename=json.__file__)\n"
        "exec(code)\n"
    ),
}


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_cant_run_a_string_through_the_import_system(
    sb: Runner, py: Runner, project: Path, probe: str
) -> None:
    assert "RAN" in py("-c", PROBES[probe]).stdout
    (project / ".py-sandboxes").write_text("expose-ro=.\npython-import=*\n")
    result = sb("-c", PROBES[probe])
    assert "RAN" not in result.stdout
    assert "python-api=ALLOW:dynamic-code" in result.stderr, result.stderr


@pytest.mark.parametrize("probe", sorted(DISGUISES))
def test_cant_pass_code_for_the_librarys_even_with_dynamic_code(
    sb: Runner, py: Runner, project: Path, probe: str
) -> None:
    assert "RAN" in py("-c", DISGUISES[probe]).stdout
    rules = "expose-ro=.\npython-import=*\npython-api=ALLOW:dynamic-code\n"
    (project / ".py-sandboxes").write_text(rules)
    result = sb("-c", DISGUISES[probe])
    assert "RAN" not in result.stdout
    assert "code named after the library file" in result.stderr, result.stderr
    # The same code under its own name runs: the grant itself still works.
    assert sb("-c", "exec(compile('print(\"RAN\")', 'mine.py', 'exec'))").stdout == "RAN\n"


# -- code named like a frozen module ---------------------------------------------------

# No program code may be named after a file of the interpreter's trees, even with
# ``dynamic-code`` granted. The frozen modules' code is named ``<frozen NAME>``, which was
# not refused: code compiled as ``<frozen json>`` was taken for the standard library's,
# and the modules it imported were charged to no one (the import guard allowed
# ``import ftplib`` with only ``json`` allowed).
#
# The rules say ``os-sandbox=subprocess``: the Python layer alone is under test.

RULES = (
    "expose-ro=./data",
    "expose-rw=./out",
    "os-sandbox=subprocess",
    "python-import=json",
    "python-api=ALLOW:dynamic-code",
)


@pytest.mark.parametrize(
    "make",
    [
        "compile(SOURCE, '<frozen json>', 'exec')",
        "compile(SOURCE, b'<frozen json>', 'exec')",
        "compile(SOURCE, '<string>', 'exec').replace(co_filename='<frozen json>')",
    ],
)
def test_cant_pass_code_for_a_frozen_module(lab: Lab, make: str) -> None:
    lab.rules(*RULES)
    body = f"SOURCE = \"import getopt\\nprint('DONE', getopt.getopt)\\n\"\nexec({make}, {{}})\n"
    code = lab.probe(body, imports="sys")
    assert got(lab.control(code), "DONE")
    lab.refused(code, ("RuleApiPermissionError", "RuleModuleNotFoundError"))


def test_code_not_named_like_a_frozen_module_still_compiles(lab: Lab) -> None:
    lab.rules(*RULES)
    code = lab.probe("exec(compile(\"print('DONE')\", '<generated>', 'exec'))\n", imports="sys")
    assert got(lab.run_sandboxed(code), "DONE")
