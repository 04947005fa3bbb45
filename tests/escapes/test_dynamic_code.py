"""Attack class 7: code made from strings at run time.

Without ``python-api=ALLOW:dynamic-code`` the program's ``eval``/``exec``/``compile`` and
hand-built code objects are refused (``RuleApiPermissionError``); with it they work; the
standard library's own use (``namedtuple``, ``dataclasses``) is never charged.
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
