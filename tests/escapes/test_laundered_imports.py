"""Standard-library functions that import what they are handed.

An import is charged to the code that asks, and the functions that import a name or a
file they are handed are looked through, so that the import is charged to their caller.
``imp.load_dynamic`` (any extension module by file), ``imp.init_builtin`` (from 3.12,
which removed ``imp``: the loaders ``ExtensionFileLoader`` and ``BuiltinImporter``),
``pydoc.importfile`` and ``unittest``'s loader (``loadTestsFromName``, discovery) were
not listed: the import was charged to them, a library, and allowed. The program, allowed
``imp``, ``pydoc`` or ``unittest`` only, loaded any module.

The rules say ``os-sandbox=subprocess``: the Python layer alone is under test.
"""

from __future__ import annotations

import sys
import textwrap

import pytest
from escapelab import Lab, got

RULES = (
    "expose-ro=./data",
    "expose-rw=./out",
    "os-sandbox=subprocess",
    "python-import=imp",
    "python-import=importlib",
    "python-import=pydoc",
    "python-import=unittest",
    "python-import=warnings",
    "python-import=pickle",
    "python-import=optparse",
    "python-import=doctest",
)

if sys.version_info < (3, 12):
    LOAD_DYNAMIC = "import imp; imp.load_dynamic('_csv', stdlib + 'lib-dynload/_csv' + suffix)"
    INIT_BUILTIN = "import imp; imp.init_builtin('_tracemalloc')"
else:  # imp is gone: the loaders its documentation sends programs to
    LOAD_DYNAMIC = (
        "import importlib.machinery as m; "
        "m.ExtensionFileLoader('_csv', stdlib + 'lib-dynload/_csv' + suffix).load_module()"
    )
    INIT_BUILTIN = "import importlib.machinery as m; m.BuiltinImporter.load_module('_tracemalloc')"

SETUP = """\
import warnings
warnings.simplefilter('ignore')
stdlib = sys.base_prefix + '/lib/python%d.%d/' % sys.version_info[:2]
suffix = sys.modules['_frozen_importlib_external'].EXTENSION_SUFFIXES[0]
"""


@pytest.mark.parametrize(
    ("call", "module"),
    [
        (LOAD_DYNAMIC, "_csv"),
        (INIT_BUILTIN, "_tracemalloc"),
        ("import pydoc; pydoc.importfile(stdlib + 'colorsys.py')", "colorsys"),
        ("import unittest; unittest.defaultTestLoader.loadTestsFromName('colorsys')", "colorsys"),
        (
            "import unittest; unittest.defaultTestLoader.discover("
            "stdlib, pattern='colorsys.py', top_level_dir=stdlib)",
            "colorsys",
        ),
        # They name __import__ in their own code, with a name their caller hands them.
        (
            "import pickle; pickle._dumps(type('X', (), {'__module__': 'colorsys'}))",
            "colorsys",
        ),
        ("import optparse; optparse.Values().read_module('colorsys')", "colorsys"),
        ("import doctest; doctest._normalize_module('colorsys')", "colorsys"),
    ],
)
def test_cant_import_through_a_library_that_imports_what_it_is_handed(
    lab: Lab, call: str, module: str
) -> None:
    lab.rules(*RULES)
    body = SETUP + (
        f"try:\n    {call}\nexcept Exception as exc:\n    print('REFUSED', type(exc).__name__)\n"
        f"print('DONE' if {module!r} in sys.modules else 'NOT LOADED')\n"
    )
    code = lab.probe(body, imports="sys")
    assert got(lab.control(code), "DONE")
    result = lab.run_sandboxed(code)
    assert "NOT LOADED" in result.stdout, result.stdout + result.stderr
    assert "DONE" not in result.stdout


# A library's own __import__ of a name its code does not fix: dbm imports the names of
# dbm._names, sysconfig the one the environment names. The program chooses them.
CHOSEN = {
    "dbm": "import dbm\ndbm._names = [{module!r}]\ndbm._defaultmod = None\ndbm.open('out/x', 'n')",
    "sysconfig": (
        "os.environ['_PYTHON_SYSCONFIGDATA_NAME'] = {module!r}\n"
        "import sysconfig\nsysconfig._CONFIG_VARS = None\nsysconfig.get_config_vars()"
    ),
}


@pytest.mark.parametrize("library", list(CHOSEN))
def test_cant_import_a_name_chosen_for_a_library_that_imports_it_itself(
    lab: Lab, library: str
) -> None:
    lab.rules(*RULES, "python-import=dbm", "python-import=sysconfig", "python-import=os")
    call = textwrap.indent(CHOSEN[library].format(module="colorsys"), "    ")
    body = SETUP + (
        f"try:\n{call}\nexcept Exception as exc:\n    print('REFUSED', type(exc).__name__)\n"
        "print('DONE' if 'colorsys' in sys.modules else 'NOT LOADED')\n"
    )
    code = lab.probe(body, imports="os, sys")
    assert got(lab.control(code), "DONE")
    result = lab.run_sandboxed(code)
    assert "NOT LOADED" in result.stdout, result.stdout + result.stderr
    assert "DONE" not in result.stdout


def test_cant_get_the_sandboxs_private_modules_through_a_library_that_imports_them(
    lab: Lab,
) -> None:
    lab.rules(*RULES, "python-import=dbm", "python-import=os")
    call = CHOSEN["dbm"].format(module="pysandboxes._inside.listings")
    code = lab.probe(f"{call}\n", imports="os, sys") + "print('GOT', dbm._defaultmod)\n"
    # Plain python finds the package in the test's venv too: dbm keeps the module it loaded.
    assert got(lab.control(code), "GOT <module 'pysandboxes._inside.listings'")
    result = lab.run_sandboxed(code)
    assert "GOT None" in result.stdout, result.stdout + result.stderr
    assert "import pysandboxes._inside.listings" in result.stderr, result.stderr


def test_a_library_still_imports_the_names_its_code_fixes(lab: Lab) -> None:
    lab.rules(*RULES, "python-import=dbm", "python-import=sysconfig", "python-import=codecs")
    code = (
        "import codecs, dbm, sysconfig\n"
        "print(len(sysconfig.get_config_vars()) > 10, codecs.lookup('koi8_r').name)\n"
        "d = dbm.open('out/db', 'n'); d['a'] = 'b'; d.close(); print('DONE')\n"
    )
    result = lab.run_sandboxed(code)
    assert "True koi8-r\nDONE" in result.stdout, result.stdout + result.stderr
