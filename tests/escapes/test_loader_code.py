"""Dynamic code: a loader's ``get_code`` called by the program itself.

The import system's compiling of a module file is the interpreter's, and running the
code is then judged as an import. ``runpy.run_path`` of a file the program wrote is
refused as its compile; but a genuine ``SourceFileLoader(...).get_code()`` or
``zipimporter(...).get_code()`` called by the program handed it the code of a file it
wrote, to ``exec`` as it liked, and ``zipimporter.load_module`` ran it under any name,
judged neither as dynamic code nor as an import. Now the compiling is ambient only when
the import system (a loader's ``exec_module``, ``runpy`` finding a module by name) asked
for the code. Each probe prints RAN when the written code runs; plain python shows it.

The rules say ``os-sandbox=subprocess``: the Python layer alone is under test.
"""

from __future__ import annotations

import textwrap

import pytest
from escapelab import Lab

RULES = ("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess")

WRITE_ZIP = """
import zipfile
path = OUT + '/mine.zip'
with zipfile.ZipFile(path, 'w') as archive:
    archive.writestr('mine.py', "print('RAN')\\n")
import zipimport
importer = zipimport.zipimporter(path)
"""

PROBES = {
    "source_loader_get_code": """
        from importlib.machinery import SourceFileLoader
        with open(OUT + '/mine.py', 'w') as source:
            source.write("print('RAN')\\n")
        exec(SourceFileLoader('mine', OUT + '/mine.py').get_code('mine'))
    """,
    "zipimporter_get_code": WRITE_ZIP + "exec(importer.get_code('mine'))\n",
    "zipimporter_load_module": WRITE_ZIP
    + "import warnings\nwarnings.simplefilter('ignore')\nimporter.load_module('mine')\n",
}


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_cant_run_a_written_file_through_a_loader(lab: Lab, probe: str) -> None:
    lab.rules(*RULES)
    code = lab.probe(textwrap.dedent(PROBES[probe]) + "print('DONE')\n")
    assert "RAN" in lab.control(code).stdout
    result = lab.refused(code, "RuleApiPermissionError", watch=lambda: None)
    assert "RAN" not in result.stdout


def test_imports_of_written_modules_still_work(lab: Lab) -> None:
    lab.rules(*RULES[:2], "os-sandbox=subprocess", "python-import=mine, zipfile, importlib, os")
    code = lab.probe(
        """
        import importlib.util, zipfile
        with open(OUT + '/mine.py', 'w') as source:
            source.write("print('IMPORTED', __name__)\\n")
        spec = importlib.util.spec_from_file_location('mine', OUT + '/mine.py')
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        sys.path.insert(0, OUT)
        import mine
        del sys.modules['mine']
        sys.path[0] = OUT + '/mine.zip'
        with zipfile.ZipFile(sys.path[0], 'w') as archive:
            archive.writestr('mine.py', "print('ZIPPED', __name__)\\n")
        import mine
        print('DONE')
        """
    )
    result = lab.run_sandboxed(code)
    output = result.stdout + result.stderr
    assert result.stdout.count("IMPORTED mine") == 2, output
    assert "ZIPPED mine" in result.stdout, output
    assert "DONE" in result.stdout, output
