"""Code objects built through the standard library, to pass for a library file.

The check on building code (``types.CodeType``, ``code.replace``) let any standard-library
frame through, taking it for the library rebuilding code of its own. On 3.13
``copy.replace(code, ...)`` calls ``code.__replace__`` from ``copy``; on every version
``modulefinder.ModuleFinder.replace_paths_in_code`` renames a code object's file, and a
thread pool calls ``code.replace`` for whoever submits it. A function whose ``co_filename``
was then set to ``json.__file__`` imported ``csv`` as if it were ``json``.

Now code objects are built only through the judged route, whoever calls it: the one
rebuild of the standard library's own is ``types.coroutine`` flipping a flag of a
function's code (name, file and bytecode unchanged).
"""

from __future__ import annotations

import sys

import pytest
from escapelab import Lab, got

RULES = (
    "expose-ro=./data",
    "python-import=json",
    "python-import=modulefinder",
    "python-import=copy",
    "python-import=concurrent",
    "python-import=types",
)

#: Builds ``disguised``, a code object of the program's claiming json's file, then runs it:
#: the import it makes passes for json's.
RUN = """
import json, sys, types
def body():
    import csv
{build}
types.FunctionType(disguised, {{'__builtins__': __builtins__}})()
print('LOADED', 'csv' in sys.modules)
"""

BUILDS = {
    "modulefinder": (
        "import modulefinder\n"
        "finder = modulefinder.ModuleFinder(replace_paths=[(body.__code__.co_filename, "
        "json.__file__)])\n"
        "disguised = finder.replace_paths_in_code(body.__code__)"
    ),
    "thread_pool": (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor() as pool:\n"
        "    disguised = pool.submit(body.__code__.replace, co_filename=json.__file__).result()"
    ),
    "copy_replace": (
        "import copy\ndisguised = copy.replace(body.__code__, co_filename=json.__file__)"
    ),
}


@pytest.mark.parametrize("route", list(BUILDS))
def test_cant_build_code_through_the_standard_library(lab: Lab, route: str) -> None:
    if route == "copy_replace" and sys.version_info < (3, 13):
        pytest.skip("copy.replace and code.__replace__ appeared in Python 3.13")
    lab.rules(*RULES)
    code = lab.probe(RUN.format(build=BUILDS[route]), imports="sys")
    assert got(lab.control(code), "LOADED True")
    result = lab.refused(code, "RuleApiPermissionError")
    assert "LOADED True" not in result.stdout


def test_types_coroutine_still_flips_its_flag(lab: Lab) -> None:
    lab.rules("expose-ro=./data", "python-import=types")
    code = (
        "import types\n@types.coroutine\ndef step():\n    yield 1\n"
        "print('FLAGS', bool(step.__code__.co_flags & 0x100))\n"
    )
    assert got(lab.control(code), "FLAGS True")
    result = lab.run_sandboxed(code)
    assert "FLAGS True" in result.stdout, result.stdout + result.stderr
