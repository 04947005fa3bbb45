"""Cost of a guarded ``eval`` against plain ``eval``: ``python benchmarks/evaluation.py``.

Prints one table: a small expression (``2 + 3 * x``) and a calculator call
(``sqrt(x) + max(x, 2)``), each under plain ``eval`` of the string (which parses it every
time), plain ``eval`` of code compiled once, and ``guarded_eval`` (the check and the
rewrite are cached by source: a repeated source costs the namespace and the budgets
only); then the first, uncached, guarded evaluation of a fresh source. Target (design
brief): guarded eval of a small expression <= 3x plain eval.
"""

from __future__ import annotations

import math
import timeit

from pysandboxes import guarded_eval

RULES = "eval-syntax=arith, compare, Call\neval-call=sqrt, max"
NAMES: dict[str, object] = {"x": 7, "sqrt": math.sqrt, "max": max}


def best(stmt: object, number: int = 20_000, repeat: int = 5) -> float:
    """Best time of one call, in seconds."""
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number  # type: ignore[arg-type]


def main() -> None:
    print(f"{'source':28} {'plain eval':>11} {'plain code':>11} {'guarded':>9} {'ratio':>6}")
    for source in ("2 + 3 * x", "sqrt(x) + max(x, 2)"):
        code = compile(source, "<bench>", "eval")
        plain = best(lambda s=source: eval(s, dict(NAMES)))
        precompiled = best(lambda c=code: eval(c, dict(NAMES)))
        guarded = best(lambda s=source: guarded_eval(s, names=NAMES, rules=RULES))
        print(
            f"{source:28} {plain * 1e6:9.2f}us {precompiled * 1e6:9.2f}us "
            f"{guarded * 1e6:7.2f}us {guarded / plain:5.2f}x"
        )
    counter = iter(range(10**9))
    fresh = best(
        lambda: guarded_eval(f"2 + 3 * x + {next(counter)}", names=NAMES, rules=RULES), 2_000
    )
    print(f"{'first evaluation of a source':28} {'':>11} {'':>11} {fresh * 1e6:7.2f}us")


if __name__ == "__main__":
    main()
