"""The checked tree, rewritten so that the budgets see what it does.

Calls go through ``__sb_call`` (call depth, iteration of what builtins consume, the
arguments of the builtins that reach attributes or format fields); ``for`` loops and
comprehensions iterate through ``__sb_iter``, and so do the unpackings CPython runs in C
(``[*x]``, ``f(*x)``, ``a, *b = x``); ``while`` bodies tick ``__sb_tick``; the
operators that can build huge values (``**``, ``*``, ``<<``, ``%``) go through
``__sb_binop``, which refuses a result too large before CPython computes it; a
formatted value with a format spec goes through ``__sb_format``. The checker refuses any
name of the source containing ``__sb_``, so these names are the sandbox's only.
"""

from __future__ import annotations

import ast

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_RISKY: dict[type[ast.operator], str] = {
    ast.Pow: "**",
    ast.Mult: "*",
    ast.LShift: "<<",
    ast.Mod: "%",
}


def _helper(name: str, node: ast.AST) -> ast.Name:
    return ast.copy_location(ast.Name(id=f"__sb_{name}", ctx=ast.Load()), node)


def _call(name: str, node: ast.AST, args: list[ast.expr]) -> ast.Call:
    return ast.copy_location(ast.Call(func=_helper(name, node), args=args, keywords=[]), node)


class _Rewriter(ast.NodeTransformer):
    def __init__(self) -> None:
        self.parts = 0

    def split(self, target: ast.expr) -> list[tuple[ast.expr, ast.Name]]:
        """Each part of ``target`` holding a starred name (``(a, *b), c``) replaced by a name
        of the sandbox's: the parts, each with the name it is to be unpacked from."""
        split: list[tuple[ast.expr, ast.Name]] = []
        if not isinstance(target, (ast.Tuple, ast.List)):
            return split
        for i, part in enumerate(target.elts):
            inner = part.value if isinstance(part, ast.Starred) else part
            if isinstance(inner, (ast.Tuple, ast.List)) and _nested_starred(inner):
                name = f"__sb_part{self.parts}"
                self.parts += 1
                store = ast.copy_location(ast.Name(id=name, ctx=ast.Store()), inner)
                if isinstance(part, ast.Starred):
                    part.value = store
                else:
                    target.elts[i] = store
                split.append((inner, ast.copy_location(ast.Name(id=name, ctx=ast.Load()), inner)))
        return split

    def unnest(self, target: ast.expr) -> list[ast.stmt]:
        """The split parts of ``target`` (see ``split``) unpacked, metered, after it."""
        after: list[ast.stmt] = []
        for inner, load in self.split(target):
            unpack = ast.copy_location(ast.Assign(targets=[inner], value=load), inner)
            after.extend(self.assignment(unpack))
            # Gone at once: it must not stay in the caller's globals (exec(src, g)).
            gone = ast.copy_location(ast.Name(id=load.id, ctx=ast.Del()), inner)
            after.append(ast.copy_location(ast.Delete(targets=[gone]), inner))
        return after

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        node.args = [node.func, *node.args]
        node.func = _helper("call", node)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        symbol = _RISKY.get(type(node.op))
        if symbol is None:
            return node
        return _call("binop", node, [ast.Constant(symbol), node.left, node.right])

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        symbol = _RISKY.get(type(node.op))
        if symbol is None or not isinstance(node.target, ast.Name):
            return node
        load = ast.copy_location(ast.Name(id=node.target.id, ctx=ast.Load()), node)
        value = _call("binop", node, [ast.Constant(symbol), load, node.value])
        return ast.copy_location(ast.Assign(targets=[node.target], value=value), node)

    def visit_For(self, node: ast.For) -> ast.AST:
        self.generic_visit(node)
        node.iter = _call(_iterator(node.target), node.iter, [node.iter])
        node.body = [*self.unnest(node.target), *node.body]
        return node

    visit_AsyncFor = visit_For  # type: ignore[assignment]

    def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
        self.generic_visit(node)
        node.iter = _call(_iterator(node.target), node.iter, [node.iter])
        return node

    def comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp
    ) -> ast.AST:
        """Its parts visited, and each nested starred part of a target (``for (a, *b), c
        in x``) unpacked by a generator of its own, from a metered iterator: a
        comprehension holds no statement to unpack it after (see ``unnest``)."""
        self.generic_visit(node)
        generators: list[ast.comprehension] = []
        for generator in node.generators:
            generators.append(generator)
            added = [
                ast.comprehension(
                    target=inner,
                    iter=ast.copy_location(ast.List(elts=[load], ctx=ast.Load()), inner),
                    ifs=[],
                    is_async=0,
                )
                for inner, load in self.split(generator.target)
            ]
            if added:
                # The conditions may name the unpacked parts: they follow the last one.
                added[-1].ifs, generator.ifs = generator.ifs, []
                for extra in added:
                    self.visit_comprehension(extra)
                generators.extend(added)
        node.generators = generators
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = comprehension

    def visit_Starred(self, node: ast.Starred) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load):  # [*x], {*x}, (*x,), f(*x): a loop in C
            node.value = _call("iter", node.value, [node.value])
        return node

    def visit_Assign(self, node: ast.Assign) -> Any:
        self.generic_visit(node)
        done = self.assignment(node)
        return done if len(done) > 1 else done[0]

    def assignment(self, node: ast.Assign) -> list[ast.stmt]:
        """``node`` (its parts visited), metered, and the assignments its nested parts need."""
        if any(_starred(target) for target in node.targets):  # a, *b = x: a loop in C
            node.value = _call("iter", node.value, [node.value])
        return [node, *(stmt for target in node.targets for stmt in self.unnest(target))]

    def visit_While(self, node: ast.While) -> ast.AST:
        self.generic_visit(node)
        tick = ast.copy_location(ast.Expr(_call("tick", node, [])), node)
        node.body = [tick, *node.body]
        return node

    def visit_FormattedValue(self, node: ast.FormattedValue) -> ast.AST:
        self.generic_visit(node)
        if node.format_spec is None:
            return node
        spec = node.format_spec
        args = [node.value, ast.Constant(node.conversion), spec]
        node.value = _call("format", node, args)
        node.conversion = -1
        node.format_spec = None
        return node


def _iterator(target: ast.AST) -> str:
    """``for a, *b in x``: each item is unpacked in C too, so each is metered."""
    return "items" if _starred(target) else "iter"


def _nested_starred(target: ast.AST) -> bool:
    """Whether a starred name is anywhere in ``target``."""
    if isinstance(target, ast.Starred):
        return True
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(_nested_starred(e) for e in target.elts)
    return False


def _starred(target: ast.AST) -> bool:
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(isinstance(e, ast.Starred) for e in target.elts)
    return False


def rewrite(tree: ast.AST) -> ast.AST:
    """``tree`` rewritten in place for the budgets, locations fixed."""
    return ast.fix_missing_locations(_Rewriter().visit(tree))
