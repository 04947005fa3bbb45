"""Tracebacks as the user should see them: without the sandbox's own frames.

A refusal is raised inside the guards (the sealed audit hook, a wrapper), so its
traceback ends in frames of this package; an uncaught exception also starts in the
runner's. The program's line is what matters: the frames of the framework are cut at
either end.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType

#: This package's directory, and the file name the sealed audit hook is compiled under.
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_HOOK_FILE = "<pysandboxes audit hook>"  # see guards.audit


def is_own(filename: str) -> bool:
    """Whether code of ``filename`` is the sandbox's own."""
    return filename.startswith(_OWN_DIR + os.sep) or filename == _HOOK_FILE


def user_traceback(tb: TracebackType | None) -> TracebackType | None:
    """The traceback without this framework's frames, at either end."""
    while tb is not None and is_own(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    head = tb
    while tb is not None and tb.tb_next is not None:
        if is_own(tb.tb_next.tb_frame.f_code.co_filename):
            tb.tb_next = None  # a guard refused here: the program's own line is the last
            break
        tb = tb.tb_next
    return head
