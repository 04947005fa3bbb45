"""The help of ``python-sb``, rendered by Typer: rich on a terminal, plain text on a pipe.

The command line itself is split by ``argv.split`` (CPython's rules cannot be expressed
as Typer options: everything after the program is the program's); this Typer command
exists to document it, so its parameters mirror what ``split`` accepts.
"""

from __future__ import annotations

from typing import Annotated

import typer

SANDBOX = "Sandbox options"
PYTHON = "Python options"
EPILOG = """\
Examples:

  python-sb app.py --port 8000
      run app.py under the .py-sandboxes next to it
  python-sb --expose-ro=./data -m tool
      add a rule for this run only
  python-sb --show-rules app.py
      list the rules in force and where each comes from
  python-sb --show-layers
      which layer enforces each rule on this host
  python-sb --explain import:requests
      may the program import requests? which line says so?
  python-sb --check
      lint the rule file
  python-sb --learn app.py
      add the rules app.py needs to its rule file
  python-sb --template > .py-sandboxes
      start a rule file by hand: every key explained, commented
  python-sb --audit-log=a.jsonl app.py
      log every decision (--quiet-refusals: no summary at exit)

Any rule of the rule file can be given as --<key>=<value> before the program;
a learn=false line in the file refuses them. Configuration errors, and a run
refused for want of rules, exit with status 255.
"""


