"""The interactive session under the rules: IPython when installed, else the standard one.

It runs inside the sandboxed interpreter, under the rules, so everything typed is judged
like a program's code. The banner says whose rules apply and every prompt starts with
``⚠``, so nobody mistakes it for an ordinary Python. IPython's own files (history,
configuration) go to the sandbox's private temporary directory, never to ``~/.ipython``.
"""

from __future__ import annotations

import os
import sys

# Bound now: the runner's session imports nothing of the sandbox's once the program runs.
from pysandboxes._inside.tracebacks import user_traceback
from pysandboxes.errors import SandBoxError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: The mark of every prompt under the rules, ``-i``'s included.
MARK = "⚠ "
PS1, PS2 = MARK + ">>> ", MARK + "... "


def banner(
    rule_file: str,
    *,
    learning: bool = False,
    provider: str = "subprocess",
    python_layer: bool = True,
    template: bool = False,
) -> str:
    """The two lines that open a sandboxed session, and CPython's usual third.

    The kernel provider is always named; ``subprocess`` and ``none`` say plainly that no
    kernel layer stands behind the rules, and ``py-sandbox=false`` that no Python layer does.
    ``template``: no rule file, the session runs under the template's rules.
    """
    whose = (
        f"the template's rules (no '{rule_file}' here)"
        if template
        else f"the rules in '{rule_file}'"
    )
    if provider == "none":
        rules = "NOT SANDBOXED: os-sandbox=none, no rule is enforced in this session"
    elif learning:
        rules = (
            "LEARNING: nothing is refused; the files, variables, network and calls used "
            f"here are written to '{rule_file}' when the session ends"
        )
    elif not python_layer and provider == "subprocess":
        rules = "NOT SANDBOXED: py-sandbox=false and os-sandbox=subprocess leave no layer"
    elif not python_layer:
        rules = (
            f"Limited by {whose}, enforced by os-sandbox={provider} "
            "alone (py-sandbox=false: no Python layer)"
        )
    elif provider != "subprocess":
        rules = f"Limited by {whose}, enforced by the Python layer and os-sandbox={provider}"
    else:
        rules = (
            f"Limited by {whose}, enforced by the Python layer alone "
            "(os-sandbox=subprocess: no kernel layer)"
        )
    return (
        f"SANDBOXES Python {sys.version} on {sys.platform}\n{rules}\n"
        'Type "help", "copyright", "credits" or "license" for more information.'
    )


def interact(
    namespace: dict[str, Any],
    rule_file: str,
    tempdir: str | None,
    provider: str = "subprocess",
    *,
    learning: bool = False,
    python_layer: bool = True,
    template: bool = False,
) -> None:
    """Run the session in ``namespace`` (the ``__main__`` of the sandbox); ``template``:
    under the template's rules, for want of a rule file."""
    show_banner = sys.stdin.isatty() and sys.stdout.isatty()
    shown = banner(
        rule_file,
        learning=learning,
        provider=provider,
        python_layer=python_layer,
        template=template,
    )
    text = shown if show_banner else ""
    try:
        import IPython
    except ImportError:
        IPython = None  # outside the except: no error typed later chains to this one
    if IPython is None:
        _standard(namespace, text, tempdir)
    else:
        _ipython(IPython, namespace, text, tempdir)


def _standard(namespace: dict[str, Any], text: str, tempdir: str | None) -> None:
    """The standard console, with completion and history as ``python3`` has them; the
    history lives in the sandbox's private directory, never in the user's home."""
    import code

    sys.ps1, sys.ps2 = PS1, PS2
    history = _readline(namespace, tempdir)
    sys.audit("pysandboxes.started")  # what is typed is the program
    try:
        code.interact(banner=text, local=namespace, exitmsg="")
    finally:
        if history is not None:
            history()


