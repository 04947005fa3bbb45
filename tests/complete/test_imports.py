"""Imports: ``python-import=`` judged on every route a program can ask for a module by.

Each probe asks for ``csv`` (which no rule allows) one way, then prints whether the module
was loaded. Under plain python it loads; under python-sb the request is refused with
RuleModuleNotFoundError and ``csv`` never reaches ``sys.modules``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

#: Modules the probes themselves need: their imports are not what is tested.
BASE_RULES = "expose-ro=.\npython-import=importlib, pkgutil, os, tempfile\n"

PROBES = {
    "import_statement": "import csv",
    "dunder_import": "__import__('csv')",
    "import_module": "import importlib; importlib.import_module('csv')",
    "pkgutil_resolve_name": "import pkgutil; pkgutil.resolve_name('csv:reader')",
    "spec_from_file_location": (
        "import importlib.util, os\n"
        "path = os.path.join(os.path.dirname(os.__file__), 'csv.py')\n"
        "spec = importlib.util.spec_from_file_location('csv', path)\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "sys.modules['csv'] = module\n"
    ),
    "stdlib_file_under_allowed_name": (
        "import importlib.util, os\n"
        "path = os.path.join(os.path.dirname(os.__file__), 'csv.py')\n"
        "spec = importlib.util.spec_from_file_location('json', path)\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "sys.modules['csv'] = module\n"
    ),
    "finder_removed": (
        "import importlib\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if 'Rules' not in type(f).__name__]\n"
        "importlib.import_module('csv')\n"
    ),
    "meta_path_replaced": (
        "sys.meta_path = [f for f in sys.meta_path if 'Rules' not in type(f).__name__]\n"
        "import csv\n"
    ),
    "entry_point_load": (
        "import importlib.metadata as m\nm.EntryPoint(name='x', value='wave', group='g').load()\n"
    ),
    "resources_files": "import importlib.resources as r\nr.files('wave')\n",
    "loader_on_a_bare_module": (
        "import json, os\n"
        "loader = type(json.__loader__)\n"
        "module = type(sys)('json')\n"
        "loader('json', os.path.join(os.path.dirname(os.__file__), 'csv.py')).exec_module(module)\n"
        "sys.modules['csv'] = module\n"
    ),
    "file_claiming_a_library_path": (
        # A file of the program, named through a path that starts like a library's.
        "import json, os\n"
        "import tempfile\n"
        "private = tempfile.gettempdir()\n"
        "open(private + '/x.py', 'w').write('import csv\\n')\n"
        "claimed = os.path.dirname(json.__file__) + '/..' * 12 + private + '/x.py'\n"
        "loader = type(json.__loader__)\n"
        "loader('json', claimed).exec_module(type(sys)('json'))\n"
    ),
    "builtins_import_replaced": (
        "import builtins, importlib\nbuiltins.__import__ = importlib.__import__\nimport csv\n"
    ),
}


def probe(body: str, module: str = "csv") -> str:
    """``body`` in a ``try``; then whether ``module`` was loaded."""
    inner = textwrap.indent(body.strip("\n"), "    ")
    return (
        "import sys\n"
        "try:\n"
        f"{inner}\n"
        "except Exception as exc:\n"
        "    print('REFUSED', type(exc).__name__, exc)\n"
        f"print('LOADED', {module!r} in sys.modules)\n"
    )


#: Routes that ask for ``wave``: the module behind them imports csv for itself.
ASKS_FOR_WAVE = ("entry_point_load", "resources_files")


@pytest.mark.parametrize("route", sorted(PROBES))
def test_cant_import_an_unlisted_module(sb: Runner, py: Runner, project: Path, route: str) -> None:
    module = "wave" if route in ASKS_FOR_WAVE else "csv"
    code = probe(PROBES[route], module)
    control = py("-c", code)
    assert "LOADED True" in control.stdout, control.stdout + control.stderr
    (project / ".py-sandboxes").write_text(BASE_RULES + "python-import=json\n")
    result = sb("-c", code)
    assert "REFUSED RuleModuleNotFoundError" in result.stdout, result.stdout + result.stderr
    assert "LOADED False" in result.stdout, result.stdout + result.stderr
    assert f"Add 'python-import={module}' to .py-sandboxes to allow it." in result.stdout


def test_the_allowed_route_works(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text(BASE_RULES + "python-import=csv\n")
    for route in ("import_statement", "import_module", "spec_from_file_location"):
        result = sb("-c", probe(PROBES[route]))
        assert "LOADED True" in result.stdout, route + result.stdout + result.stderr
        assert "REFUSED" not in result.stdout


@pytest.mark.parametrize("module", ["signal", "_socket", "re", "pathlib"])
def test_cant_import_a_module_the_sandbox_loaded_first(
    sb: Runner, py: Runner, project: Path, module: str
) -> None:
    # The sandbox itself loads these before the program: being in sys.modules is no pass.
    code = probe(f"import {module}; print('GOT', {module}.__name__)", module)
    assert f"GOT {module}" in py("-c", code).stdout
    (project / ".py-sandboxes").write_text(BASE_RULES)
    result = sb("-c", code)
    assert f"GOT {module}" not in result.stdout, result.stdout
    assert f"Add 'python-import={module}' to .py-sandboxes" in result.stdout, result.stdout


def test_cant_reimport_after_removing_from_sys_modules(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text(BASE_RULES)
    code = probe("sys.modules.pop('signal', None)\nimport signal\nprint('GOT')", "signal")
    result = sb("-c", code)
    assert "REFUSED RuleModuleNotFoundError" in result.stdout, result.stdout + result.stderr
    assert "GOT" not in result.stdout


def test_the_programs_own_modules_need_a_rule(sb: Runner, py: Runner, project: Path) -> None:
    (project / "helper.py").write_text("print('HELPER RAN')\n")
    assert "HELPER RAN" in py("-c", "import helper").stdout
    (project / ".py-sandboxes").write_text(BASE_RULES)
    for args in (("-c", "import helper"), ("-m", "helper")):
        result = sb(*args)
        assert "HELPER RAN" not in result.stdout, args
        assert "Add 'python-import=helper' to .py-sandboxes" in result.stderr, result.stderr
    (project / ".py-sandboxes").write_text(BASE_RULES + "python-import=helper\n")
    assert "HELPER RAN" in sb("-m", "helper").stdout


def test_a_missing_module_is_the_ordinary_error(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text(BASE_RULES)
    result = sb("-c", probe("import no_such_module_here", "no_such_module_here"))
    assert "REFUSED ModuleNotFoundError No module named 'no_such_module_here'" in result.stdout


def test_import_error_fallbacks_still_work(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text(BASE_RULES)
    code = "try:\n    import csv\nexcept ImportError:\n    print('FALLBACK')\n"
    assert sb("-c", code).stdout == "FALLBACK\n"


def test_what_an_allowed_module_imports_needs_no_rule(sb: Runner, project: Path) -> None:
    # json loads re, codecs...; rich (installed with python-sb) loads its own dependencies.
    (project / ".py-sandboxes").write_text("expose-ro=.\npython-import=json, rich\n")
    code = (
        "import json, rich.text\n"
        "print(json.dumps({'a': 1}), rich.text.Text('hi').plain)\n"
        "import sys; print('re' in sys.modules)\n"
    )
    result = sb("-c", code)
    assert result.stdout == '{"a": 1} hi\nTrue\n', result.stdout + result.stderr


def test_kept_modules_need_no_rule(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text("expose-ro=.\npython-import=time\n")
    code = (
        "from __future__ import annotations\n"
        "import sys, warnings, builtins\n"
        "import time; print(time.strptime('2024', '%Y').tm_year)\n"
    )
    result = sb("-c", code)
    assert result.stdout == "2024\n", result.stderr


def test_a_star_allows_every_module(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text("expose-ro=.\npython-import=*\n")
    assert sb("-c", probe("import csv")).stdout == "LOADED True\n"


def test_an_import_right_is_not_a_call_right(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text("expose-ro=.\npython-import=os\n")
    result = sb("-c", "import os; os.system('true')")
    assert "RuleApiPermissionError" in result.stderr, result.stderr


def test_a_kept_package_does_not_open_its_submodules(sb: Runner, project: Path) -> None:
    # asyncio may be imported without a rule, as in pysandboxes 0.7.0; asyncio.subprocess
    # needs python-import=asyncio.
    (project / ".py-sandboxes").write_text(BASE_RULES)
    code = probe("import asyncio\nimport asyncio.subprocess", "asyncio.subprocess")
    result = sb("-c", code)
    assert "REFUSED RuleModuleNotFoundError" in result.stdout, result.stdout + result.stderr
    assert "Add 'python-import=asyncio'" in result.stdout
    (project / ".py-sandboxes").write_text(BASE_RULES + "python-import=asyncio\n")
    assert "LOADED True" in sb("-c", code).stdout


def test_cant_import_a_loaded_module_from_c_with_no_frame_at_all(
    sb: Runner, py: Runner, project: Path
) -> None:
    """At exit (or in a thread) C code may run with no Python frame on the stack, as
    CPython's own prompt does; only the prompt's own import (linecache) passes there."""
    code = (
        "import atexit, collections\n"
        "got = collections.deque()\n"
        "atexit.register(lambda: print('GOT', sorted(m.__name__ for m in got)))\n"
        "atexit.register(got.extend, map(__import__, ['re']))\n"
    )
    assert "GOT ['re']" in py("-c", code).stdout
    (project / ".py-sandboxes").write_text("expose-ro=.\npython-import=atexit, collections\n")
    result = sb("-c", code)
    assert "GOT []" in result.stdout, result.stdout + result.stderr
    assert "Add 'python-import=re' to .py-sandboxes" in result.stderr
