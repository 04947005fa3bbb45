"""calculate, a tool of server.py: it runs in the sandboxed child of the "calculator"
profile, under the rules of calculator.py-sandboxes (no network, no file)."""

import ast
import math
import operator
from fractions import Fraction

from pysandboxes import sandbox


class ToolError(Exception):
    """A mistake in the expression: sandboxed_tool reports an exception of a class of this
    name as a tool error with its message, for the model to read and correct."""


@sandbox(profile="calculator", timeout=2)
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression exactly, with fractions.

    Numbers, + - * / // % **, parentheses and the functions sqrt, floor, ceil, gcd and
    factorial. Example: "1/3 + 1/6" gives "1/2"."""
    try:
        return str(_value(ast.parse(expression, mode="eval").body))
    except (SyntaxError, ValueError, ArithmeticError) as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from None


_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCTIONS = {
    "sqrt": math.sqrt,
    "floor": math.floor,
    "ceil": math.ceil,
    "gcd": math.gcd,
    "factorial": math.factorial,
}


def _value(node: ast.expr) -> Fraction | float | int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_value(node.left), _value(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _value(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        function = _FUNCTIONS.get(node.func.id)
        if function is not None and not node.keywords:
            arguments = [_value(argument) for argument in node.args]
            return function(*[int(a) if a == int(a) else a for a in arguments])
    raise ValueError(f"not arithmetic: {ast.unparse(node)!r}")
