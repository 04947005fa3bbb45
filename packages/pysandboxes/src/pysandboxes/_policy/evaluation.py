"""The sub-language of evaluated code, as data: what each ``eval-*`` profile allows.

``profiles(rules)`` folds the parsed ``eval-*`` lines into one ``EvalProfile`` per profile
name (``""`` is the default one, used by the patched ``eval``/``exec``/``compile``; a
suffix ``eval-syntax:llm=...`` makes a separate, complete profile reached through
``guarded_eval``). ``warn_wide`` lists what a start-up should say about the grants. The
checker, the rewriter and the budgets that apply a profile live in ``_inside/evaluation``.
"""

from __future__ import annotations

import ast
import re

from pysandboxes._policy.evalkeys import DEPRECATED_NODES, SCALAR_KEYS, SYNTAX_GROUPS
from pysandboxes._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from pysandboxes._policy.lines import Sink
    from pysandboxes._policy.model import EvalRule, Origin

#: Always allowed, never removed: literals, names and the top-level containers.
CORE = frozenset(
    {"Module", "Expression", "Interactive", "Constant", "Name", "Load", "Store", "Del"}
    | {"Tuple", "List", "Dict", "Set", "Expr", "Pass"}
)
#: Always part of the language, as in the established format: which calls and attributes
#: are allowed is said by ``eval-call`` and ``eval-attribute`` (a call of anything but a
#: name or an attribute still needs ``eval-syntax=Call``: it calls past both lists).
GATED = frozenset({"Call", "Attribute"})
#: The operator and context nodes that come with the node using them (``Add`` with
#: ``BinOp``): never checked on their own.
_OPERATORS = frozenset(
    name
    for name in dir(ast)
    if name not in DEPRECATED_NODES  # first: reading one warns from 3.12
    and isinstance(getattr(ast, name), type)
    and issubclass(getattr(ast, name), (ast.operator, ast.unaryop, ast.cmpop, ast.boolop))
)
#: Attributes that hand out a frame, its globals or its code: refused whatever the grants
#: (a frame's globals hold the caller's names, its builtins the real ones).
FRAME_ATTRIBUTES = frozenset(
    {"gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame"}
    | {"ag_code", "ag_await", "tb_frame", "tb_next", "f_back", "f_globals", "f_locals"}
    | {"f_builtins", "f_code", "f_trace", "co_code", "co_consts"}
)
#: Walks of the type hierarchy: refused whatever the grants (they reach every class of
#: the process, the sandbox's own included).
HIERARCHY_WALKS = frozenset({"__subclasses__", "__bases__", "__base__", "__mro__", "mro"})
#: Builtins that reach objects, names or code beyond their arguments.
CAPABILITY_BUILTINS = frozenset(
    {"getattr", "setattr", "delattr", "vars", "hasattr", "dir", "globals", "locals", "type"}
    | {"breakpoint", "open", "eval", "exec", "compile", "__import__", "input", "help"}
)
#: Format methods: a replacement field walks attributes and items of its arguments.
FORMATTERS = frozenset({"format", "format_map"})
_GROUP_TYPES: Mapping[str, tuple[type, ...]] = {
    "str-methods": (str,),
    "list-methods": (list,),
    "dict-methods": (dict,),
    "set-methods": (set, frozenset),
    "tuple-methods": (tuple,),
    "num-methods": (int, float, complex, bool),
    "bytes-methods": (bytes, bytearray),
}


def method_groups() -> dict[str, frozenset[str]]:
    """The ``eval-attribute`` groups, computed from this interpreter's types (ordinary
    names only; ``format`` and ``format_map`` are granted by exact name only)."""
    import datetime

    types = {**_GROUP_TYPES, "date-methods": (datetime.date, datetime.datetime, datetime.time)}
    groups: dict[str, frozenset[str]] = {}
    for group, classes in types.items():
        names = {n for cls in classes for n in dir(cls) if not n.startswith("_")}
        groups[group] = frozenset(names - FORMATTERS)
    return groups


_groups: dict[str, frozenset[str]] = {}


def _method_groups() -> dict[str, frozenset[str]]:
    """``method_groups()``, computed once, when a profile first needs it."""
    if not _groups:
        _groups.update(method_groups())
    return _groups


