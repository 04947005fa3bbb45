"""The only glob logic of the policy: ``ignore=`` patterns and ``*`` name patterns.

``ignore=`` is gitignore-like. A pattern without ``/`` matches any path component below
the exposed directory that holds the path (``ignore=.env`` hides every ``.env``, and all
under a directory of that name). A pattern with ``/`` is anchored: to the directory of the
rule file when relative, to ``/`` when absolute; ``**`` spans any number of components,
``*``, ``?`` and ``[...]`` stay inside one. A match on a directory hides all below it.

Name patterns (``env=``, ``unenv=``) know only ``*`` and are matched in linear time.
"""

from __future__ import annotations

import os

from pysandboxes._policy.pathnames import within

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Callable, Sequence

    from pysandboxes._policy.model import IgnoreRule

    IgnoreMatcher = Callable[[str, str | None], IgnoreRule | None]


def _translate(pattern: str) -> str:
    """A glob (``**``, ``*``, ``?``, ``[...]``) as a regular expression over paths."""
    import re

    out: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                out.append(re.escape(char))
                i += 1
                continue
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\").replace("/", "") + "]")
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


def compile_ignore(rules: Sequence[IgnoreRule]) -> IgnoreMatcher:
    """Compile the ``ignore=`` rules into one matcher ``(path, exposure_root) -> rule``.

    All patterns of a kind are joined into one regular expression, so a verdict costs
    one search whatever the number of rules; the deciding rule is looked up only on a hit.
    """
    if not rules:
        return _nothing
    import re

    anchored: list[tuple[re.Pattern[str], IgnoreRule]] = []
    components: list[tuple[re.Pattern[str], IgnoreRule]] = []
    for rule in rules:
        if rule.base is not None or rule.pattern.startswith("/"):
            full = os.path.normpath(os.path.join(rule.base or "/", rule.pattern))
            anchored.append((re.compile(_translate(full) + "(?:/.*)?", re.S), rule))
        else:
            components.append((re.compile(_translate(rule.pattern), re.S), rule))
    any_anchored = _joined([regex for regex, _ in anchored])
    any_component = _joined([regex for regex, _ in components])

    def match(path: str, root: str | None) -> IgnoreRule | None:
        if any_anchored is not None and any_anchored.fullmatch(path):
            return next(rule for regex, rule in anchored if regex.fullmatch(path))
        # Component patterns apply only below the exposure: the exposed directory's own
        # name was chosen by a rule.
        if any_component is None or root is None or path == root:
            return None
        parts = path[len(root) :].strip("/").split("/")
        for part in parts:
            if any_component.fullmatch(part):
                return next(rule for regex, rule in components if regex.fullmatch(part))
        return None

    return match


class Below:
    """Which parts of an anchored pattern (relative to its base) a path below the base
    has left to match: what a rename of that path could carry out of the pattern.

    The pattern is read one component at a time; ``**`` takes any number of them. A
    ``**`` inside a component (``a**b``) spans ``/``: then nothing is known (``None``).
    """

    def __init__(self, pattern: str, base: str) -> None:
        import re

        self._base = base
        parts = pattern.split("/")
        self._known = all(part == "**" or "**" not in part for part in parts)
        self._parts = [
            None if part == "**" else re.compile(_translate(part), re.S) for part in parts
        ]
        self.start = self._closure({0})

    def _closure(self, states: set[int]) -> frozenset[int]:
        pending = list(states)
        while pending:
            state = pending.pop()
            if state < len(self._parts) and self._parts[state] is None and state + 1 not in states:
                states.add(state + 1)
                pending.append(state + 1)
        return frozenset(states)

    def after(self, names: Sequence[str]) -> frozenset[int] | None:
        """The pattern's positions still open after ``names``; empty: nothing below them
        can match; ``start``: what matches below does not depend on them."""
        if not self._known:
            return None
        states = self.start
        for name in names:
            moved: set[int] = set()
            for state in states:
                if state >= len(self._parts):
                    continue
                part = self._parts[state]
                if part is None:
                    moved.add(state)
                elif part.fullmatch(name):
                    moved.add(state + 1)
            states = self._closure(moved)
            if not states:
                break
        return states

    def keeps(self, source: str, target: str) -> bool:
        """Whether renaming ``source`` to ``target`` leaves every match below it matched.

        A match may depend on the name of any directory on its way (``**/secrets/*.key``
        hides ``app/secrets/api.key``, not ``app/public/api.key``): true only where
        nothing below the source can match, or where what matches below depends on no
        name of the source's path nor the target's (both taken by a leading ``**``). Above
        the base, the judge refuses the change already (the base is an anchor).
        """
        base = self._base
        if not within(source, base) or source == base:
            return True
        states = self.after(source[len(base) :].strip("/").split("/"))
        if states is not None and not states:
            return True
        return (
            states == self.start
            and within(target, base)
            and target != base
            and self.after(target[len(base) :].strip("/").split("/")) == self.start
        )


def _nothing(path: str, root: str | None) -> IgnoreRule | None:
    return None


def _joined(patterns: list[re.Pattern[str]]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    import re

    return re.compile("|".join(f"(?:{p.pattern})" for p in patterns), re.S)


def name_matches(pattern: str, name: str) -> bool:
    """Whether ``name`` matches ``pattern``, where ``*`` is the only metacharacter."""
    if "*" not in pattern:
        return pattern == name
    first, *middle, last = pattern.split("*")
    if len(name) < len(first) + len(last) or not name.startswith(first):
        return False
    if not name.endswith(last):
        return False
    position, end = len(first), len(name) - len(last)
    for part in middle:
        found = name.find(part, position, end)
        if found < 0:
            return False
        position = found + len(part)
    return True


def fixed_length(pattern: str) -> int:
    """How specific a name pattern is: the number of its non-``*`` characters."""
    return len(pattern) - pattern.count("*")
