"""Host names in ``net=`` rules, matched as names: ``api.github.com``, ``*.githubusercontent.com``.

A name is compared as DNS compares it: without regard to ASCII case, and with one final
dot ignored (``API.GitHub.com.`` is ``api.github.com``). A pattern ``*.suffix`` matches
every name that ends with ``.suffix`` and has at least one whole label before it:
``*.githubusercontent.com`` matches ``raw.githubusercontent.com`` and
``a.b.githubusercontent.com``, never ``githubusercontent.com`` itself nor
``evilgithubusercontent.com``. The ``*`` stands for whole labels only, and only first:
``api.*.com`` and ``a*.example.com`` are errors. ``*`` alone is not a name pattern: it
stays "every address".

The names a program connects to are judged here as they were asked for; what they
resolve to is judged by the address rules and ``netclasses`` (the SSRF-safe defaults).
"""

from __future__ import annotations

from pysandboxes._policy.netrules import is_name_pattern as is_name_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from pysandboxes._policy.model import NetRule

#: A pattern's wildcard prefix: ``*.`` before the suffix it matches below.
WILDCARD = "*."


def normalise(name: str) -> str:
    """``name`` as it is compared: lower case (ASCII), one final dot dropped."""
    name = name.lower()
    return name[:-1] if name.endswith(".") else name


def matches(pattern: str, name: str) -> bool:
    """Whether the normalised ``name`` is the normalised ``pattern`` (a name or
    ``*.suffix``)."""
    if pattern.startswith(WILDCARD):
        suffix = pattern[1:]  # ".suffix": at least one label must come before it
        return name.endswith(suffix) and len(name) > len(suffix)
    return name == pattern


class NameIndex:
    """The ``net=`` rules that name hosts, found by the name a program asks for: a dict
    lookup for the exact names, then one per label for the wildcards."""

    def __init__(self, rules: Iterable[NetRule]) -> None:
        self._exact: dict[str, list[NetRule]] = {}
        self._below: dict[str, list[NetRule]] = {}  # "suffix" of "*.suffix"
        for rule in rules:
            if rule.host is None:
                continue
            pattern = normalise(rule.host)
            if pattern.startswith(WILDCARD):
                self._below.setdefault(pattern[len(WILDCARD) :], []).append(rule)
            else:
                self._exact.setdefault(pattern, []).append(rule)

    def __bool__(self) -> bool:
        return bool(self._exact or self._below)

    def rules(self, name: str) -> list[NetRule]:
        """The rules whose host matches ``name`` (any spelling), exact names first."""
        name = normalise(name)
        found = list(self._exact.get(name, ()))
        if self._below:
            rest = name
            while True:
                dot = rest.find(".")
                if dot < 0:
                    break
                rest = rest[dot + 1 :]
                found.extend(self._below.get(rest, ()))
        return found

    def find(self, proto: str, name: str, port: int, direction: str) -> NetRule | None:
        """The first rule naming ``name`` for this protocol, port and direction."""
        for rule in self.rules(name):
            if proto in rule.protos and direction in rule.directions:
                for low, high in rule.ports:
                    if low <= port <= high:
                        return rule
        return None
