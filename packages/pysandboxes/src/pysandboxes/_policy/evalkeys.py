"""The ``eval-*`` keys: parsed and validated here, enforced by the eval guard.

List keys (``eval-syntax``, ``eval-call``, ``eval-attribute``, ``eval-import``,
``eval-magic``) take comma lists, a whole line may be denied with a leading ``DENY:``;
scalar keys take one value, at most once per profile. A ``:name`` suffix on the key
(``eval-syntax:llm=arith``) defines a separate named profile.
"""

from __future__ import annotations

import ast
import difflib
import re

from pysandboxes._policy.model import ApiRule, EvalRule, Origin

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pysandboxes._policy.lines import Sink

#: Syntax groups: a name for a set of ``ast`` node classes.
SYNTAX_GROUPS: Mapping[str, tuple[str, ...]] = {
    "arith": ("BinOp", "UnaryOp"),
    "compare": ("Compare", "BoolOp"),
    "conditional": ("If", "IfExp"),
    "loop": ("For", "While", "Break", "Continue"),
    "comprehension": ("ListComp", "SetComp", "DictComp", "GeneratorExp", "comprehension"),
    "assign": ("Assign", "AugAssign", "AnnAssign", "NamedExpr"),
    "func": ("FunctionDef", "Return", "arguments", "arg", "Lambda"),
    "async": ("AsyncFunctionDef", "AsyncFor", "AsyncWith", "Await"),
    "class": ("ClassDef",),
    "exception": ("Try", "TryStar", "Raise", "ExceptHandler"),
    "context": ("With", "withitem"),
    "import": ("Import", "ImportFrom", "alias"),
    "subscript": ("Subscript", "Slice", "Starred"),
    "fstring": ("JoinedStr", "FormattedValue"),
    "tstring": ("TemplateStr", "Interpolation"),
    "yield": ("Yield", "YieldFrom"),
}
#: Nodes kept by CPython for compatibility only; rules must name their replacements.
DEPRECATED_NODES = frozenset(
    {"Num", "Str", "Bytes", "NameConstant", "Ellipsis", "Index", "ExtSlice", "Suite", "Param"}
    | {"AugLoad", "AugStore"}
)
LIST_KEYS = ("syntax", "call", "attribute", "import", "magic")
SCALAR_KEYS = (
    "namespace",
    "timeout",
    "max-iterations",
    "max-call-depth",
    "max-depth",
    "max-nodes",
    "max-alloc",
    "max-leaked-threads",
)
NAMESPACES = ("adaptive", "closed", "caller")
_KEY = re.compile(r"eval-(?P<key>[a-z-]+)(?::(?P<profile>[A-Za-z0-9_-]+))?")
_NAME_GLOB = re.compile(r"[A-Za-z_*][A-Za-z0-9_*.-]*")
_UNITS_TIME = {"ms": 0.001, "s": 1.0, "m": 60.0}
_UNITS_SIZE = {"kb": 1000, "mb": 1000**2, "gb": 1000**3, "b": 1}
_DYNAMIC_CODE = {"*", "dynamic-code", "builtins.eval", "builtins.exec", "builtins.compile"}


def _syntax_nodes() -> frozenset[str]:
    return frozenset(
        name
        for name in dir(ast)
        if name not in DEPRECATED_NODES  # first: reading one warns from 3.12
        and isinstance(getattr(ast, name), type)
        and issubclass(getattr(ast, name), ast.AST)
    )


def parse_eval(sink: Sink, origin: Origin, key_text: str, value: str) -> None:
    """Validate one ``eval-*`` line and add its ``EvalRule`` to ``sink``."""
    match = _KEY.fullmatch(key_text)
    key = match.group("key") if match else ""
    name, colon, profile_text = key_text.partition(":")
    if match is None and colon and name[5:] in (*LIST_KEYS, *SCALAR_KEYS):
        sink.issue(
            origin,
            f"'{origin.text}': invalid profile name '{profile_text}' "
            "(letters, digits, '_' and '-')",
        )
        return
    if match is None or (key not in LIST_KEYS and key not in SCALAR_KEYS):
        known = [f"eval-{k}" for k in (*LIST_KEYS, *SCALAR_KEYS)]
        close = difflib.get_close_matches(key_text.split(":")[0], known, n=1)
        hint = f": did you mean '{close[0]}'?" if close else ""
        sink.issue(origin, f"unknown key '{key_text}' in '{origin.text}'{hint}")
        return
    profile = match.group("profile") or ""
    if key in LIST_KEYS:
        _list(sink, origin, key, profile, value)
    else:
        _scalar(sink, origin, key, profile, value)


