"""A calculator profile: numbers, arithmetic, comparisons and ``math`` functions.

200 legitimate expressions give under ``guarded_eval`` exactly what plain ``eval`` gives
(the same value, or the same exception class).
"""

from __future__ import annotations

import math
import random

import pytest

from pysandboxes import EvalSyntaxRejected, guarded_eval

FUNCTIONS = ("sqrt", "sin", "cos", "tan", "log", "exp", "floor", "ceil", "fabs", "hypot")
CALCULATOR = "\n".join(
    [
        "eval-syntax:calc=arith, compare, conditional, Call",
        f"eval-call:calc=abs, round, min, max, {', '.join(FUNCTIONS)}",
        "eval-namespace:calc=closed",
        "eval-max-alloc:calc=1MB",
    ]
)
NAMES: dict[str, object] = {name: getattr(math, name) for name in FUNCTIONS}
NAMES.update(pi=math.pi, e=math.e)


def _expressions(count: int) -> list[str]:
    pick = random.Random(19)
    numbers = ["0", "1", "2", "3.5", "-4", "10", "0.25", "pi", "e", "1e3", "7"]
    binary = ["+", "-", "*", "/", "//", "%", "**"]
    compare = ["<", "<=", "==", "!=", ">", ">="]

    def term(depth: int) -> str:
        if depth == 0 or pick.random() < 0.3:
            return pick.choice(numbers)
        shape = pick.randrange(5)
        if shape == 0:
            return f"{pick.choice(FUNCTIONS[:2] + FUNCTIONS[4:])}(abs({term(depth - 1)}) + 1)"
        if shape == 1:
            return f"round({term(depth - 1)}, 3)"
        if shape == 2:
            return f"max({term(depth - 1)}, {term(depth - 1)})"
        op = pick.choice(binary)
        right = pick.choice(["2", "3", "0.5"]) if op == "**" else term(depth - 1)
        return f"({term(depth - 1)} {op} {right})"

    found: list[str] = []
    while len(found) < count:
        kind = pick.randrange(4)
        if kind == 0:
            found.append(f"{term(2)} {pick.choice(compare)} {term(2)}")
        elif kind == 1:
            found.append(f"{term(2)} if {term(1)} > {term(1)} else {term(2)}")
        else:
            found.append(term(3))
    return found


def _outcome(run: object) -> object:
    try:
        return ("value", run())  # type: ignore[operator]
    except ArithmeticError as exc:
        return ("error", type(exc).__name__)
    except ValueError as exc:
        return ("error", type(exc).__name__)


def test_calculator_profile_gives_what_plain_eval_gives_for_200_expressions() -> None:
    expressions = _expressions(200)
    assert len(set(expressions)) > 150
    for source in expressions:
        plain = _outcome(
            lambda s=source: eval(
                s, {"__builtins__": {}, "abs": abs, "round": round, "max": max, "min": min, **NAMES}
            )
        )
        guarded = _outcome(
            lambda s=source: guarded_eval(s, profile="calc", names=NAMES, rules=CALCULATOR)
        )
        assert guarded == plain or (
            isinstance(plain[1], float) and math.isnan(plain[1]) and math.isnan(guarded[1])  # type: ignore[index,arg-type]
        ), source


@pytest.mark.parametrize("source", ["__import__('os')", "x.real", "[n for n in (1,)]", "lambda: 1"])
def test_calculator_profile_refuses_anything_else(source: str) -> None:
    with pytest.raises(EvalSyntaxRejected):
        guarded_eval(source, profile="calc", names={"x": 1}, rules=CALCULATOR)
