"""The summary of a learning run: a rich table on a terminal, plain text on a pipe.

``pysandboxes`` returns the summary as a value and imports this renderer by the name
``python-sb`` gave it (``python_sb.summary:show``); the library never imports rich. It
writes to stderr: stdout belongs to the program.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from pysandboxes._host.learning.conclude import plain_summary


def show(
    title: str,
    rows: Sequence[tuple[str, str, str]],
    notes: Sequence[str],
    stream: TextIO,
) -> None:
    """Print the learned rules (family, rule, first seen at) and the notes."""
    if not stream.isatty():
        plain_summary(title, rows, notes, stream)
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    # Text, never markup: paths and code locations come from the program, and "[/]" or
    # "[conceal]" in them would hide a row or stop the table (after the file was written).
    table = Table(title=Text(title), title_justify="left")
    table.add_column("family")
    table.add_column("rule", overflow="fold")
    table.add_column("first seen at", overflow="fold")
    for family, rule, where in rows:
        table.add_row(Text(family), Text(rule), Text(where))
    console = Console(file=stream, highlight=False)
    console.print(table)
    for note in notes:
        console.print(f"note: {note}", markup=False)
