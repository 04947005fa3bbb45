"""Partial mode, the trusted side: what is left to do once a child has ended.

Its rule files are checked (a child may have changed or planted one, see
``_host.rulewatch``), its temporary directory removed, and a learning run concluded
with what the child reported and the classes its results held.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._host.learning.conclude import Collector
    from pysandboxes._host.learning.plan import LearnRun
    from pysandboxes._wire.spec import LaunchSpec


def check_rule_files(watch: bytes) -> None:
    """Set back the rules of the next run if the child changed or planted one, saying
    so on stderr (``watch``: the snapshot taken at its start; empty: nothing watched)."""
    if not watch:
        return
    from pysandboxes._host.rulewatch import check

    try:
        changed = check(watch)
    except Exception as exc:  # a bug here must not cost the application its exit
        changed = [f"the rule files could not be checked ({exc!r}): review them"]
    for message in changed:
        print(f"pysandboxes: {message}", file=sys.stderr)


def remove_tempdir(spec: LaunchSpec) -> None:
    """Remove the child's temporary directory, if it had one."""
    if spec.tempdir:
        from pysandboxes._host.waiter import remove_tree

        remove_tree(spec.tempdir)


def conclude_learning(
    learning: LearnRun,
    collector: Collector,
    results_seen: dict[str, tuple[bool, str]] | None,
    spec: LaunchSpec,
) -> None:
    """Write what a learning child used, and the classes its results held
    (``results_seen``: name -> (the application's own, where)), and show the summary."""
    from pysandboxes._host.learning.conclude import conclude, show
    from pysandboxes._wire.events import Event

    seen = [
        Event("result", name, "own" if own else "named", where=where)
        for name, (own, where) in (results_seen or {}).items()
    ]
    plan = learning.plan(os.getcwd(), os.environ, spec.policy, spec.protected, partial=True)
    summary = conclude(plan, collector.finish(), seen)
    if summary is not None:
        show(summary)
