"""The keys of the decision log: where it goes, what it keeps, and the exit summary.

- ``audit-log=PATH``: every decision of the Python layer, allowed and refused, is written
  to ``PATH`` as JSON Lines by the trusted side (see ``_wire.decisions``). A relative path
  is read from the rule file's directory (the working directory for ``--audit-log=``).
- ``audit-log-level=all|refused``: ``refused`` keeps only the refusals (``all`` by default).
- ``quiet-refusals=true``: no summary of the refusals on stderr at exit.
"""

from __future__ import annotations

import os

from pysandboxes._policy.lines import expand_home

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._policy.builder import Builder
    from pysandboxes._policy.lines import RawRule

KEYS = ("audit-log", "audit-log-level", "quiet-refusals")
LEVELS = ("all", "refused")
_TRUE = ("true", "1", "on", "yes", "")
_FALSE = ("false", "0", "off", "no")


def parse(builder: Builder, rule: RawRule) -> None:
    """Validate one line of a decision-log key and add it to the builder."""
    value = builder.expanded(rule)
    if value is None:
        return
    origin = rule.origin
    parsed: object
    if rule.key == "audit-log":
        home = expand_home(value, builder.env) if value else None
        if home is None:
            builder.issue(origin, f"'{origin.text}': audit-log= takes the file to write")
            return
        parsed = os.path.normpath(os.path.join(rule.base, home))
        if not os.path.isdir(os.path.dirname(str(parsed))):
            builder.issue(origin, f"'{origin.text}': the directory of '{parsed}' must exist")
            return
    elif rule.key == "audit-log-level":
        parsed = value.strip().lower()
        if parsed not in LEVELS:
            builder.issue(origin, f"'{origin.text}': expected all or refused")
            return
    else:
        lowered = value.strip().lower()
        if lowered not in (*_TRUE, *_FALSE):
            builder.issue(origin, f"'{origin.text}': expected true or false")
            return
        parsed = lowered in _TRUE
    builder.singles.setdefault(rule.key, []).append((parsed, origin))
