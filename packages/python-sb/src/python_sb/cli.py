"""The Typer application behind ``python-sb --help`` and its usage errors.

Running a program under the rules (complete mode) is not built yet: until then the
command says so plainly instead of pretending to sandbox anything.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from . import version_text

_EPILOG = """\
Examples:

  python-sb app.py                      run app.py under ./.py-sandboxes
  python-sb --learn -m my_server        learn the rules of a module from what it does
  python-sb --expose-ro=/data -c 'print(open("/data/x").read())'
"""

app = typer.Typer(
    name="python-sb",
    add_completion=False,
    no_args_is_help=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=_EPILOG,
    help="Run a Python program under the deny-by-default rules of a .py-sandboxes file.",
)


@app.command()
def _command(
    program: Annotated[
        list[str] | None,
        typer.Argument(help="script | -m module | -c command | - , then its arguments"),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", "-V", help="Print the versions and exit.")
    ] = False,
    learn: Annotated[
        str | None,
        typer.Option("--learn", help="Learn the rules from what the program does (FILE)."),
    ] = None,
    config: Annotated[
        str | None,
        typer.Option("--pysandboxes-config", help="The rule file to use.", metavar="FILE"),
    ] = None,
) -> None:
    if version:
        typer.echo(version_text())
        raise typer.Exit(0)
    typer.echo(
        "python-sb: running a program under the rules (complete mode) is not built yet; "
        "this release provides --version and --help only.",
        err=True,
    )
    raise typer.Exit(2)


def run_cli(args: list[str]) -> int:
    """Run the Typer application on ``args`` and return the exit status."""
    try:
        app(args=args, prog_name="python-sb", standalone_mode=True)
    except SystemExit as exit_:
        code = exit_.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    return 0
