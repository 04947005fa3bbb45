"""The ``eval-*`` lines for the constructs the program's evaluated sources used.

One line per key, in the order ``eval-syntax``, ``eval-import``, ``eval-call``,
``eval-attribute``, ``eval-magic``. A syntax group is written when every node of it was
seen, its nodes one by one otherwise; the core nodes are written too, so that a source of
the core alone still gives a profile (and guarded, never raw, evaluation next run).
Names are checked here again (a child may lie): ``ast`` node names this interpreter
knows, identifiers, dotted module names. Patterns are never written; neither is
``python-api=ALLOW:dynamic-code``.
"""

from __future__ import annotations

import ast
import re

from pysandboxes._policy.evalkeys import DEPRECATED_NODES, SYNTAX_GROUPS
from pysandboxes._policy.evaluation import FRAME_ATTRIBUTES, HIERARCHY_WALKS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pysandboxes._wire.events import Event

_ORDER = ("syntax", "import", "call", "attribute", "magic")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_NOTES = {
    "syntax": "used by an evaluated source at",
    "import": "imported by an evaluated source at",
    "call": "called by an evaluated source at",
    "attribute": "read by an evaluated source at",
    "magic": "read by an evaluated source at",
}


def _node(name: str) -> bool:
    if name in DEPRECATED_NODES:  # asked first: reading them warns from 3.12
        return False
    found = getattr(ast, name, None)
    return isinstance(found, type) and issubclass(found, ast.AST)


def _valid(key: str, name: str) -> bool:
    if key == "syntax":
        return _node(name)
    if key == "import":
        return bool(_MODULE.fullmatch(name))
    if name in FRAME_ATTRIBUTES or name in HIERARCHY_WALKS or "__sb_" in name:
        return False
    dunder = name.startswith("__") and name.endswith("__")
    return bool(_IDENTIFIER.fullmatch(name)) and dunder == (key == "magic")


def _syntax_items(nodes: set[str]) -> list[str]:
    items: list[str] = []
    covered: set[str] = set()
    for group, members in SYNTAX_GROUPS.items():
        present = [m for m in members if _node(m)]
        if present and set(present) <= nodes:
            items.append(group)
            covered.update(present)
    return sorted(nodes - covered) + items


def eval_rules(add: Callable[..., None], events: Sequence[Event], skipped: list[str]) -> None:
    """Add the ``eval-*`` lines for ``events`` (family ``eval``) with ``add`` (the
    learner's ``_Out.add``); forged names go to ``skipped``."""
    by_key: dict[str, set[str]] = {key: set() for key in _ORDER}
    where: dict[str, str] = {}
    for event in events:
        if event.access in by_key and _valid(event.access, event.name):
            by_key[event.access].add(event.name)
            where.setdefault(event.access, event.where)
        else:
            skipped.append(f"{event.name!r} ({event.access}): not a construct an eval rule names")
    for key in _ORDER:
        names = by_key[key]
        if not names:
            continue
        items = _syntax_items(names) if key == "syntax" else sorted(names)
        line = f"eval-{key}={', '.join(items)}"
        add("eval", "eval", line, _NOTES[key], where[key])
