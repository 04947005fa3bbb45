"""The state of one parse: the rules and the issues gathered while the lines are read.

``parser`` drives it; each family check in ``families`` validates one line and adds to it.
"""

from __future__ import annotations

from pysandboxes._policy.expand import ExpansionError, expand
from pysandboxes.errors import ConfigIssue

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from pysandboxes._policy.lines import RawRule
    from pysandboxes._policy.model import Origin
    from pysandboxes._policy.netrules import Resolver


class Builder:
    """Accumulates rules and issues while the lines are read."""

    def __init__(self, cwd: str, env: Mapping[str, str], resolve_host: Resolver | None) -> None:
        self.cwd = cwd
        self.env = env
        self.resolve_host = resolve_host
        self.issues: list[ConfigIssue] = []
        self.warnings: list[str] = []
        self.lists: dict[str, list[Any]] = {}
        self.singles: dict[str, list[tuple[Any, Origin]]] = {}
        self.lock: Origin | None = None
        self.extra: list[Origin] = []

    def issue(self, origin: Origin, message: str) -> None:
        self.issues.append(ConfigIssue(origin.source, origin.line, message))

    def warn(self, origin: Origin, message: str) -> None:
        self.warnings.append(f"{origin.where}: {message}")

    def add(self, family: str, item: object) -> None:
        self.lists.setdefault(family, []).append(item)

    def expanded(self, rule: RawRule) -> str | None:
        try:
            return expand(rule.value, self.env)
        except ExpansionError as exc:
            self.issue(rule.origin, f"in '{rule.origin.text}': {exc}")
            return None
