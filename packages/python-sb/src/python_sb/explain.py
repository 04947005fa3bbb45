"""``python-sb --explain RESOURCE`` and ``python-sb --check``: ask the rules, run nothing.

``--explain`` prints the verdict on one resource, the line that decided it (or the line
that would allow it) and the layers that enforce it here; exit 0 when allowed, 1 when
refused. ``--check`` prints the rule file's problems to stderr; exit 0 unless the rules
cannot be used (255, each error as ``file(line): message``). Imported only for these
options: a normal start never pays for them.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from python_sb.argv import Invocation

CONFIG_ERROR = 255


def explain(invocation: Invocation) -> int:
    """Print the verdict on ``invocation.resource``; return 0 allowed, 1 refused."""
    from pysandboxes._api.explain import explain as judge
    from pysandboxes.errors import ConfigSyntaxError, OSLayerUnavailable

    try:
        verdicts = judge(invocation.described(), os.getcwd(), os.environ, invocation.resource)
    except ConfigSyntaxError as exc:
        from python_sb.errors import report

        report(exc)
        return CONFIG_ERROR
    except (OSLayerUnavailable, ValueError) as exc:
        print(f"python-sb: {exc}", file=sys.stderr)
        return CONFIG_ERROR if isinstance(exc, OSLayerUnavailable) else 2
    for verdict in verdicts:
        word = "ALLOWED" if verdict.allowed else "REFUSED"
        print(f"{verdict.what}: {word}")
        if verdict.decided_by:
            print(f"  decided by: {verdict.decided_by}")
        elif verdict.allowed:
            print("  decided by: no rule: granted without one (not a guarded resource)")
        else:
            print("  decided by: no rule: nothing allows it")
        if verdict.fix:
            print(f"  would allow it: {verdict.fix}")
        kernel = verdict.kernel or "none"
        print(f"  enforced by: Python layer: {verdict.python or 'none'}; kernel layer: {kernel}")
        if verdict.note:
            print(f"  note: {verdict.note}")
    return 0 if verdicts[0].allowed else 1


def check(invocation: Invocation) -> int:
    """Lint the rules of the run ``invocation`` describes; warnings to stderr."""
    from pysandboxes._host.launchplan import load_rules
    from pysandboxes._host.lint import lint
    from pysandboxes.errors import ConfigSyntaxError

    try:
        policy, found = load_rules(invocation.described(), os.getcwd(), os.environ)
    except ConfigSyntaxError as exc:
        from python_sb.errors import report

        report(exc)
        return CONFIG_ERROR
    warnings = [*policy.warnings, *lint(policy, os.environ.get("HOME", ""))]
    for warning in warnings:
        print(f"{warning}", file=sys.stderr)
    if found.path is None and not invocation.rules:
        print("python-sb: no rule file here to check (python-sb --template prints one)")
        return 0
    where = found.path or "the rules given"
    count = f"{len(warnings)} warning(s)" if warnings else "no warning"
    print(f"python-sb: {os.path.relpath(where) if found.path else where}: {count}")
    return 0
