"""Round nine, program code named like a frozen module: ``<frozen json>``.

The guards trust code by the file it names, so no program code may be named after a file
of the interpreter's trees, even with ``dynamic-code`` granted. The frozen modules' code
is named ``<frozen NAME>``, which was not refused: code compiled as ``<frozen json>`` was
taken for the standard library's, and the modules it imported were charged to no one (the
import guard allowed ``import ftplib`` with only ``json`` allowed).

The rules say ``os-sandbox=subprocess``: the Python layer alone is under test.
"""

from __future__ import annotations

import pytest
from escapelab import Lab, got

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
def test_cant_pass_for_a_frozen_module(lab: Lab, make: str) -> None:
    lab.rules(*RULES)
    body = f"SOURCE = \"import getopt\\nprint('DONE', getopt.getopt)\\n\"\nexec({make}, {{}})\n"
    code = lab.probe(body, imports="sys")
    assert got(lab.control(code), "DONE")
    lab.refused(code, ("RuleApiPermissionError", "RuleModuleNotFoundError"))


def test_other_names_still_compile(lab: Lab) -> None:
    lab.rules(*RULES)
    code = lab.probe("exec(compile(\"print('DONE')\", '<generated>', 'exec'))\n", imports="sys")
    assert got(lab.run_sandboxed(code), "DONE")
