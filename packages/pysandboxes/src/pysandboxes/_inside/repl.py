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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: The mark of every prompt under the rules, ``-i``'s included.
MARK = "⚠ "
PS1, PS2 = MARK + ">>> ", MARK + "... "


def banner(rule_file: str, *, learning: bool = False, provider: str = "subprocess") -> str:
    """The two lines that open a sandboxed session, and CPython's usual third.

    The kernel provider is always named; ``subprocess`` and ``none`` say plainly that no
    kernel layer stands behind the rules.
    """
    if provider == "none":
        rules = "**NOT SANDBOXED: os-sandbox='none' runs this session with no guard**"
    elif learning:
        rules = f"**API calls are LEARNED and saved in '{rule_file}' at the end of the session**"
    elif provider != "subprocess":
        rules = (
            f"**APIs are LIMITED according to the rules in '{rule_file}' "
            f"and by the os-sandbox='{provider}'**"
        )
    else:
        rules = (
            f"**APIs are LIMITED according to the rules in '{rule_file}', "
            "by the Python layer alone (os-sandbox='subprocess': no kernel layer)**"
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
) -> None:
    """Run the session in ``namespace`` (the ``__main__`` of the sandbox)."""
    show_banner = sys.stdin.isatty() and sys.stdout.isatty()
    text = banner(rule_file, learning=learning, provider=provider) if show_banner else ""
    try:
        import IPython
    except ImportError:
        _standard(namespace, text)
        return
    _ipython(IPython, namespace, text, tempdir)


def _standard(namespace: dict[str, Any], text: str) -> None:
    import code

    sys.ps1, sys.ps2 = PS1, PS2
    sys.audit("pysandboxes.started")  # what is typed is the program
    code.interact(banner=text, local=namespace, exitmsg="")


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
    at the line typed, without the frames of the guard that raised it."""
    shell.showtraceback((etype, value, user_traceback(tb)), tb_offset=tb_offset)