def _list(sink: Sink, origin: Origin, key: str, profile: str, value: str) -> None:
    deny = value.startswith("DENY:")
    items = [v.strip() for v in (value[5:] if deny else value).split(",")]
    known = _syntax_nodes() if key == "syntax" else frozenset[str]()
    names: list[str] = []
    for item in items:
        if not item:
            sink.issue(origin, f"'{origin.text}': empty name in the list")
        elif item.startswith("DENY:"):
            sink.issue(origin, f"'{origin.text}': DENY: applies to a whole line, put it first")
        elif key == "syntax":
            if "*" in item:
                sink.issue(origin, f"'{origin.text}': eval-syntax takes no pattern ('{item}')")
            elif item in DEPRECATED_NODES:
                sink.issue(origin, f"'{origin.text}': '{item}' is a deprecated ast node")
            elif item in SYNTAX_GROUPS or item in known:
                names.append(item)
            else:
                choices = [*SYNTAX_GROUPS, *known]
                close = difflib.get_close_matches(item, choices, n=1)
                hint = f", closest known token is '{close[0]}'" if close else ""
                sink.issue(origin, f"'{origin.text}': unknown syntax token '{item}'{hint}")
        elif _NAME_GLOB.fullmatch(item):
            names.append(item)
        else:
            sink.issue(origin, f"'{origin.text}': '{item}' is not a name or a * pattern")
    sink.add("eval", EvalRule(key, profile, deny, tuple(names), origin))


def _scalar(sink: Sink, origin: Origin, key: str, profile: str, value: str) -> None:
    text = value.strip()
    parsed: str | int | float | None
    if text.startswith("DENY:") or text == "*":
        sink.issue(origin, f"'{origin.text}': eval-{key} takes one value, not DENY: or *")
        return
    if key == "namespace":
        parsed = text if text in NAMESPACES else None
        expected = " | ".join(NAMESPACES)
    elif key == "timeout":
        parsed = _number_with_unit(text, _UNITS_TIME, default_unit="s")
        expected = "a duration such as 500ms, 5s or 1m"
    elif key == "max-alloc":
        amount = _number_with_unit(text, _UNITS_SIZE, default_unit="b")
        parsed = int(amount) if amount is not None else None
        expected = "a size such as 10MB, 512KB or 1GB"
    else:
        digits = text.replace("_", "")
        parsed = int(digits) if digits.isdigit() else None
        expected = "a whole number (1_000 separators allowed)"
    if parsed is None:
        sink.issue(origin, f"'{origin.text}': expected {expected}")
        return
    sink.add("eval", EvalRule(key, profile, False, (parsed,), origin))


def _number_with_unit(text: str, units: Mapping[str, float], default_unit: str) -> float | None:
    match = re.fullmatch(r"([0-9][0-9_]*(?:\.[0-9_]+)?)\s*([A-Za-z]*)", text)
    if match is None:
        return None
    unit = (match.group(2) or default_unit).lower()
    if unit not in units:
        return None
    try:
        return float(match.group(1).replace("_", "")) * units[unit]
    except ValueError:
        return None


def check_profiles(sink: Sink, rules: Sequence[EvalRule]) -> None:
    """A scalar key may be set once per profile."""
    seen: dict[tuple[str, str], Origin] = {}
    for rule in rules:
        if rule.key in SCALAR_KEYS:
            first = seen.setdefault((rule.key, rule.profile), rule.origin)
            if first is not rule.origin:
                sink.issue(
                    rule.origin,
                    f"'{rule.origin.text}' is set twice in this profile (already at "
                    f"{first.where}): a scalar is not a set",
                )


def check_dynamic_code_grant(sink: Sink, evals: Sequence[EvalRule], api: Sequence[ApiRule]) -> None:
    """Refuse ``eval-*`` lines that a raw grant of eval/exec/compile would make void."""
    check_profiles(sink, evals)
    grants = [r for r in api if r.allow and _DYNAMIC_CODE.intersection(r.targets)]
    if not grants:
        return
    for rule in evals:
        if not rule.profile:
            sink.issue(
                rule.origin,
                f"'{rule.origin.text}' is never applied: {grants[0].origin} grants eval, exec "
                "and compile unguarded; remove the grant or this line",
            )