@record
class NameSet:
    """The names a list key allows: exact names and ``*`` patterns, minus the denied.

    Attributes:
        names: the allowed exact names.
        patterns: the allowed ``*`` patterns, compiled into one expression (or ``None``).
        denied: the denied exact names.
        denied_patterns: the denied patterns, compiled (or ``None``).
    """

    names: frozenset[str] = frozenset()
    patterns: re.Pattern[str] | None = None
    denied: frozenset[str] = frozenset()
    denied_patterns: re.Pattern[str] | None = None

    def allows(self, name: str) -> bool:
        """Whether ``name`` is granted and not denied (``DENY:`` always wins)."""
        if name in self.denied or (self.denied_patterns and self.denied_patterns.fullmatch(name)):
            return False
        return name in self.names or bool(self.patterns and self.patterns.fullmatch(name))


@record
class EvalProfile:
    """One profile of the sub-language and its budgets.

    Attributes:
        name: ``""`` for the default profile, else the suffix (``llm``).
        syntax: the allowed ``ast`` node class names (the core included).
        call, attribute, imports, magic: what ``eval-call``, ``eval-attribute``,
            ``eval-import`` and ``eval-magic`` allow.
        namespace: ``adaptive``, ``closed`` or ``caller``.
        timeout: seconds; max_*: the budgets (``max_alloc`` in bytes).
        refused: the ``ast`` node names a ``DENY:`` line of ``eval-syntax`` names (they win
            over ``GATED``).
        origins: ``(key, file(line))`` of the scalar keys set by a line, for the messages.
    """

    name: str = ""
    syntax: frozenset[str] = CORE
    call: NameSet = NameSet()
    attribute: NameSet = NameSet()
    imports: NameSet = NameSet()
    magic: NameSet = NameSet()
    namespace: str = "adaptive"
    timeout: float = 5.0
    max_iterations: int = 1_000_000
    max_call_depth: int = 20
    max_depth: int = 20
    max_nodes: int = 5_000
    max_alloc: int = 10_000_000
    refused: frozenset[str] = frozenset()
    origins: tuple[tuple[str, str], ...] = ()

    def where(self, key: str) -> str:
        """Where the budget ``key`` (``max-iterations``) was set, or that it is the default."""
        for name, where in self.origins:
            if name == key:
                return f"set at {where}"
        return f"the default; a line '{self.key(key)}=...' changes it"

    @property
    def label(self) -> str:
        """``<eval:default>`` or ``<eval:llm>``: the file name evaluated code runs as."""
        return f"<eval:{self.name or 'default'}>"

    def key(self, key: str) -> str:
        """The key as written in this profile: ``eval-call`` or ``eval-call:llm``."""
        return f"eval-{key}:{self.name}" if self.name else f"eval-{key}"


def _pattern(globs: Iterable[str]) -> re.Pattern[str] | None:
    parts = [".*".join(re.escape(p) for p in glob.split("*")) for glob in globs]
    return re.compile("|".join(parts)) if parts else None


def _name_set(rules: Sequence[EvalRule], expand: Mapping[str, frozenset[str]]) -> NameSet:
    allowed: set[str] = set()
    denied: set[str] = set()
    allowed_globs: list[str] = []
    denied_globs: list[str] = []
    for rule in rules:
        for value in rule.values:
            item = str(value)
            names = expand.get(item, frozenset({item}))
            globs = denied_globs if rule.deny else allowed_globs
            if "*" in item:
                globs.append(item)
            else:
                (denied if rule.deny else allowed).update(names)
    return NameSet(
        frozenset(allowed), _pattern(allowed_globs), frozenset(denied), _pattern(denied_globs)
    )


def _syntax(rules: Sequence[EvalRule]) -> tuple[frozenset[str], frozenset[str]]:
    allowed: set[str] = set()
    denied: set[str] = set()
    for rule in rules:
        for value in rule.values:
            item = str(value)
            nodes = set(SYNTAX_GROUPS.get(item, (item,)))
            (denied if rule.deny else allowed).update(nodes)
    if "FunctionDef" in allowed or "Lambda" in allowed:
        allowed.update({"arguments", "arg"})
    if "Import" in allowed or "ImportFrom" in allowed:
        allowed.add("alias")
    return frozenset((allowed - denied) | CORE), frozenset(denied)


