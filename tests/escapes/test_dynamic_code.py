"""Attack class 7: code made from strings at run time.

Without ``python-api=ALLOW:dynamic-code`` the program's ``eval``/``exec``/``compile`` and
hand-built code objects are refused (``RuleApiPermissionError``); with it they work; the
standard library's own use (``namedtuple``, ``dataclasses``) is never charged, and the
program's strings handed to it are.
"""

from __future__ import annotations

import marshal

import pytest
from escapelab import Lab, got

RAN = "print('DONE', 'ran-' + 'from-string')"

DYNAMIC = {
    "eval": f"eval({RAN!r})",
    "exec": f"exec({RAN!r})",
    "compile": f"exec(compile({RAN!r}, 'x', 'exec'))",
    "compile_bytes": f"exec(compile({RAN.encode()!r}, 'x', 'exec'))",
    "builtins_module": f"import builtins\nbuiltins.exec({RAN!r})",
    "eval_in_function": f"def f():\n    return eval({RAN!r})\nf()",
    "code_replace": (
        "def f():\n    return 'no'\n"
        "f.__code__ = f.__code__.replace(co_consts=(None, 'DONE ran-from-string'))\n"
        "print(f())"
    ),
    "code_type": (
        "import types\n"
        "c = (lambda: 'DONE ran-from-string').__code__\n"
        "print(types.FunctionType(types.CodeType(c.co_argcount, c.co_posonlyargcount,\n"
        "    c.co_kwonlyargcount, c.co_nlocals, c.co_stacksize, c.co_flags, c.co_code,\n"
        "    c.co_consts, c.co_names, c.co_varnames, c.co_filename, c.co_name,\n"
        "    c.co_qualname, c.co_firstlineno, c.co_linetable, c.co_exceptiontable), {})())"
    ),
}


@pytest.mark.parametrize("api", list(DYNAMIC))
def test_cant_run_code_from_strings_without_grant(lab: Lab, api: str) -> None:
    code = lab.probe(DYNAMIC[api])
    assert got(lab.control(code), "DONE ran-from-string")
    lab.refused(code, "RuleApiPermissionError")


@pytest.mark.parametrize("api", list(DYNAMIC))
def test_code_from_strings_runs_with_grant(lab: Lab, api: str) -> None:
    lab.rules("expose-ro=./data", "python-api=ALLOW:dynamic-code")
    result = lab.run_sandboxed(lab.probe(DYNAMIC[api]))
    assert got(result, "DONE ran-from-string"), result.stdout + result.stderr


def test_stdlib_dynamic_code_still_works_under_default_rules(lab: Lab) -> None:
    code = lab.probe(
        """
        import collections, dataclasses, json, pathlib, typing
        Point = collections.namedtuple('Point', 'x y')
        @dataclasses.dataclass(frozen=True)
        class Item:
            name: str
            size: int = 0
        print('OK', Point(1, 2).y, Item('a', 3), json.dumps({'a': 1}))
        """
    )
    result = lab.run_sandboxed(code)
    assert "OK 2 Item(name='a', size=3)" in result.stdout, result.stdout + result.stderr


@pytest.mark.parametrize("mode", ["script", "module"])
def test_cant_eval_in_own_script_without_grant(lab: Lab, mode: str) -> None:
    # The script's directory (sys.path[0]; the cwd for -m) must not count as "the
    # interpreter's own files", whose compile() calls are never charged. (-m must be able
    # to find app.py: it is exposed, alone.)
    lab.rules("expose-ro=./data", "expose-ro=./app.py")
    code = lab.probe(DYNAMIC["eval"])
    assert got(lab.control(code, mode=mode), "DONE ran-from-string")
    lab.refused(code, "RuleApiPermissionError", mode=mode)


STDLIB_COMPILERS = {
    "timeit": f"import timeit\ntimeit.timeit({RAN!r}, number=1)",
    "codeop": f"import codeop\nexec(codeop.compile_command({RAN!r}))",
    "code_interpreter": f"import code\ncode.InteractiveInterpreter().runsource({RAN!r})",
    "typing_forward_ref": (
        "import typing\n"
        "def f(x: \"print('DONE', 'ran-' + 'from-string') or int\"): pass\n"
        "typing.get_type_hints(f)"
    ),
}


@pytest.mark.parametrize("api", list(STDLIB_COMPILERS))
def test_cant_run_code_from_strings_through_stdlib_compilers(lab: Lab, api: str) -> None:
    # The stdlib compiles what the program hands it: the string is the program's.
    code = lab.probe(STDLIB_COMPILERS[api])
    assert got(lab.control(code), "DONE ran-from-string")
    lab.refused(code, "RuleApiPermissionError")


def test_cant_run_code_from_bytes_with_marshal(lab: Lab) -> None:
    blob = marshal.dumps(compile(RAN, "blob", "exec"))
    code = lab.probe(f"import marshal\nexec(marshal.loads({blob!r}))")
    assert got(lab.control(code), "DONE ran-from-string")
    lab.refused(code, "RuleApiPermissionError")


# -- strings run through the modules whose compiling is ambient ------------------------

# The dynamic-code guard decides on the file of the frame that calls ``compile``/``exec``;
# the modules of ``_GENERATING`` (``importlib``, ``inspect``, ``runpy``, ``dataclasses``...)
# and every installed package are never charged. Each of these probes hands such a module
# a string of the program, and the string runs. ``exec`` of a ready code object is not
# judged at all, so a code object compiled by an ambient caller runs too.

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
    # checks names): `(self.x,print(...),)==(other.x,print(...),)`; two instances, since
    # 3.13's __eq__ returns at once for an object compared with itself
    "dataclass_field_name": (
        "import dataclasses\n"
        "C = type('C', (), {'__annotations__': "
        "{\"x,print('DONE', 'ran-' + 'from-string')\": int}})\n"
        "D = dataclasses.dataclass(init=False, repr=False)(C)\n"
        "a, b = D(), D()\n"
        "a.x = b.x = 1\n"
        "a == b"
    ),
    # the same through a str subclass whose __format__ chooses the text pasted
    "dataclass_field_name_format": (
        "import dataclasses\n"
        "class Name(str):\n"
        "    def __format__(self, spec):\n"
        "        return \"x,print('DONE', 'ran-' + 'from-string')\"\n"
        "C = type('C', (), {'__annotations__': {Name('x'): int}})\n"
        "D = dataclasses.dataclass(init=False, repr=False)(C)\n"
        "a, b = D(), D()\n"
        "a.x = b.x = 1\n"
        "a == b"
    ),
}


@pytest.mark.parametrize("api", list(LAUNDERERS))
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
