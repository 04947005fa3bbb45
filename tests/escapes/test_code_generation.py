"""Dynamic code: the standard library's code generation, lent to the program.

``exec`` is a C function: called by a Python function of the standard library, it looks
called by that library. The dynamic-code guard let whole modules compile (``functools``,
``ast``, ``site``...), so any of their functions that calls what it is handed ran the
program's string: ``functools.singledispatch(exec)``, a ``NodeVisitor`` whose
``visit_str`` is ``exec``, and ``site.addsitedir`` of a directory holding a ``.pth``
file the program wrote. Now only the functions that generate code count, and only for
source of the shape they generate (a ``.pth`` line only when the file is the
interpreter's own), ``ast.parse`` only when the flags it hands ``compile`` ask for a
tree, ``dataclasses``' code only while ``@dataclass`` builds a class. Each probe prints
RAN when its string runs; plain python shows it.

The rules say ``os-sandbox=subprocess``: the Python layer alone is under test.
"""

from __future__ import annotations

import textwrap

import pytest
from escapelab import Lab, got

RULES = ("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess")

PROBES = {
    "singledispatch": """
        import functools
        functools.singledispatch(exec)("print('RAN')")
    """,
    "node_visitor": """
        import ast
        visitor = ast.NodeVisitor()
        visitor.visit_str = exec
        visitor.visit("print('RAN')")
    """,
    "pth_file": """
        import site, tempfile
        folder = tempfile.mkdtemp()
        with open(folder + '/mine.pth', 'w') as pth:
            pth.write("import sys; print('RAN')\\n")
        site.addsitedir(folder)
    """,
    # ast.parse reads its tree flag from ast's globals at each call.
    "ast_flag_cleared": """
        import ast
        ast.PyCF_ONLY_AST = 0
        exec(ast.parse("print('RAN')"))
    """,
    # dataclasses' code maker called by the program itself, with any body (3.13 builds
    # every method at once, in _FuncBuilder).
    "dataclasses_body": """
        import dataclasses
        if hasattr(dataclasses, '_create_fn'):
            dataclasses._create_fn('f', [], ["print('RAN')"], globals={})()
        else:
            class C:
                pass
            builder = dataclasses._FuncBuilder({})
            builder.add_fn('f', [], ["  print('RAN')"])
            builder.add_fns_to_class(C)
            C.f()
    """,
}


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_cant_run_a_string_through_a_generating_module(lab: Lab, probe: str) -> None:
    lab.rules(*RULES)
    code = lab.probe(textwrap.dedent(PROBES[probe]) + "print('DONE')\n")
    assert "RAN" in lab.control(code).stdout
    result = lab.run_sandboxed(code)
    output = result.stdout + result.stderr
    assert "RAN" not in result.stdout, output
    assert "RuleApiPermissionError" in output, output


def test_generated_code_still_works(lab: Lab) -> None:
    lab.rules(*RULES)
    code = lab.probe(
        """
        import collections, dataclasses, rlcompleter
        from unittest import mock
        Point = collections.namedtuple('Point', 'x y', defaults=[0])
        @dataclasses.dataclass
        class Item:
            name: str
            count: int = 0
        def f(a, b=2):
            return a
        mocked = mock.create_autospec(f)
        mocked(1)
        completer = rlcompleter.Completer({'sys': sys})
        print('DONE', Point(1), Item('a'), completer.complete('sys.versio', 0))
        """
    )
    result = lab.run_sandboxed(code)
    assert "DONE Point(x=1, y=0) Item(name='a', count=0) sys.version" in result.stdout, (
        result.stdout + result.stderr
    )


def test_ast_parse_still_parses(lab: Lab) -> None:
    lab.rules(*RULES)
    code = lab.probe(
        """
        import ast
        tree = ast.parse("x = 1", type_comments=True)
        print('PARSED', type(tree).__name__, ast.literal_eval('[1, 2]'))
        """
    )
    assert got(lab.run_sandboxed(code), "PARSED Module [1, 2]")


def test_dataclasses_still_work(lab: Lab) -> None:
    lab.rules(*RULES)
    code = lab.probe(
        """
        import dataclasses
        @dataclasses.dataclass(frozen=True, order=True)
        class P:
            a: int
            b: str = 'x'
        made = dataclasses.make_dataclass('D', [('x', int)])
        print('MADE', P(1), P(1) < P(2), made(3))
        """
    )
    assert got(lab.run_sandboxed(code), "MADE P(a=1, b='x') True D(x=3)")
