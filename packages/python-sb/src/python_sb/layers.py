"""``python-sb --show-layers``: which layer enforces each rule on this host.

A rich table on a terminal, tab-separated lines on a pipe, JSON with ``--show-layers=json``.
"""

from __future__ import annotations

import json
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from python_sb.argv import Invocation


def show(invocation: Invocation) -> int:
    """Print the report; returns the exit status (255 when the rules cannot be used)."""
    try:
        return _show(invocation)
    except BrokenPipeError:
        # The reader (head, less) stopped reading: not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _show(invocation: Invocation) -> int:
    from pysandboxes._api.report import layer_report
    from pysandboxes.errors import ConfigSyntaxError, OSLayerUnavailable

    request = invocation.described()
    try:
        report = layer_report(request, os.getcwd(), os.environ)
    except ConfigSyntaxError as exc:
        from python_sb.errors import report as report_error

        report_error(exc)
        return 255
    except OSLayerUnavailable as exc:
        print(f"python-sb: {exc}", file=sys.stderr)
        return 255
    if invocation.report == "json":
        print(json.dumps(report.as_dict(), indent=2))
        return 0
    heading = f"os-sandbox={report.provider} ({report.source}): {report.detail}"
    passed = [f"  '{p}' cannot run here: {why}" for p, why in report.passed_over]
    if not sys.stdout.isatty():
        print(f"# {heading}", *passed, sep="\n")
        for row in report.rows:
            print("\t".join((row.place, row.rule, row.python or "-", row.kernel or "-", row.note)))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=heading, title_justify="left")
    for column in ("from", "rule", "Python layer", "kernel layer", "not enforced by the kernel"):
        table.add_column(column)
    for row in report.rows:
        kernel = row.kernel or "[red]—[/red]"
        table.add_row(row.place, row.rule, row.python or "—", kernel, row.note)
    console = Console()
    for line in passed:
        console.print(line)
    console.print(table)
    return 0
