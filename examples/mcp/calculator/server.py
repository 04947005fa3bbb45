"""A calculator MCP server for models: exact and symbolic computation by code they write.

Launched by the client as `python-sb server.py` (complete mode): the whole server runs
under .py-sandboxes, which grants the imports it computes with and nothing else: no
file outside its own, no network, no process. The code a model sends runs in
evaluate.py's walker, limited to sympy, math, fractions and decimal (numpy and scipy
where installed).
"""

import evaluate
from mcp.server.mcpserver import MCPServer

from pysandboxes.mcp import sandboxed_tool

server = MCPServer("calculator")
NAMES = evaluate.namespace()


class ToolError(Exception):
    """A mistake in the code, reported to the model as the tool's error."""


@sandboxed_tool(server, timeout=20)
def compute(code: str) -> str:
    """Run Python calculation code and return the value of its last line.

    The code may use sympy (its functions by bare name too: symbols, integrate, solve,
    simplify, factor, Rational...), math, fractions.Fraction and decimal.Decimal, numpy
    and scipy where installed; assignments and expressions only. Results are exact:
    "Fraction(1, 3) + Fraction(1, 6)" gives 1/2, "x = symbols('x'); integrate(x**2, x)"
    gives x**3/3."""
    try:
        return str(evaluate.run(code, dict(NAMES)))
    except evaluate.CalculationError as exc:
        raise ToolError(str(exc)) from None
    except (ArithmeticError, ValueError, TypeError, AttributeError) as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from None


@sandboxed_tool(server)
def exact_fraction(numerator: int, denominator: int) -> str:
    """The fraction numerator/denominator in lowest terms, and its decimal expansion to
    50 significant digits."""
    import decimal
    from fractions import Fraction

    value = Fraction(numerator, denominator)
    with decimal.localcontext() as context:
        context.prec = 50
        expansion = decimal.Decimal(value.numerator) / decimal.Decimal(value.denominator)
    return f"{value} = {expansion}"


if __name__ == "__main__":
    server.run()
