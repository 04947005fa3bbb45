"""How ``python-sb`` shows a configuration error: every problem, with its line.

Under the error's own heading: a syntax error, or a refusal at start-up of rules that
read well but would open a way around the sandbox.

On a terminal each problem comes with an excerpt of the rule file and the offending line
marked (rich); on a pipe, the plain ``file(line): message`` lines, one per problem.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes.errors import ConfigSyntaxError


def report(exc: ConfigSyntaxError) -> None:
    """Print ``exc`` on standard error."""
    if not sys.stderr.isatty():
        print(exc, file=sys.stderr)
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(stderr=True)
    console.print(Text(exc.heading, style="bold red"))  # a start-up refusal has its own
    for issue in exc.errors:
        console.print(Text(str(issue), style="red"))
        for number, line in _excerpt(issue.source, issue.line):
            marker = "→" if number == issue.line else " "
            style = "bold" if number == issue.line else "dim"
            console.print(Text(f"  {marker} {number:>4} │ {line}", style=style))


def _excerpt(source: str, line: int, around: int = 2) -> list[tuple[int, str]]:
    if line <= 0 or source.startswith("<") or not os.path.isfile(source):
        return []
    try:
        with open(source, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    first = max(1, line - around)
    return [(n, lines[n - 1]) for n in range(first, min(len(lines), line + around) + 1)]
