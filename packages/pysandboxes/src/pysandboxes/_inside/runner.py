"""Run the program as CPython would: ``__main__``, ``sys.argv``, ``sys.path[0]``, exit.

A script runs in the real ``__main__`` module, ``-m`` through ``runpy`` like CPython
itself, ``-c`` and piped standard input as ``<string>`` and ``<stdin>``. An uncaught
exception goes through ``sys.excepthook`` once, with the frames of this framework cut
away, and ends the process with status 1; ``KeyboardInterrupt`` ends it by SIGINT, as
CPython does.
"""

from __future__ import annotations

import os
import sys

from pysandboxes._inside import repl as _repl
from pysandboxes._inside.repl import PS1, PS2
from pysandboxes._inside.tracebacks import prompt_excepthook, user_traceback
from pysandboxes._wire.spec import TEMPLATE_SESSION
from pysandboxes.errors import (
    RuleApiPermissionError,
    RuleFileNotFoundError,
    RuleModuleNotFoundError,
    RulePermissionError,
    RuleSocketConnectionRefusedError,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import CodeType, ModuleType
    from typing import Any

    from pysandboxes._wire.spec import Program


#: ``runpy``, for ``-m`` and for a directory or archive run as a script: loaded by
#: ``load_runpy`` before the guards, when the program is one of those (at every start, it
#: and its imports would cost milliseconds; in ``run()``, its import would be charged to
#: the program).
_runpy: list[ModuleType] = []


def load_runpy() -> None:
    """Load ``runpy`` for ``run``, before the guards (see ``_runpy``)."""
    import runpy

    if not _runpy:
        _runpy.append(runpy)


_REFUSALS = (
    RuleApiPermissionError,
    RuleFileNotFoundError,
    RuleModuleNotFoundError,
    RulePermissionError,
    RuleSocketConnectionRefusedError,
)


def _fresh_main(name: str = "__main__") -> dict[str, object]:
    main = sys.modules["__main__"]
    namespace = main.__dict__
    builtins = namespace.get("__builtins__")
    namespace.clear()
    namespace.update(
        __name__=name,
        __doc__=None,
        __package__=None,
        __loader__=None,
        __spec__=None,
        __annotations__={},
        __builtins__=builtins,
    )
    return namespace


def prepare(program: Program, path: list[str] | None = None) -> None:
    """Set ``sys.argv`` and ``sys.path`` the way CPython sets them for ``program``;
    ``path`` is the ``sys.path`` CPython made before the boot code narrowed it."""
    # stdin: "-" when given on the command line, "" when the program was only piped in.
    argv0 = {"module": "-m", "command": "-c", "repl": ""}.get(program.kind, program.target)
    sys.argv[:] = [argv0, *program.args]
    if path is not None:
        sys.path[:] = path
    if sys.flags.inspect and program.kind != "repl":
        sys.ps1, sys.ps2 = PS1, PS2  # -i: the prompt after the program is marked too
    if sys.flags.safe_path:
        return
    first = program_directory(program)
    if program.kind not in ("script", "module"):
        first = ""  # CPython's "": the working directory, looked up at each import
    if sys.path and sys.path[0] == "":
        sys.path[0] = first
    else:
        sys.path.insert(0, first)
    # PYTHONPATH, kept out of the start-up: where CPython puts it, after the first entry.
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[1:1] = [os.path.abspath(p) for p in extra if os.path.abspath(p) not in sys.path]


def apply_warning_filters() -> None:
    """What the start-up left for later: the bytecode cache of ``PYTHONPYCACHEPREFIX`` (a
    cache the sandbox may write would feed the next start-up), and the filters of
    ``PYTHONWARNINGS`` (a category names a module to import), applied now, under the
    guards."""
    option = os.environ.pop("PYSANDBOXES_X_PYCACHE_PREFIX", None)  # -X pycache_prefix=
    prefix = os.environ.get("PYTHONPYCACHEPREFIX")
    if option is not None:
        sys.pycache_prefix = os.path.abspath(option) if option else None
    elif prefix and sys.pycache_prefix is None and not sys.flags.ignore_environment:
        sys.pycache_prefix = os.path.abspath(prefix)
    filters = [f for f in os.environ.get("PYTHONWARNINGS", "").split(",") if f]
    if filters and not sys.flags.ignore_environment:
        import warnings

        sys.warnoptions[:0] = filters
        warnings._processoptions(filters)  # type: ignore[attr-defined]


def program_directory(program: Program) -> str:
    """The directory CPython puts first on ``sys.path`` for ``program``."""
    if program.kind == "script":
        return os.path.dirname(os.path.realpath(program.target))
    return os.getcwd()


def read_script(path: str) -> CodeType | None:
    """Read and compile a script before the guards are armed; ``None`` if it is missing.

    Reading the program is the interpreter's work, like CPython opening its argument; what
    the program then reads is judged.
    """
    if os.path.isdir(path) or path.endswith(".zip"):
        return None  # a directory or archive with __main__.py: runpy reads it
    with open(path, "rb") as handle:
        source = handle.read()  # bytes: compile() honours a coding cookie and a BOM
    return compile(source, os.path.abspath(path), "exec", dont_inherit=True)


def run(program: Program, code: CodeType | None, serve: Callable[[], None] | None = None) -> None:
    """Run the program (or, in partial mode, ``serve`` the calls until the caller
    closes); does not return on an uncaught exception."""
    _command_source(program)
    if program.kind != "repl":  # the session says so itself, once it is up
        sys.audit("pysandboxes.started")  # what is imported from now on may be the program's
    try:
        if serve is not None:
            serve()
        elif program.kind == "repl":
            interact(_fresh_main(), template=program.target == TEMPLATE_SESSION)
        elif program.kind == "module":
            _runpy[0]._run_module_as_main(program.target, alter_argv=True)
        elif program.kind == "script" and code is None:
            _runpy[0].run_path(program.target, run_name="__main__")
        else:
            namespace = _fresh_main()
            if program.kind == "script":
                namespace["__file__"] = os.path.abspath(program.target)
                namespace["__cached__"] = None
            elif program.kind == "stdin":
                namespace["__file__"] = "<stdin>"
            if code is not None:
                exec(code, namespace)  # the program itself, compiled by us
    except SystemExit:
        raise
    except BaseException as exc:
        report(exc)
    if sys.flags.inspect and program.kind != "repl" and sys.version_info >= (3, 13):
        # -i: from 3.13 CPython's prompt is _pyrepl, Python code imported and run as the
        # program's, which needs the terminal database: the basic prompt, as before 3.13.
        os.putenv("PYTHON_BASIC_REPL", "1")
    # -i: CPython's prompt follows, and its C display would print the guards' frames.
    prompt = sys.flags.inspect and program.kind != "repl" and session["python_layer"]
    if prompt and sys.excepthook is sys.__excepthook__:
        sys.excepthook = prompt_excepthook


def _command_source(program: Program) -> None:
    """From 3.13 CPython keeps the ``-c`` text for its tracebacks (``linecache``'s entry
    ``"<string>"``): that of the bootstrap, not the program. It becomes the program's
    ``-c`` text, or goes (a script compiling its own ``"<string>"`` code shows no line)."""
    linecache: Any = sys.modules.get("linecache")
    cache = getattr(linecache, "cache", None)
    if type(cache) is not dict or "<string>" not in cache:
        return  # 3.11, 3.12: tracebacks show no line of -c code
    if program.kind == "command":
        text = program.target
        lines = [line + "\n" for line in text.splitlines()]
        cache["<string>"] = (len(text), None, lines, "<string>")
    else:
        del cache["<string>"]


def compile_program(program: Program) -> CodeType | None:
    """Compile ``-c`` text or standard input (a script is read by ``read_script``)."""
    if program.kind == "command":
        return compile(program.target + "\n", "<string>", "exec", dont_inherit=True)
    if program.kind == "stdin":
        return compile(sys.stdin.read(), "<stdin>", "exec", dont_inherit=True)
    return None


def report(exc: BaseException) -> None:
    """Print an uncaught exception as CPython does and end the process (not under -i)."""
    if isinstance(exc, _REFUSALS):
        sys.audit("pysandboxes.surfaced")  # the decision log: its traceback says it all
    tb = user_traceback(exc.__traceback__)
    exc.__traceback__ = tb
    sys.excepthook(type(exc), exc, tb)
    if sys.flags.inspect:
        return  # -i: CPython shows the traceback, then the prompt
    if isinstance(exc, KeyboardInterrupt):
        _die_by_sigint()
    sys.exit(1)


def _die_by_sigint() -> None:
    import atexit
    import signal

    atexit._run_exitfuncs()  # type: ignore[attr-defined]
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)


#: The rule file as shown to the user and the private temporary directory, for the
#: interactive session (set by the sandboxed interpreter's bootstrap).
session: dict[str, str | None] = {
    "rule_file": ".py-sandboxes",
    "tempdir": None,
    "provider": "subprocess",
    "learning": None,
    "python_layer": "yes",
}


def interact(namespace: dict[str, object], *, template: bool = False) -> None:
    """The interactive prompt, marked so nobody mistakes it for an unsandboxed one.

    IPython's when it is installed, else the standard console, with the same marks.
    ``template``: no rule file, the template's rules (the banner says so).
    """
    rule_file = session["rule_file"] or ".py-sandboxes"
    import pydoc

    # help() would start `less` through os.system, a process the rules do not allow:
    # page in this interpreter instead.
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    pydoc.pager = pydoc.ttypager if tty else pydoc.plainpager  # type: ignore[assignment]
    _repl.interact(
        namespace,
        rule_file,
        session["tempdir"],
        session["provider"] or "subprocess",
        learning=bool(session["learning"]),
        python_layer=bool(session["python_layer"]),
        template=template,
    )
