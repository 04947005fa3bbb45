"""What a learning run records of evaluated sources: the constructs each one used.

While learning, the program's ``eval``/``exec``/``compile`` run under a profile that
allows every construct (the escapes no rule allows stay refused), and every source is
reported construct by construct: its ``ast`` nodes (``eval-syntax``), the names it calls
(``eval-call``), the attributes it reads (``eval-attribute``, ``eval-magic`` for dunder
names) and the modules it imports (``eval-import``). The trusted side writes the lines
(``_host/learning/evalrules``); a construct no source used stays refused next run.
"""

from __future__ import annotations

import ast
import re

from pysandboxes._inside.evaluation import runner
from pysandboxes._policy.evalkeys import DEPRECATED_NODES
from pysandboxes._policy.evaluation import FORMATTERS, EvalProfile, NameSet

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

_SKIPPED = (
    *(ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.expr_context),
    *(ast.comprehension, ast.arguments, ast.arg, ast.alias, ast.keyword, ast.withitem),
)
_children = ast.iter_child_nodes
_ANY = NameSet(FORMATTERS, re.compile(".*"))
#: Every construct, every name: what a learning run evaluates under.
LEARNING_PROFILE = EvalProfile(
    "",
    frozenset(
        name
        for name in dir(ast)
        if name not in DEPRECATED_NODES  # never parsed; reading one warns from 3.12
        and isinstance(getattr(ast, name), type)
        and issubclass(getattr(ast, name), ast.AST)
    ),
    _ANY,
    _ANY,
    _ANY,
    _ANY,
)


def constructs(tree: ast.AST) -> set[tuple[str, str]]:
    """``(key, name)`` for every construct of ``tree`` a rule must allow."""
    found: set[tuple[str, str]] = set()
    defined: set[str] = set()
    nodes: list[ast.AST] = []
    pending = [tree]
    while pending:
        node = pending.pop()
        nodes.append(node)
        pending.extend(_children(node))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
    for node in nodes:
        if not isinstance(node, _SKIPPED):
            found.add(("syntax", type(node).__name__))
        if isinstance(node, ast.Attribute):
            name = node.attr
            dunder = name.startswith("__") and name.endswith("__")
            found.add(("magic" if dunder else "attribute", name))
        elif isinstance(node, ast.Name) and node.id.startswith("__") and node.id.endswith("__"):
            found.add(("magic", node.id))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id not in defined:
                found.add(("call", node.func.id))
        elif isinstance(node, ast.Import):
            found.update(("import", alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(("import", node.module))
    return found


def learn_with(report: Callable[[str, str], None]) -> None:
    """Report the constructs of every source checked from now on."""

    def observe(profile: EvalProfile, tree: ast.AST) -> None:
        if profile is LEARNING_PROFILE:
            for key, name in sorted(constructs(tree)):
                report(key, name)

    runner.observers.append(observe)
