"""The keys of partial mode's sandboxed child: the classes its results may hold, its
call timeout and its resource limits.

- ``remote-result-class=pkg.module.Class`` (list, comma-separated names allowed): with
  ``remote-result-mode=objects``, instances of these classes are rebuilt too;
  ``pkg.module:Outer.Inner`` names a nested class. A warning says when no
  ``remote-result-mode=objects`` makes them count.
- ``sandbox-timeout=30s``: the default time a call may take (``ms``, ``s``, ``m``;
  seconds without a unit); ``@sandbox(timeout=...)`` overrides it per function.
- ``sandbox-memory=512MiB``: the memory the calls may add to the idle child (``b``,
  ``kb``/``mb``/``gb`` in powers of 1000, ``kib``/``mib``/``gib`` in powers of 1024).
- ``sandbox-open-files=N``, ``sandbox-processes=N``: files the calls may open at once,
  processes and threads they may start.
"""

from __future__ import annotations

from pysandboxes._policy.model import ResultClassRule

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._policy.builder import Builder
    from pysandboxes._policy.lines import RawRule
    from pysandboxes._policy.model import Origin

KEYS = (
    "remote-result-class",
    "sandbox-timeout",
    "sandbox-memory",
    "sandbox-open-files",
    "sandbox-processes",
)
SINGLE = KEYS[1:]
# Compiled at their first use: every start of python-sb parses rules, few name these keys
# (``re`` costs milliseconds to import).
_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
_AMOUNT = r"([0-9][0-9_]*(?:\.[0-9_]*)?)\s*([A-Za-z]*)"
_TIME = {"": 1.0, "ms": 0.001, "s": 1.0, "m": 60.0}
_SIZE = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
}
#: The least memory a child can run calls in, and the most files or processes.
_MIN_MEMORY = 16 << 20
_MAX_COUNT = 1 << 20


def parse(builder: Builder, rule: RawRule) -> None:
    """Validate one line of a partial-mode key and add it to the builder."""
    value = builder.expanded(rule)
    if value is None:
        return
    origin = rule.origin
    if rule.key == "remote-result-class":
        _classes(builder, origin, value)
        return
    parsed: float | int | None
    if rule.key == "sandbox-timeout":
        parsed = _amount(value, _TIME)
        if parsed is None or parsed <= 0:
            builder.issue(origin, f"'{origin.text}': expected a duration such as 500ms, 30s or 2m")
            return
    elif rule.key == "sandbox-memory":
        amount = _amount(value, _SIZE)
        parsed = int(amount) if amount is not None else None
        if parsed is None or parsed < _MIN_MEMORY:
            builder.issue(
                origin, f"'{origin.text}': expected a size of at least 16MiB, such as 512MiB"
            )
            return
    else:
        parsed = int(value) if value.isascii() and value.isdigit() else None
        if parsed is None or not 1 <= parsed <= _MAX_COUNT:
            expected = f"expected a whole number from 1 to {_MAX_COUNT}"
            builder.issue(origin, f"'{origin.text}': {expected}")
            return
    builder.singles.setdefault(rule.key, []).append((parsed, origin))


def _classes(builder: Builder, origin: Origin, value: str) -> None:
    import re

    names: set[str] = set()
    for name in (part.strip() for part in value.split(",")):
        module, colon, qualname = name.partition(":")
        dotted = re.fullmatch(_DOTTED, module, re.ASCII) is not None
        nested = bool(colon) and re.fullmatch(_DOTTED, qualname, re.ASCII) is not None
        if dotted and (nested or (not colon and "." in module)):
            names.add(name)
        else:
            builder.issue(
                origin,
                f"'{origin.text}': '{name}' is not a class name such as package.module.Class "
                "(or package.module:Outer.Inner)",
            )
            return
    builder.add("result-classes", ResultClassRule(frozenset(names), origin))


def _amount(value: str, units: dict[str, float] | dict[str, int]) -> float | None:
    import re

    match = re.fullmatch(_AMOUNT, value.strip())
    if match is None or match.group(2).lower() not in units:
        return None
    try:
        return float(match.group(1).replace("_", "")) * units[match.group(2).lower()]
    except ValueError:
        return None


def check(builder: Builder, classes: list[ResultClassRule], objects: bool) -> None:
    """Warn about ``remote-result-class=`` lines that count for nothing."""
    if classes and not objects:
        builder.warn(
            classes[0].origin,
            "remote-result-class= has no effect without remote-result-mode=objects",
        )
