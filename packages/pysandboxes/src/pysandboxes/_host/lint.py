"""``python-sb --check``: what in a rule file is probably not what its author meant.

The parser already refuses what cannot be used (unknown keys, a scalar set twice...) and
warns about the rest it knows; this adds, from the parsed rules alone (no program runs):
rules that can never match, a grant that contains a narrower grant beside it (the narrower
line does nothing, the wider one is perhaps wider than meant), secrets granted by a line
that is not commented out, and an ``expose-rw`` over the rule file itself. It judges no
access: the verdicts are ``--explain``'s (the guards' judges).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._policy.model import ExposeRule, NetRule, Policy


def lint(policy: Policy, home: str) -> list[str]:
    """The warnings, each ``file(line): message``, in the order of the lines."""
    found: list[tuple[str, int, str]] = []

    def warn(where: str, line: int, message: str) -> None:
        found.append((where, line, message))

    for ignore in policy.ignore:
        base = ignore.base
        covered = base is None or any(
            _within(base, e.path) or _within(e.path, base) for e in policy.expose
        )
        if not covered:
            o = ignore.origin
            warn(
                o.where,
                o.line,
                f"'{o.text}' can never match: no expose-* line reaches '{base}' (an ignore= "
                "pattern hides paths inside an exposure only)",
            )
    for rule in policy.expose:
        o = rule.origin
        for other in policy.expose:
            if other is not rule and other.writable == rule.writable and _inside(other, rule):
                warn(
                    o.where,
                    o.line,
                    f"'{o.text}' grants all that '{other.origin.text}' ({other.origin.where}) "
                    "grants, and more: the narrower line does nothing; is the wider one meant?",
                )
        if rule.writable and any(_within(f, rule.path) for f in policy.rule_files):
            warn(
                o.where,
                o.line,
                f"'{o.text}' makes the rule file itself a write target: the sandbox is refused "
                "it anyway (and a rule file made there is set aside at exit); expose the "
                "directories that need writing instead",
            )
        if _secret_path(rule.path, home):
            warn(o.where, o.line, _secret(o.text, "a file of keys or credentials"))
    for rule in policy.env:
        from pysandboxes._host.learning.places import secret_variable

        if "*" not in rule.name and secret_variable(rule.name):
            warn(rule.origin.where, rule.origin.line, _secret(rule.origin.text, "a secret"))
    for rule in policy.net:
        for other in policy.net:
            if rule.allow and not other.allow and _net_covers(other, rule):
                o = rule.origin
                warn(
                    o.where,
                    o.line,
                    f"'{o.text}' can never match: '{other.origin.text}' ({other.origin.where}) "
                    "denies all of it, and DENY always wins",
                )
            elif rule.allow and other.allow and other is not rule and _net_wider(rule, other):
                o = rule.origin
                warn(
                    o.where,
                    o.line,
                    f"'{o.text}' grants all that '{other.origin.text}' ({other.origin.where}) "
                    "grants, and more: the narrower line does nothing; is the wider one meant?",
                )
    every = next((r for r in policy.imports if r.any_module), None)
    if every is not None:
        for rule in policy.imports:
            if rule is not every:
                o = every.origin
                warn(
                    o.where,
                    o.line,
                    f"'{o.text}' grants every module: '{rule.origin.text}' "
                    f"({rule.origin.where}) beside it does nothing; is '*' meant?",
                )
    found.sort(key=lambda item: (item[0].rsplit("(", 1)[0], item[1]))
    return [f"{where}: {message}" for where, _, message in found]


def _within(path: str, directory: str) -> bool:
    path, directory = os.path.normpath(path), os.path.normpath(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _inside(narrow: ExposeRule, wide: ExposeRule) -> bool:
    return wide.is_dir and narrow.path != wide.path and _within(narrow.path, wide.path)


def _secret_path(path: str, home: str) -> bool:
    from pysandboxes._host.learning.places import Context, secret_file

    context = Context("", "", home, (), frozenset(), frozenset())
    return secret_file(path, context)


def _secret(text: str, what: str) -> str:
    return (
        f"'{text}' grants {what}, not commented out: learning writes a secret commented "
        "out, granting it is a deliberate edit; keep the line only if it is meant"
    )


def _ports_cover(wide: NetRule, narrow: NetRule) -> bool:
    return all(any(lo <= a and b <= hi for lo, hi in wide.ports) for a, b in narrow.ports)


def _net_covers(wide: NetRule, narrow: NetRule) -> bool:
    """Whether ``wide`` matches every connection ``narrow`` matches."""
    if not (narrow.protos <= wide.protos and narrow.directions <= wide.directions):
        return False
    if not narrow.networks or not _ports_cover(wide, narrow):
        return False
    # Compared as integer ranges: subnet_of is typed for one IP version at a time.
    return all(
        any(
            n.version == w.version
            and int(w.network_address) <= int(n.network_address)
            and int(n.broadcast_address) <= int(w.broadcast_address)
            for w in wide.networks
        )
        for n in narrow.networks
    )


def _net_wider(wide: NetRule, narrow: NetRule) -> bool:
    return _net_covers(wide, narrow) and not _net_covers(narrow, wide)
