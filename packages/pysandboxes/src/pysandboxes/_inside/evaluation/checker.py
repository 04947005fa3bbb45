"""Every construct of a source that its profile does not allow, found at once.

A violation carries its place (line, column, the source line and a caret under the
construct) and the exact rule line that would allow it, or says that no rule can.
"""

from __future__ import annotations

import ast

from pysandboxes._policy.evalkeys import SYNTAX_GROUPS
from pysandboxes._policy.evaluation import FORMATTERS, FRAME_ATTRIBUTES, GATED, HIERARCHY_WALKS
from pysandboxes._record import record
from pysandboxes.errors import EvalInterrupted, EvalSyntaxRejected

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._policy.evaluation import EvalProfile

#: Operators, contexts and the parts that come with the node holding them.
_SKIPPED = (
    *(ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.expr_context),
    *(ast.comprehension, ast.arguments, ast.arg, ast.alias, ast.keyword, ast.withitem),
)
_GROUP_OF = {node: group for group, nodes in SYNTAX_GROUPS.items() for node in nodes}
_IDENTIFIERS = ("id", "name", "arg", "asname")
_NEVER = "no rule allows it"
_children = ast.iter_child_nodes  # bound now: the checker must see the tree as it is


@record
class Violation:
    """One refused construct: where, what, and the line that would allow it."""

    line: int
    col: int
    end_col: int
    what: str
    fix: str

    def render(self, lines: list[str]) -> str:
        """The violation as shown: place, message, the line with a caret, the fix."""
        text = lines[self.line - 1] if 0 < self.line <= len(lines) else ""
        width = max(1, min(self.end_col, len(text)) - self.col) if text else 1
        return (
            f"  line {self.line}, col {self.col}: {self.what}\n"
            f"      {text}\n      {' ' * self.col}{'^' * width}\n    {self.fix}"
        )


def _fix(profile: EvalProfile, key: str, name: str, note: str = "") -> str:
    return f"add: {profile.key(key)}={name}" + (f"    WARNING: {note}" if note else "")


class _Checker:
    def __init__(self, profile: EvalProfile) -> None:
        self.profile = profile
        self.found: list[Violation] = []
        self.defined: set[str] = set()
        self.nodes = 0

    def add(self, node: ast.AST, what: str, fix: str) -> None:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        end = getattr(node, "end_col_offset", col + 1) or col + 1
        if getattr(node, "end_lineno", line) != line:
            end = 10**6
        self.found.append(Violation(line, col, end, what, fix))

    def name(self, node: ast.AST, name: str, kind: str) -> None:
        profile = self.profile
        if "__sb_" in name:
            self.add(node, f"{kind} '{name}' is reserved for the sandbox", _NEVER)
        elif name in FRAME_ATTRIBUTES or name in HIERARCHY_WALKS:
            self.add(node, f"{kind} '{name}' reaches frames or the type hierarchy", _NEVER)
        elif name.startswith("__") and name.endswith("__") and not profile.magic.allows(name):
            note = "opens the whole type hierarchy" if name == "__class__" else ""
            self.add(node, f"{kind} '{name}' is not allowed", _fix(profile, "magic", name, note))

    def attribute(self, node: ast.Attribute) -> None:
        name = node.attr
        self.name(node, name, "attribute")
        if name.startswith("__") or "__sb_" in name or name in FRAME_ATTRIBUTES:
            return
        if name in HIERARCHY_WALKS:
            return
        allowed = self.profile.attribute
        granted = name in allowed.names if name in FORMATTERS else allowed.allows(name)
        if not granted or not allowed.allows(name):
            self.add(
                node, f"attribute '{name}' is not allowed", _fix(self.profile, "attribute", name)
            )

    def check(self, tree: ast.AST) -> None:
        profile = self.profile
        stack: list[tuple[ast.AST, int]] = [(tree, 0)]
        deepest = 0
        for node in _nodes(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defined.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.defined.add(node.id)
        while stack:
            node, depth = stack.pop()
            deepest = max(deepest, depth)
            self.nodes += 1
            kind = type(node).__name__
            if not isinstance(node, _SKIPPED) and not self.allowed(node, kind):
                group = _GROUP_OF.get(kind, kind)
                self.add(node, f"syntax '{kind}' is not allowed", _fix(profile, "syntax", group))
            for field in _IDENTIFIERS:
                value = getattr(node, field, None)
                if isinstance(value, str):
                    self.name(node, value, "name")
            if isinstance(node, ast.Attribute):
                self.attribute(node)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                called = node.func.id
                if called not in self.defined and not profile.call.allows(called):
                    self.add(
                        node.func,
                        f"call of '{called}' is not allowed",
                        _fix(profile, "call", called),
                    )
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                self.imports(node)
            for child in _children(node):
                step = 1 if isinstance(child, (ast.expr, ast.stmt)) else 0
                stack.append((child, depth + step))
        if self.nodes > profile.max_nodes:
            reason = f"{profile.key('max-nodes')}={profile.max_nodes}"
            raise EvalInterrupted(reason, where=profile.where("max-nodes"))
        if deepest > profile.max_depth:
            reason = f"{profile.key('max-depth')}={profile.max_depth}"
            raise EvalInterrupted(reason, where=profile.where("max-depth"))

    def allowed(self, node: ast.AST, kind: str) -> bool:
        """Whether the profile's syntax allows ``node``: ``Attribute`` and the call of a
        name or an attribute always (their names are checked), unless denied."""
        profile = self.profile
        if kind in profile.syntax:
            return True
        if kind not in GATED or kind in profile.refused:
            return False
        return not isinstance(node, ast.Call) or isinstance(node.func, (ast.Name, ast.Attribute))

    def imports(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.ImportFrom):
            modules = [node.module or ""] if not node.level else []
            if node.level:
                self.add(node, "relative import is not allowed", _NEVER)
        else:
            modules = [alias.name for alias in node.names]
        for module in modules:
            if not self.profile.imports.allows(module):
                self.add(
                    node,
                    f"import of '{module}' is not allowed",
                    _fix(self.profile, "import", module),
                )


def _nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node, without ``ast.walk`` (which imports ``collections`` when first used:
    an import the program's rules would be charged for)."""
    found: list[ast.AST] = []
    pending = [tree]
    while pending:
        node = pending.pop()
        found.append(node)
        pending.extend(_children(node))
    return found


def check(profile: EvalProfile, tree: ast.AST, source: str) -> None:
    """Raise ``EvalSyntaxRejected`` listing every violation of ``tree``, if any; raise
    ``EvalInterrupted`` when it is larger or deeper than the profile's budgets."""
    checker = _Checker(profile)
    checker.check(tree)
    if not checker.found:
        return
    found = sorted(checker.found, key=lambda v: (v.line, v.col, v.what))
    lines = source.splitlines()
    shown = tuple(v.render(lines) for v in found)
    plural = "rule" if len(found) == 1 else "rules"
    message = f"{len(found)} {plural} violated in {profile.label}\n\n" + "\n\n".join(shown)
    rejected = EvalSyntaxRejected(message, violations=shown, lineno=found[0].line)
    rejected.filename = profile.label
    rejected.text = lines[found[0].line - 1] if found[0].line <= len(lines) else None
    rejected.offset = found[0].col + 1
    raise rejected