def profiles(rules: Sequence[EvalRule]) -> dict[str, EvalProfile]:
    """One ``EvalProfile`` per profile name the lines define (none: no eval-* line)."""
    by_profile: dict[str, list[EvalRule]] = {}
    for rule in rules:
        by_profile.setdefault(rule.profile, []).append(rule)
    found: dict[str, EvalProfile] = {}
    for name, lines in by_profile.items():

        def of(key: str, lines: list[EvalRule] = lines) -> list[EvalRule]:
            return [r for r in lines if r.key == key]

        settings: dict[str, object] = {
            r.key.replace("-", "_"): r.values[0]
            for r in lines
            if r.key in SCALAR_KEYS and r.key != "max-leaked-threads"
        }
        syntax, refused = _syntax(of("syntax"))
        found[name] = EvalProfile(
            name,
            syntax,
            _name_set(of("call"), {}),
            _name_set(of("attribute"), _method_groups()),
            _name_set(of("import"), {}),
            _name_set(of("magic"), {}),
            **settings,  # type: ignore[arg-type]
            refused=refused,
            origins=tuple(
                (r.key, r.origin.where) for r in lines if r.key in SCALAR_KEYS and not r.deny
            ),
        )
    return found


def _fixed_length(glob: str) -> int:
    return len(glob.replace("*", ""))


def _universe(key: str) -> frozenset[str]:
    """The names a glob of ``key`` is measured against, for the start-up warning."""
    import sys

    if key == "call":
        import builtins

        return frozenset(dir(builtins))
    if key == "attribute":
        return frozenset(n for names in _method_groups().values() for n in names) | FORMATTERS
    if key == "import":
        return frozenset(sys.stdlib_module_names)
    return frozenset(n for cls in (object, type, int, str) for n in dir(cls) if n[:2] == "__")


def warn_wide(sink: Sink, rules: Sequence[EvalRule]) -> None:
    """The start-up warnings: a wide glob (how many names it expands to), a formatter or
    a capability builtin granted by name, and ``eval-namespace=caller``."""
    for rule in rules:
        if rule.deny or rule.key not in ("call", "attribute", "import", "magic"):
            if rule.key == "namespace" and rule.values == ("caller",):
                sink.warn(rule.origin, _caller_warning(rule.origin))
            continue
        for value in map(str, rule.values):
            if value in HIERARCHY_WALKS or value in FRAME_ATTRIBUTES or "__sb_" in value:
                sink.warn(rule.origin, _never_warning(rule.origin, value))
            elif "*" in value and _fixed_length(value) < 3:
                pattern = _pattern([value])
                count = sum(1 for n in _universe(rule.key) if pattern and pattern.fullmatch(n))
                sink.warn(
                    rule.origin,
                    f"'{value}' in '{rule.origin.text}' is a wide pattern: it expands to "
                    f"{count} names known here; list the names instead",
                )
            elif rule.key == "attribute" and value in FORMATTERS:
                sink.warn(
                    rule.origin,
                    f"eval-attribute={value} lets evaluated code call str.{value}: its "
                    "replacement fields read attributes and items of the arguments "
                    "(field traversal stays refused)",
                )
            elif rule.key == "call" and value in CAPABILITY_BUILTINS:
                sink.warn(
                    rule.origin,
                    f"WARNING: eval-call={value} adds the capability builtin '{value}' to "
                    "the namespace: it reaches objects or code beyond its arguments",
                )


def _never_warning(origin: Origin, name: str) -> str:
    # Stricter than the established format on purpose (docs/eval.md lists why): say so at
    # start-up rather than refuse the sources that rely on it without a word.
    what = (
        "a walk of the type hierarchy (it reaches every class of the process)"
        if name in HIERARCHY_WALKS
        else "the sandbox's own"
        if "__sb_" in name
        else "a frame, its globals or its code"
    )
    return (
        f"'{name}' in '{origin.text}' is never allowed here, whatever the rules say: it is "
        f"{what}; evaluated code naming it is refused (see docs/eval.md)"
    )


def _caller_warning(origin: Origin) -> str:
    return (
        f"'{origin.text}' hands evaluated code the caller's own namespace: use it for "
        "debugging only (closed is the mode for model output)"
    )
