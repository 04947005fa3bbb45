"""Dynamic code: what installed libraries generate for their own work is theirs; a string
the program chose stays the program's, whichever library it is handed to.

pydantic evaluates the annotations of the models it builds (``typing.ForwardRef``
compiles each one, and annotations such as ``Annotated[int, Field(gt=0)]`` call), mpmath
compiles the operators it generates through its own alias of ``exec``, attrs and
dataclasses generate methods, and the MCP SDK defines its protocol with pydantic models.
None of that needs a ``dynamic-code`` grant. The line: an annotation counts as the
library's work only when its text is written in a source file on the stack (the
library's, or the program's own class being defined) and an installed package asked for
it; text made at run time (read, received, built from parts) is the program's, and a
refusal raised inside a library names the library's frame and the program's line that led
there.
"""

from __future__ import annotations

import pytest
from escapelab import Lab, got

LIBRARIES = """
from __future__ import annotations
import asyncio, dataclasses, typing
from typing import Annotated
import attrs, sympy
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field, TypeAdapter, field_validator

@dataclasses.dataclass(frozen=True, order=True)
class Point:
    x: int
    y: list[int] = dataclasses.field(default_factory=list)

@attrs.define
class Pair:
    a: int
    b: str = 'b'

class Order(BaseModel):
    count: Annotated[int, Field(gt=0)]
    name: str = 'n'
    child: Order | None = None

    @field_validator('name')
    @classmethod
    def upper(cls, value: str) -> str:
        return value.upper()

server = MCPServer('calculator')

@server.tool()
def add(a: int, b: int) -> int:
    '''Add two numbers.'''
    return a + b

result = asyncio.run(server.call_tool('add', {'a': 2, 'b': 3}))
print('BUILT', Point(1), Pair(1), Order(count=2, name='x'), result.structured_content,
      TypeAdapter('Annotated[int, Field(ge=0)]').validate_python(4),
      typing.get_type_hints(Point)['y'], sympy.Rational(1, 3) + 1)
"""


def test_library_generated_code_runs_without_a_grant(lab: Lab) -> None:
    expected = (
        "BUILT Point(x=1, y=[]) Pair(a=1, b='b') count=2 name='X' child=None "
        "{'result': 5} 4 list[int] 4/3"
    )
    assert got(lab.control(LIBRARIES, mode="script"), expected)
    result = lab.run_sandboxed(LIBRARIES, mode="script")
    assert got(result, expected), result.stdout + result.stderr


# A string built at run time (here from parts, as one read or received would be).
MADE = "TEXT = \"print('DONE', 'ran-' + 'from-string') or \" + sys.argv[0][:0] + 'int'\n"

HANDED = {
    "pydantic_type_adapter": "import pydantic\npydantic.TypeAdapter(TEXT).validate_python(1)",
    "pydantic_create_model": "import pydantic\npydantic.create_model('M', x=(TEXT, 1))",
    "pydantic_model_annotation": (
        "import pydantic\n"
        "pydantic.BaseModel.__class__('M', (pydantic.BaseModel,), "
        "{'__annotations__': {'x': TEXT}, '__module__': __name__})"
    ),
    "typing_get_type_hints": (
        "import types, typing\n"
        "typing.get_type_hints(types.SimpleNamespace(__annotations__={'x': TEXT}))"
    ),
    "timeit": "import timeit\ntimeit.timeit(TEXT, number=1)",
    "code_interpreter": "import code\ncode.InteractiveInterpreter().runsource(TEXT)",
    "runpy_run_path": (
        "import runpy\n"
        "with open(OUT + '/made.py', 'w') as made:\n"
        "    made.write(TEXT)\n"
        "runpy.run_path(OUT + '/made.py')"
    ),
}


@pytest.mark.parametrize("api", sorted(HANDED))
def test_cant_run_a_string_of_the_program_through_a_library(lab: Lab, api: str) -> None:
    code = lab.probe(MADE + HANDED[api] + "\n")
    assert got(lab.control(code), "DONE ran-from-string")
    result = lab.refused(code, "RuleApiPermissionError", watch=lambda: None)
    assert "Add 'python-api=ALLOW:dynamic-code' to .py-sandboxes" in result.stdout


def test_a_refusal_in_a_library_names_its_frame_and_the_program_line(lab: Lab) -> None:
    code = lab.probe(MADE + "import pydantic\npydantic.TypeAdapter(TEXT)\n")
    result = lab.run_sandboxed(code, mode="script")
    line = code.splitlines().index("    pydantic.TypeAdapter(TEXT)") + 1
    assert "It was compiled by " in result.stdout, result.stdout + result.stderr
    assert "typing.py:" in result.stdout
    assert "(ForwardRef.__init__)" in result.stdout
    assert f"for the program's line {lab.project / 'app.py'}:{line}." in result.stdout
