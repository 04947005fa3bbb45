"""The environment the sandbox receives, resolved from ``env=`` / ``unenv=`` and the host.

The sandboxed interpreter is spawned with exactly this mapping and nothing else, so
``os.environ``, ``/proc/self/environ`` and native ``getenv`` agree.

Resolution does not depend on line order: ``unenv`` removes a name whatever else says;
an exact ``env=NAME`` beats any pattern; among patterns the one with more fixed characters
wins, and two equally specific patterns giving different values are an error naming both.
A value built from ``${...}`` that comes out empty leaves the variable absent, so
``os.getenv(name, default)`` keeps working.
"""

from __future__ import annotations

from pysandboxes._policy.expand import expand, has_reference
from pysandboxes._policy.globs import fixed_length, name_matches
from pysandboxes.errors import ConfigIssue, ConfigSyntaxError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from pysandboxes._policy.model import EnvRule, Policy


def _value(rule: EnvRule, name: str, host: Mapping[str, str]) -> str | None:
    template = (
        rule.template.replace("${" + rule.name, "${" + name) if "*" in rule.name else rule.template
    )
    value = expand(template, host)
    if not value and has_reference(rule.template):
        return None
    return value


def resolve_env(policy: Policy, host: Mapping[str, str]) -> dict[str, str]:
    """The variables of the sandbox, from the rules and the ``host`` environment.

    Raises:
        ConfigSyntaxError: two equally specific patterns give one variable different values.
    """
    exact: dict[str, EnvRule] = {}
    patterns: list[EnvRule] = []
    for rule in policy.env:
        if "*" in rule.name:
            patterns.append(rule)
        else:
            exact[rule.name] = rule
    removed = [rule.pattern for rule in policy.unenv]
    result: dict[str, str] = {}
    issues: list[ConfigIssue] = []

    for name, rule in exact.items():
        value = _value(rule, name, host)
        if value is not None:
            result[name] = value
    for name in host:
        if name in exact or not patterns:
            continue
        matching = [r for r in patterns if name_matches(r.name, name)]
        if not matching:
            continue
        best = max(fixed_length(r.name) for r in matching)
        winners = [r for r in matching if fixed_length(r.name) == best]
        values = {r.origin: _value(r, name, host) for r in winners}
        if len(set(values.values())) > 1:
            first, second = winners[0], winners[1]
            issues.append(
                ConfigIssue(
                    second.origin.source,
                    second.origin.line,
                    f"{second.origin} and {first.origin} give {name} different values and are "
                    f"as specific: make one more specific, or add env={name}=...",
                )
            )
            continue
        value = values[winners[0].origin]
        if value is not None:
            result[name] = value
    if issues:
        raise ConfigSyntaxError(issues)
    for pattern in removed:
        for name in [n for n in result if name_matches(pattern, n)]:
            del result[name]
    return result
