"""Learning a program of the scientific stack or of the MCP SDK grants no native code and
no dynamic code: what those libraries do for themselves is theirs.

pytest imports ``readline`` inside ``try``/``except ImportError``: under the rules that
import is refused and pytest goes on, so learning does not grant it either.

numpy, scipy, sympy and pandas import ctypes for the sizes of C types (the stand-in
ctypes has them, without a ``native`` grant); pydantic evaluates the annotations written
in its own and its users' files, mpmath compiles the operators it generates, and the MCP
SDK defines its protocol with pydantic models. The first run learns, the second enforces
what was learned, with the same output.
"""

from __future__ import annotations

from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

SCIENCE = """\
import numpy, scipy.integrate, sympy, pandas
x = sympy.Symbol("x")
frame = pandas.DataFrame({"a": numpy.arange(4)})
print(sympy.integrate(x**2, (x, 0, 3)), round(scipy.integrate.quad(lambda t: t, 0, 2)[0], 6),
      int(frame.a.sum()), sympy.sqrt(8))
"""

MCP = """\
from __future__ import annotations

import asyncio
import dataclasses
from typing import Annotated

import attrs
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field, field_validator


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: list[int] = dataclasses.field(default_factory=list)


@attrs.define
class Pair:
    a: int
    b: str = "b"


class Order(BaseModel):
    count: Annotated[int, Field(gt=0)]
    name: str = "n"
    child: Order | None = None

    @field_validator("name")
    @classmethod
    def upper(cls, value: str) -> str:
        return value.upper()


server = MCPServer("calculator")


@server.tool()
def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b


result = asyncio.run(server.call_tool("add", {"a": 2, "b": 3}))
print(Point(1), Pair(1), Order(count=2, name="x"), result.structured_content)
"""

GRANTS = ("python-api=ALLOW:native", "dynamic-code", "builtins.compile", "builtins.e")


def _learn_then_enforce(sb: Runner, project: Path, program: str) -> str:
    (project / "app.py").write_text(program)
    first = sb("app.py", timeout=240)
    assert first.returncode == 0, first.stderr
    rules = (project / ".py-sandboxes").read_text()
    active = [line for line in rules.splitlines() if line and not line.startswith("#")]
    granted = [line for line in active if any(grant in line for grant in GRANTS)]
    assert granted == [], "\n".join(active)
    second = sb("app.py", timeout=240)
    assert second.returncode == 0, second.stderr + "\n".join(active)
    assert second.stdout == first.stdout
    return second.stdout


def test_learning_the_scientific_stack_grants_no_native_code(sb: Runner, project: Path) -> None:
    assert _learn_then_enforce(sb, project, SCIENCE) == "9 2.0 6 2*sqrt(2)\n"


def test_learning_a_pytest_run_grants_no_native_code(sb: Runner, project: Path) -> None:
    # pytest imports readline inside try/except ImportError: under the rules it falls
    # back, so the import is not learned as a native grant.
    (project / "test_sum.py").write_text(
        "import numpy\n\ndef test_sum():\n    assert numpy.arange(3).sum() == 3\n"
    )
    command = ("-m", "pytest", "-q", "-p", "no:cacheprovider", "test_sum.py")
    first = sb(*command, timeout=240)
    assert first.returncode == 0, first.stdout + first.stderr
    rules = (project / ".py-sandboxes").read_text()
    active = [line for line in rules.splitlines() if line and not line.startswith("#")]
    assert not [line for line in active if "ALLOW:native" in line], "\n".join(active)
    second = sb(*command, timeout=240)
    assert second.returncode == 0, second.stdout + second.stderr + "\n".join(active)
    assert "1 passed" in second.stdout


def test_learning_an_mcp_server_grants_no_dynamic_code(sb: Runner, project: Path) -> None:
    output = _learn_then_enforce(sb, project, MCP)
    assert output == (
        "Point(x=1, y=[]) Pair(a=1, b='b') count=2 name='X' child=None {'result': 5}\n"
    )
