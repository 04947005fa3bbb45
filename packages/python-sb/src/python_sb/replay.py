"""``python-sb --replay=LOG``: the accesses of a decision log judged by the rules in force.

Prints what would change and exits with 1 when an access the log shows allowed would now
be refused (a narrowed rule breaks the program), else 0; 255 when the rules or the log
cannot be read.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._host.replay import Change
    from python_sb.argv import Invocation

#: Changes listed one by one in each direction; the rest are counted.
SHOWN = 50


def show(invocation: Invocation) -> int:
    """Judge the log again; print the changes; return the exit status."""
    from pysandboxes._host.launchplan import load_rules
    from pysandboxes._host.replay import LogUnreadable, read_log, replay
    from pysandboxes.errors import ConfigSyntaxError

    request = invocation.described()
    try:
        policy, found = load_rules(request, os.getcwd(), os.environ)
    except ConfigSyntaxError as exc:
        from python_sb.errors import report

        report(exc)
        return 255
    try:
        with open(invocation.log, encoding="utf-8", errors="strict") as handle:
            decisions = read_log(handle, invocation.log)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"python-sb: cannot read the decision log {invocation.log}: {exc}", file=sys.stderr)
        return 255
    except LogUnreadable as exc:
        print(f"python-sb: not a decision log: {exc}", file=sys.stderr)
        return 255
    result = replay(decisions, policy)
    rules = found.path or "the rules given"
    print(
        f"python-sb: {result.judged} recorded access(es) judged against {rules}"
        + (f" ({result.skipped} granted without a rule, unchanged)" if result.skipped else "")
    )
    _section("now REFUSED (allowed when recorded)", result.now_refused)
    _section("now allowed (refused when recorded)", result.now_allowed)
    if not result.now_refused and not result.now_allowed:
        print("nothing would change")
    return 1 if result.now_refused else 0


def _section(title: str, changes: tuple[Change, ...]) -> None:
    if not changes:
        return
    print(f"{title}: {len(changes)}")
    for change in changes[:SHOWN]:
        decision = change.decision
        where = f" at {decision.where}" if decision.where else ""
        times = f" x{decision.count}" if decision.count > 1 else ""
        print(f"  {decision.kind} {decision.target} ({decision.access}){where}{times}")
        print(f"    decided by: {change.rule}")
    if len(changes) > SHOWN:
        print(f"  ... and {len(changes) - SHOWN} more")
