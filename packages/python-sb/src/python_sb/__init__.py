"""python-sb: a drop-in for ``python`` that runs the program under a ``.py-sandboxes`` file.

Deliberately thin: it maps the command line onto a call into ``pysandboxes`` and formats
what comes back. Typer and rich are imported only when help is rendered, so starting a
sandboxed program pays for neither.
"""

from __future__ import annotations

import gc
import os
import sys

from python_sb._version import __version__ as __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["__version__", "main"]

#: Exit status of a configuration error, as CPython-compatible tools use for "cannot start".
CONFIG_ERROR = 255
#: Exit status when nothing was run for want of rules (no terminal to ask, or the answer
#: was no): the program could not start, as with a configuration error.
NOTHING_RUN = CONFIG_ERROR


def version_text() -> str:
    """The ``--version`` text: the versions of python-sb, pysandboxes and Python."""
    import pysandboxes

    python = sys.version.split()[0]
    return f"python-sb {__version__} (pysandboxes {pysandboxes.__version__}, Python {python})"


def main(args: list[str] | None = None) -> int:
    """Entry point of the ``python-sb`` console script."""
    # The cyclic collector waits while python-sb starts: its imports and the rules make no
    # garbage worth the milliseconds, and a run replaces this process (exec) at once.
    gc.disable()
    try:
        return _main(args)
    finally:
        gc.enable()


def _main(args: list[str] | None) -> int:
    from python_sb.argv import UsageError, split

    try:
        invocation = split(sys.argv[1:] if args is None else args)
    except UsageError as exc:
        print(f"python-sb: {exc}\nTry 'python-sb --help' for more information.", file=sys.stderr)
        return 2
    if invocation.action == "version":
        print(version_text())
        return 0
    if invocation.action == "help":
        from python_sb.cli import run_cli

        return run_cli(["--help"])
    if invocation.action == "python-help":
        os.execv(sys.executable, [sys.executable, invocation.target])
    if invocation.action == "show-rules":
        return _run(invocation, show=True)
    if invocation.action == "template":
        from pysandboxes._policy.template import TEMPLATE

        sys.stdout.write(TEMPLATE)
        return 0
    if invocation.action == "replay":
        from python_sb.replay import show as show_replay

        return show_replay(invocation)
    if invocation.action in ("explain", "check"):
        from python_sb.explain import check, explain

        return explain(invocation) if invocation.action == "explain" else check(invocation)
    if invocation.action == "show-layers":
        from python_sb.layers import show as show_layers

        return show_layers(invocation)
    return _run(invocation)


def _first_run(request: Any, rules: Any) -> Any:
    """With no rule file, learning happens only when the user says so: asked at a
    terminal (``--learn`` answers yes in advance), refused without one. An interactive
    session is never learned unasked: it starts under the template's rules. ``rules``:
    those of ``request``, read once for the whole run."""
    from pysandboxes._host.launchplan import learns_unasked, without_rule_file
    from pysandboxes._record import replace

    here = os.getcwd()
    if request.program.kind == "repl" and without_rule_file(request, here, os.environ, rules):
        return _template_session(request)
    output = learns_unasked(request, here, os.environ, rules)
    if output is None:
        return request
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return replace(request, first_run=False)  # the library says how to learn
    shown = os.path.relpath(output)
    sys.stderr.write(
        f"python-sb: no rule file here yet ({shown}). This run can LEARN the rules: the "
        "program runs with NOTHING refused (it sees your files, variables and network), "
        f"and what it used is written to {shown} for you to review. Run untrusted code "
        "only once you have rules.\nLearn now? [y/N] "
    )
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        sys.stderr.write("python-sb: nothing was run. Write rules (python-sb --template).\n")
        return None
    return replace(request, learn="")


def _template_session(request: Any) -> Any:
    """The session of a directory with no rule file: the template's rules (the standard
    library's pure modules, nothing else), and how to grant more."""
    from pysandboxes._policy.template import active_lines
    from pysandboxes._record import replace
    from pysandboxes._wire.spec import TEMPLATE_SESSION, Program

    sys.stderr.write(
        "python-sb: no rule file here: this session runs under the template's rules "
        "(the standard library's pure modules: json, re, math, pathlib...; no file, "
        "variable, network or process). Grant more for one session with rules before "
        "the program (python-sb --expose-ro=. --python-import=requests), or write a rule "
        "file: python-sb --template > .py-sandboxes, then edit it.\n"
    )
    program = Program("repl", TEMPLATE_SESSION)
    return replace(request, program=program, extra_rules=(*active_lines(), *request.extra_rules))


def _run(invocation: object, *, show: bool = False) -> int:
    from pysandboxes._host.launch import run
    from pysandboxes._host.launchplan import LaunchRequest, load_rules
    from pysandboxes._wire.spec import Program
    from pysandboxes.errors import ConfigSyntaxError, OSLayerUnavailable
    from python_sb.argv import Invocation

    assert isinstance(invocation, Invocation)
    kind = invocation.kind
    if kind == "interactive":
        kind = "repl" if sys.stdin.isatty() else "stdin"
    request = LaunchRequest(
        program=Program(kind, invocation.target, invocation.args),
        python_flags=invocation.python_flags,
        config=invocation.config,
        extra_rules=invocation.rules,
        learn=invocation.learn,
        summary="python_sb.summary:show",  # rich on a terminal, in the waiter
    )
    try:
        if show:
            from python_sb.rules import show as show_rules

            return show_rules(request)
        rules = load_rules(request, os.getcwd(), os.environ)
        first = _first_run(request, rules)
        if first is None:
            return NOTHING_RUN
        # Whether it learns changes nothing of its rules; a template session has others.
        same = (first.program, first.extra_rules) == (request.program, request.extra_rules)
        return run(first, rules=rules if same else None)
    except ConfigSyntaxError as exc:
        from python_sb.errors import report

        report(exc)
        return CONFIG_ERROR
    except OSLayerUnavailable as exc:
        print(f"python-sb: {exc}", file=sys.stderr)
        return CONFIG_ERROR
