"""Round two, dynamic code: strings run through the modules whose compiling is "ambient".

The dynamic-code guard decides on the file of the frame that calls ``compile``/``exec``;
the modules of ``_GENERATING`` (``importlib``, ``inspect``, ``runpy``, ``dataclasses``...)
and every installed package are never charged. Each of these probes hands such a module a
string of the program, and the string runs. ``exec`` of a ready code object is not judged
at all, so a code object compiled by an ambient caller runs too.
"""

from __future__ import annotations

import pytest
from escapelab import Lab, got

RAN = "print('DONE', 'ran-' + 'from-string')"

LAUNDERERS = {
    # public API: compile() called from importlib/abc.py
    "importlib_source_to_code": (
        f"import importlib.abc\nexec(importlib.abc.InspectLoader.source_to_code({RAN!r}))"
    ),
    # public API: eval() of string annotations, called from inspect.py
    "inspect_get_annotations": (
        f"import inspect\ndef f(x: {RAN!r}): pass\ninspect.get_annotations(f, eval_str=True)"
    ),
    "inspect_signature": (
        f"import inspect\ndef f(x: {RAN!r}): pass\ninspect.signature(f, eval_str=True)"
    ),
    # exec() called from runpy.py
    "runpy_run_code": f"import runpy\nrunpy._run_code({RAN!r}, {{}})",
    # exec() called from the frozen import system
    "importlib_frames_removed": (
        f"import importlib._bootstrap as b\nb._call_with_frames_removed(exec, {RAN!r}, {{}})"
    ),
    # a field name is pasted into the source dataclasses compiles (only make_dataclass
    # checks names): `(self.x,print(...),)==(other.x,print(...),)`
    "dataclass_field_name": (
        "import dataclasses\n"
        "C = type('C', (), {'__annotations__': "
        "{\"x,print('DONE', 'ran-' + 'from-string')\": int}})\n"
        "D = dataclasses.dataclass(init=False, repr=False)(C)\n"
        "o = D()\n"
        "o.x = 1\n"
        "o == o"
    ),
}


DOCUMENTED = pytest.mark.xfail(
    strict=True,
    reason="documented in docs/security.md: dataclasses paste field names into the code "
    "they generate; the eval-* sub-language (a later release) is the answer",
)


@pytest.mark.parametrize(
    "api",
    [pytest.param(a, marks=DOCUMENTED) if a == "dataclass_field_name" else a for a in LAUNDERERS],
)
def test_cant_run_code_from_strings_through_ambient_stdlib(lab: Lab, api: str) -> None:
    code = lab.probe(LAUNDERERS[api])
    assert got(lab.control(code), "DONE ran-from-string")
    lab.refused(code, "RuleApiPermissionError")


@pytest.mark.xfail(
    strict=True,
    reason="documented in docs/security.md: installed packages are ambient, and one that "
    "runs strings it is given runs the program's",
)
def test_cant_run_code_from_strings_through_installed_package(lab: Lab) -> None:
    # Any installed package is ambient: hypothesis (a test dependency of this venv) runs
    # the program's string as a module.
    pytest.importorskip("hypothesis")
    code = lab.probe(
        f"from hypothesis.internal.reflection import source_exec_as_module\n"
        f"source_exec_as_module({RAN!r})"
    )
    assert got(lab.control(code), "DONE ran-from-string")
    lab.refused(code, "RuleApiPermissionError")
