"""``python-sb --show-rules``: the rules in force, each with the file and line it came from.

A rich table on a terminal, plain ``file(line)  rule`` lines on a pipe.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._host.launchplan import LaunchRequest


def rule_lines(request: LaunchRequest) -> tuple[str, list[tuple[str, str]]]:
    """The rule file used and ``(place, rule)`` pairs, in the order they were read."""
    from pysandboxes._host.launchplan import load_rules

    cwd = os.getcwd()
    policy, found = load_rules(request, cwd, os.environ)
    origins = [
        rule.origin
        for family in (
            policy.expose,
            policy.ignore,
            policy.env,
            policy.unenv,
            policy.net,
            policy.imports,
            policy.api,
            policy.eval,
            policy.provider_options,
        )
        for rule in family
    ]
    singles = (
        policy.py_sandbox,
        policy.os_sandbox,
        policy.remote_result_mode,
        policy.remote_result_guard,
        policy.learn,
    )
    origins += [setting.origin for setting in singles if setting is not None]
    if policy.learn_lock is not None:
        origins.append(policy.learn_lock)
    origins.sort(key=lambda o: (o.source != "<arg>", o.source, o.line))
    if found.path is not None:
        rule_file = found.path
    elif request.extra_rules:
        rule_file = "(none: command-line rules only)"
    else:  # the run would not enforce anything: say what it would do instead
        rule_file = (
            f"(none: no rule file, so a run would ask at a terminal whether to learn one into "
            f"{os.path.relpath(found.default)}, and stop without a terminal; nothing is enforced)"
        )
    return rule_file, [(origin.where, origin.text) for origin in origins]


def show(request: LaunchRequest) -> int:
    """Print the rules in force; returns the exit status."""
    rule_file, rows = rule_lines(request)
    if not sys.stdout.isatty():
        print(f"# rules from {rule_file}")
        width = max((len(place) for place, _ in rows), default=0)
        for place, text in rows:
            print(f"{place:<{width}}  {text}")
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Rules from {rule_file}", title_justify="left")
    table.add_column("from", style="cyan", no_wrap=True)
    table.add_column("rule")
    for place, text in rows:
        table.add_row(place, text)
    Console().print(table)
    return 0
