"""Round eight, dynamic code: ``ast.parse`` made to return code.

The dynamic-code guard lets ``ast.parse`` compile any string, since it asks ``compile``
for a tree, never code. But it reads the flag that asks for a tree, ``PyCF_ONLY_AST``,
from ``ast``'s globals at each call: with ``ast.PyCF_ONLY_AST = 0`` it returned a code
object, which ``exec`` ran with no ``compile`` event. ``ast.parse`` is now ambient only
when the flags it hands ``compile`` ask for a tree.

The rules say ``os-sandbox=subprocess``: the Python layer alone is under test.
"""

from __future__ import annotations

from escapelab import Lab, got

RULES = ("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess")


def test_cant_run_a_string_through_ast_parse_without_its_flag(lab: Lab) -> None:
    lab.rules(*RULES)
    code = lab.probe(
        """
        import ast
        ast.PyCF_ONLY_AST = 0
        exec(ast.parse("print('RAN')"))
        print('DONE')
        """
    )
    assert "RAN" in lab.control(code).stdout
    result = lab.run_sandboxed(code)
    output = result.stdout + result.stderr
    assert "RAN" not in result.stdout, output
    assert "RuleApiPermissionError" in output, output


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