def _readline(namespace: dict[str, Any], tempdir: str | None) -> Any:
    """Tab completion on ``namespace`` and a history file; returns what saves it.

    ``readline`` is the sandbox's to load (a program needs a ``native`` grant: its file
    functions open paths no guard sees). Loaded here for the prompt, it keeps no file
    function the typed code could call: those are taken off the module, and only the
    history of the private directory is read and saved, by the session itself.
    """
    readline: Any = sys.modules.get("readline")
    completer: Any = sys.modules.get("rlcompleter")
    if readline is None or completer is None:
        return None  # not loaded before the walls (see preload_line_editing)
    readline.set_completer(completer.Completer(namespace).complete)
    readline.parse_and_bind("tab: complete")
    write = readline.write_history_file
    for name in _READLINE_FILES:
        function = getattr(readline, name, None)
        if function is not None:
            if name == "read_history_file" and tempdir is not None:
                try:
                    function(os.path.join(tempdir, "python_history"))
                except OSError:
                    pass  # the first session: no history yet
            delattr(readline, name)
    if tempdir is None:
        return None
    path = os.path.join(tempdir, "python_history")

    def save() -> None:
        try:
            write(path)
        except OSError:
            pass

    return save


def preload_line_editing() -> None:
    """Load ``readline`` for the prompt while the guards are not armed yet (a program
    would need a ``native`` grant for it); ``_readline`` then takes its file functions
    off before anything is typed."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return
    import importlib

    try:
        importlib.import_module("readline")
        importlib.import_module("rlcompleter")
    except ImportError:
        pass  # a Python built without it: no completion, as python3 there


#: The functions of ``readline`` that open files by a path the guards never see.
_READLINE_FILES = (
    "read_history_file",
    "write_history_file",
    "append_history_file",
    "read_init_file",
)


def _ipython(ipython: Any, namespace: dict[str, Any], text: str, tempdir: str | None) -> None:
    from IPython.terminal.prompts import Prompts
    from pygments.token import Token
    from traitlets.config import Config

    class SandboxPrompts(Prompts):
        def in_prompt_tokens(self) -> list[tuple[Any, str]]:
            return [(Token.Prompt, MARK), *super().in_prompt_tokens()]

        def continuation_prompt_tokens(
            self,
            width: int | None = None,
            *,
            lineno: int | None = None,
            wrap_count: int | None = None,
        ) -> list[tuple[Any, str]]:
            return [(Token.Prompt, MARK), *super().continuation_prompt_tokens(width)]

    config = Config()
    config.TerminalInteractiveShell.prompts_class = SandboxPrompts
    config.TerminalIPythonApp.display_banner = False
    config.TerminalInteractiveShell.confirm_exit = False
    # jedi keeps a cache under ~/.cache the rules do not expose, and completes nothing
    # when refused: IPython's own completion reads the live objects instead.
    config.Completer.use_jedi = False
    # The shell starts before the program does (its own imports are the sandbox's): the
    # user's start-up file would run in that time, so it does not run, as with the
    # standard session.
    config.InteractiveShellApp.exec_PYTHONSTARTUP = False
    if tempdir is not None:
        ipython_dir = os.path.join(tempdir, "ipython")
        os.makedirs(ipython_dir, exist_ok=True)
        config.TerminalIPythonApp.ipython_dir = ipython_dir
        config.BaseIPythonApplication.ipython_dir = ipython_dir
    if text:
        print(text)
        version = ipython.__version__
        print(f"IPython {version} -- An enhanced Interactive Python. Type '?' for help.")
    from IPython.terminal.ipapp import TerminalIPythonApp

    app: Any = TerminalIPythonApp.instance(user_ns=namespace, config=config)
    app.initialize([])
    app.shell.set_custom_exc((Exception,), _without_sandbox_frames)
    sys.audit("pysandboxes.started")  # what is typed is the program
    app.start()


def _without_sandbox_frames(
    shell: Any, etype: type[BaseException], value: BaseException, tb: Any, tb_offset: Any = None
) -> None:
    """Show an error of a cell as the standard session does: a refusal's traceback ends
    at the line typed, without the frames of the guard that raised it. A refusal met
    while IPython acts for the line (``!ls``, an alias such as ``clear``, a magic) is one
    line: what was refused and the rule that would allow it, not the frames of IPython
    and ``subprocess`` between the prompt and the guard."""
    if isinstance(value, SandBoxError) and _through_ipython(tb):
        print(f"{etype.__name__}: {value}", file=sys.stderr, flush=True)
        sys.audit("pysandboxes.surfaced")  # the decision log: the line said it all
        return
    shell.showtraceback((etype, value, user_traceback(tb)), tb_offset=tb_offset)


def _through_ipython(tb: Any) -> bool:
    """Whether a frame of the traceback is IPython's own (its shell, magics, aliases)."""
    while tb is not None:
        if f"{os.sep}IPython{os.sep}" in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return False
