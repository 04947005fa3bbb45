"""python-sb: a drop-in for ``python`` that runs the program under a ``.py-sandboxes`` file.

Deliberately thin: it maps the command line onto a call into ``pysandboxes`` and formats
what comes back. Typer and rich are imported only when help or an error is rendered, so
starting a sandboxed program pays for neither.
"""

from __future__ import annotations

import sys

from ._version import __version__ as __version__

__all__ = ["__version__", "main"]


def version_text() -> str:
    """The ``--version`` text: the versions of python-sb, pysandboxes and Python."""
    import pysandboxes

    python = sys.version.split()[0]
    return f"python-sb {__version__} (pysandboxes {pysandboxes.__version__}, Python {python})"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``python-sb`` console script."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["-V"], ["--version"]):
        print(version_text())
        return 0
    from .cli import run_cli

    return run_cli(args)
