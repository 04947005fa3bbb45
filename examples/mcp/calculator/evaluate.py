"""Runs the code a model writes for the calculator, limited to what calculation needs.

The code is parsed, never compiled: each statement is walked here and may name only
sympy (and its functions by their bare names), math, fractions, decimal, Fraction,
Decimal, and numpy and scipy where installed; no name or attribute starting with `_`,
no import, no definition, no loop. That keeps generated code to calculation; the wall
is the sandbox all the same (python-sb server.py): whatever the code reaches through
those modules' attributes gets only the rights of .py-sandboxes, which are none of
files, network or processes.
"""

import ast
import decimal
import fractions
import math
import operator
from decimal import Decimal
from fractions import Fraction

import sympy

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.MatMult: operator.matmul,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


class CalculationError(Exception):
    """The code is not calculation (a name, a statement or a syntax it may not use)."""


def namespace() -> dict[str, object]:
    """The names generated code may use."""
    names: dict[str, object] = {name: getattr(sympy, name) for name in sympy.__all__}
    names.update(
        sympy=sympy,
        math=math,
        fractions=fractions,
        decimal=decimal,
        Fraction=Fraction,
        Decimal=Decimal,
        abs=abs,
        min=min,
        max=max,
        round=round,
        int=int,
        float=float,
        range=range,
        sum=sum,
        len=len,
    )
    for optional in ("numpy", "scipy"):
        try:
            names[optional] = __import__(optional)
        except ImportError:
            pass
    return names


def run(code: str, names: dict[str, object]) -> object:
    """Run ``code`` with ``names``; return the value of its last expression (or None)."""
    try:
        tree = ast.parse(code, mode="exec")
    except SyntaxError as exc:
        raise CalculationError(f"syntax error: {exc.msg} (line {exc.lineno})") from None
    result: object = None
    for statement in tree.body:
        if isinstance(statement, ast.Expr):
            result = _eval(statement.value, names)
        elif isinstance(statement, ast.Assign):
            value = _eval(statement.value, names)
            for target in statement.targets:
                _assign(target, value, names)
            result = None
        else:
            raise CalculationError(f"not a calculation: {ast.unparse(statement)!r}")
    return result


def _assign(target: ast.expr, value: object, names: dict[str, object]) -> None:
    if isinstance(target, ast.Name) and not target.id.startswith("_"):
        names[target.id] = value
    elif isinstance(target, ast.Tuple | ast.List):
        values = list(value)  # type: ignore[call-overload]
        if len(values) != len(target.elts):
            raise CalculationError(f"{len(values)} values for {len(target.elts)} names")
        for element, item in zip(target.elts, values, strict=True):
            _assign(element, item, names)
    else:
        raise CalculationError(f"cannot assign to {ast.unparse(target)!r}")


def _eval(node: ast.expr, names: dict[str, object]) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id.startswith("_") or node.id not in names:
            raise CalculationError(f"unknown name {node.id!r}")
        return names[node.id]
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("_"):
            raise CalculationError(f"the attribute {node.attr!r} is not for calculations")
        return getattr(_eval(node.value, names), node.attr)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_eval(node.left, names), _eval(node.right, names))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, names))
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        left = _eval(node.left, names)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _eval(right_node, names)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Call) and not any(isinstance(a, ast.Starred) for a in node.args):
        function = _eval(node.func, names)
        arguments = [_eval(argument, names) for argument in node.args]
        keywords = {k.arg: _eval(k.value, names) for k in node.keywords if k.arg is not None}
        if len(keywords) != len(node.keywords):
            raise CalculationError("**keywords are not for calculations")
        return function(*arguments, **keywords)  # type: ignore[operator]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        items = [_eval(element, names) for element in node.elts]
        return {ast.Tuple: tuple, ast.List: list, ast.Set: set}[type(node)](items)
    if isinstance(node, ast.Dict) and None not in node.keys:
        pairs = zip(node.keys, node.values, strict=True)
        return {_eval(k, names): _eval(v, names) for k, v in pairs}  # type: ignore[arg-type]
    if isinstance(node, ast.Subscript):
        return _eval(node.value, names)[_eval(node.slice, names)]  # type: ignore[index]
    if isinstance(node, ast.Slice):
        parts = (node.lower, node.upper, node.step)
        return slice(*[None if part is None else _eval(part, names) for part in parts])
    if isinstance(node, ast.IfExp):
        chosen = node.body if _eval(node.test, names) else node.orelse
        return _eval(chosen, names)
    raise CalculationError(f"not a calculation: {ast.unparse(node)!r}")