def build(rich: bool) -> typer.Typer:
    """The Typer application (``rich``: draw the option panels)."""
    app = typer.Typer(
        name="python-sb",
        add_completion=False,
        rich_markup_mode="rich" if rich else None,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    )

    @app.command(
        help="Run a Python program under the deny-by-default rules of a .py-sandboxes file.",
        epilog=EPILOG,
    )
    def python_sb(  # pyright: ignore[reportUnusedFunction]
        program: Annotated[
            list[str] | None,
            typer.Argument(
                metavar="[script | -m module | -c command | -] [args]...",
                help="What to run, as with python; everything after it is the program's.",
                show_default=False,
            ),
        ] = None,
        learn: Annotated[
            str | None,
            typer.Option(
                "--learn",
                metavar="[=FILE]",
                help=(
                    "Learn the rules from what the program does: nothing is refused, "
                    "the missing rules go into the rule file (or FILE)."
                ),
                rich_help_panel=SANDBOX,
            ),
        ] = None,
        config: Annotated[
            str | None,
            typer.Option(
                "--pysandboxes-config",
                metavar="FILE",
                help="The rule file to use instead of the one found.",
                rich_help_panel=SANDBOX,
            ),
        ] = None,
        show_rules: Annotated[
            bool,
            typer.Option(
                "--show-rules",
                help="Print the rules in force and the file and line of each, then exit.",
                rich_help_panel=SANDBOX,
            ),
        ] = False,
        show_layers: Annotated[
            str | None,
            typer.Option(
                "--show-layers",
                metavar="[=json]",
                help="Print which layer enforces each rule on this host (Python, Landlock, "
                "namespaces), then exit; =json for JSON.",
                rich_help_panel=SANDBOX,
            ),
        ] = None,
        replay: Annotated[
            str | None,
            typer.Option(
                "--replay",
                metavar="LOG",
                help="Judge the accesses of a decision log (--audit-log) against the rules "
                "in force; print what would change; exit 1 if an allowed one is now refused.",
                rich_help_panel=SANDBOX,
            ),
        ] = None,
        explain: Annotated[
            str | None,
            typer.Option(
                "--explain",
                metavar="RESOURCE",
                help="Print the verdict on RESOURCE (a path, env:NAME, net:HOST:PORT, "
                "import:MODULE, api:NAME, eval:EXPR), the line that decided it and the "
                "layers that enforce it, then exit: 0 allowed, 1 refused.",
                rich_help_panel=SANDBOX,
            ),
        ] = None,
        check: Annotated[
            bool,
            typer.Option(
                "--check",
                help="Lint the rule file (never-matching, overlapping and secret grants...); "
                "warnings on stderr; exit 0 unless it cannot be used.",
                rich_help_panel=SANDBOX,
            ),
        ] = False,
        template: Annotated[
            bool,
            typer.Option(
                "--template",
                help="Print the rule-file template (every key explained, commented; the "
                "standard library's pure modules granted), then exit.",
                rich_help_panel=SANDBOX,
            ),
        ] = False,
        audit_log: Annotated[
            str | None,
            typer.Option(
                "--audit-log",
                metavar="=FILE",
                help="Log every decision to FILE, one JSON line each (the rule "
                "audit-log=FILE); read it again with --replay.",
                rich_help_panel=SANDBOX,
            ),
        ] = None,
        quiet_refusals: Annotated[
            bool,
            typer.Option(
                "--quiet-refusals",
                help="No summary of the refusals at exit (the rule quiet-refusals=true).",
                rich_help_panel=SANDBOX,
            ),
        ] = False,
        rule: Annotated[
            str | None,
            typer.Option(
                "--<key>",
                metavar="=<value>",
                help="Any rule, e.g. --expose-ro=/data or --env=LANG=${LANG}.",
                rich_help_panel=SANDBOX,
            ),
        ] = None,
        unbuffered: Annotated[
            bool, typer.Option("-u", help="Unbuffered stdout and stderr.", rich_help_panel=PYTHON)
        ] = False,
        no_bytecode: Annotated[
            bool, typer.Option("-B", help="Do not write .pyc files.", rich_help_panel=PYTHON)
        ] = False,
        ignore_env: Annotated[
            bool,
            typer.Option(
                "-E", help="Ignore PYTHON* environment variables.", rich_help_panel=PYTHON
            ),
        ] = False,
        isolate: Annotated[
            bool, typer.Option("-I", help="Isolate from the user's site.", rich_help_panel=PYTHON)
        ] = False,
        inspect: Annotated[
            bool,
            typer.Option("-i", help="Inspect interactively after running.", rich_help_panel=PYTHON),
        ] = False,
        optimize: Annotated[
            bool,
            typer.Option(
                "-O", help="Remove asserts (-OO: docstrings too).", rich_help_panel=PYTHON
            ),
        ] = False,
        quiet: Annotated[
            bool,
            typer.Option("-q", help="No banner at the prompt.", rich_help_panel=PYTHON),
        ] = False,
        no_user_site: Annotated[
            bool, typer.Option("-s", help="No user site directory.", rich_help_panel=PYTHON)
        ] = False,
        no_site: Annotated[
            bool, typer.Option("-S", help="Do not import site.", rich_help_panel=PYTHON)
        ] = False,
        verbose: Annotated[
            bool, typer.Option("-v", help="Trace imports.", rich_help_panel=PYTHON)
        ] = False,
        warnings: Annotated[
            str | None,
            typer.Option("-W", metavar="ARG", help="Warning control.", rich_help_panel=PYTHON),
        ] = None,
        xoption: Annotated[
            str | None,
            typer.Option(
                "-X", metavar="OPT", help="Implementation option.", rich_help_panel=PYTHON
            ),
        ] = None,
        version: Annotated[
            bool,
            typer.Option(
                "--version",
                "-V",
                help="Print the versions of python-sb, pysandboxes and Python.",
                rich_help_panel=PYTHON,
            ),
        ] = False,
    ) -> None:
        """Documentation only: ``python_sb.main`` does the work."""

    return app


def run_cli(args: list[str]) -> int:
    """Render the help (the only thing Typer is used for) and return the exit status."""
    # Rich draws the two option panels; without a terminal it prints them with no colour
    # or escape codes, so a pipe gets plain text.
    app = build(rich=True)
    try:
        app(args=args, prog_name="python-sb", standalone_mode=True)
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else 0 if code is None else 1
    return 0
