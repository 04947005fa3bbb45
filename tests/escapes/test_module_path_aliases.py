"""A module judged by a file named another way than the guard knew it.

The import guard judges a module made from a spec by its name and by the file it comes
from, so that ``spec_from_file_location("json", ".../ftplib.py")`` is an ``ftplib``
import. The file was recognised by its text only: ``//<stdlib>/...`` (which
``os.path.normpath`` keeps), ``/proc/self/root/<stdlib>/...`` or a symlink to it named
no module, so an extension module no rule allows was made under an allowed package's
name (``json._csv``), and a standard module's source ran under an allowed name. The file
is now judged where the kernel opens it.

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
    "python-import=importlib",
)

PREFIXES = ["/", "/proc/self/root"]

EXTENSION = """\
import importlib.machinery, importlib.util
suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
dynload = sys.base_prefix + '/lib/python%d.%d/lib-dynload/' % sys.version_info[:2]
spec = importlib.util.spec_from_file_location('json._csv', PATH + dynload + '_csv' + suffix)
made = importlib.util.module_from_spec(spec)
print('DONE', made.reader)
"""

SOURCE = """\
import importlib.machinery, importlib.util
stdlib = sys.base_prefix + '/lib/python%d.%d/' % sys.version_info[:2]
spec = importlib.util.spec_from_file_location('json', PATH + stdlib + 'colorsys.py')
made = importlib.util.module_from_spec(spec)
spec.loader.exec_module(made)
print('DONE', made.rgb_to_hsv)
"""


@pytest.mark.parametrize("prefix", PREFIXES)
def test_cant_make_an_extension_module_under_another_path(lab: Lab, prefix: str) -> None:
    lab.rules(*RULES)
    code = lab.probe(f"PATH = {prefix!r}\n" + EXTENSION, imports="sys")
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RuleModuleNotFoundError")


@pytest.mark.parametrize("prefix", PREFIXES)
def test_cant_run_a_standard_module_under_another_path(lab: Lab, prefix: str) -> None:
    lab.rules(*RULES)
    code = lab.probe(f"PATH = {prefix!r}\n" + SOURCE, imports="sys")
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RuleModuleNotFoundError")


def test_cant_make_an_extension_module_through_a_link(lab: Lab) -> None:
    lab.rules(*RULES, "python-import=os")
    body = (
        "import importlib.machinery, importlib.util\n"
        "suffix = importlib.machinery.EXTENSION_SUFFIXES[0]\n"
        "dynload = sys.base_prefix + '/lib/python%d.%d/lib-dynload/' % sys.version_info[:2]\n"
        "link = OUT + '/_csv' + suffix\n"
        "os.symlink(dynload + '_csv' + suffix, link)\n"
        "try:\n"
        "    spec = importlib.util.spec_from_file_location('json._csv', link)\n"
        "    made = importlib.util.module_from_spec(spec)\n"
        "finally:\n"
        "    os.remove(link)\n"
        "print('DONE', made.reader)\n"
    )
    code = lab.probe(body)
    assert got(lab.control(code), "DONE")
    # Making the link is allowed (out/ is writable): only the outside must not change.
    lab.refused(code, "RuleModuleNotFoundError", watch=lambda: lab.state()["outside"])
