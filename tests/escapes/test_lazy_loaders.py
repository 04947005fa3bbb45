"""``importlib.util.LazyLoader`` and ``importlib.abc.Loader.load_module``.

The code of a module the rules do not allow is refused when the program asks for it,
looking through the import system and the functions that import what they are handed.
``LazyLoader`` was not one of them: the module it wraps is created in its
``create_module`` and run on the first attribute read (``_LazyModule.__getattribute__``),
so a hand-built spec of a standard module, or of an extension module under an allowed
name, was charged to the library and loaded. So was a loader whose methods were all
the import system's, run by the default ``importlib.abc.Loader.load_module``.

The rules say ``os-sandbox=subprocess``: the Python layer alone is under test.
"""

from __future__ import annotations

import pytest
from escapelab import Lab, got

RULES = (
    "expose-ro=./data",
    "expose-rw=./out",
    "os-sandbox=subprocess",
    "python-import=importlib",
)

LAZY = """\
import importlib.machinery, importlib.util
stdlib = sys.base_prefix + '/lib/python%d.%d/' % sys.version_info[:2]
suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
spec = importlib.util.spec_from_file_location(NAME, stdlib + FILE)
spec.loader = importlib.util.LazyLoader(spec.loader)
made = importlib.util.module_from_spec(spec)
spec.loader.exec_module(made)
print('DONE', getattr(made, ATTRIBUTE))
"""


@pytest.mark.parametrize(
    ("name", "file", "attribute"),
    [
        ("colorsys", "'colorsys.py'", "rgb_to_hsv"),
        ("importlib._csv", "'lib-dynload/_csv' + suffix", "reader"),
    ],
)
def test_cant_load_a_module_lazily(lab: Lab, name: str, file: str, attribute: str) -> None:
    lab.rules(*RULES)
    body = LAZY.replace("NAME", repr(name)).replace("FILE", file)
    body = body.replace("ATTRIBUTE", repr(attribute))
    code = lab.probe(body, imports="sys")
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RuleModuleNotFoundError")


def test_an_allowed_module_still_loads_lazily(lab: Lab) -> None:
    lab.rules(*RULES, "python-import=colorsys")
    body = LAZY.replace("NAME", "'colorsys'").replace("FILE", "'colorsys.py'")
    code = lab.probe(body.replace("ATTRIBUTE", "'rgb_to_hsv'"), imports="sys")
    assert got(lab.run_sandboxed(code), "DONE")


ABC_LOADER = """\
import importlib.abc, importlib.machinery
stdlib = sys.base_prefix + '/lib/python%d.%d/' % sys.version_info[:2]
suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
machinery = importlib.machinery.ExtensionFileLoader
class Loader(importlib.abc.Loader):
    def __init__(self, name, path):
        self.name, self.path = name, path
    create_module = machinery.create_module
    exec_module = machinery.exec_module
    get_filename = machinery.get_filename
made = Loader('_csv', stdlib + 'lib-dynload/_csv' + suffix).load_module('_csv')
print('DONE', made.reader)
"""


def test_cant_load_through_the_default_load_module(lab: Lab) -> None:
    # importlib.abc.Loader.load_module, with the import system's own methods: no frame of
    # the program between the hook and that library function.
    lab.rules(*RULES, "python-import=warnings")
    body = "import warnings\nwarnings.simplefilter('ignore')\n" + ABC_LOADER
    code = lab.probe(body, imports="sys")
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RuleModuleNotFoundError")
