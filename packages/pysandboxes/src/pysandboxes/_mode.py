"""Which side of the sandbox this process is on; backs ``is_in_sandbox()``.

The sandboxed interpreter marks itself when it starts (``enter_sandbox``); the mark is not
an environment variable, so the program sees exactly the variables its rules produce.
"""

from __future__ import annotations

_in_sandbox = False


def enter_sandbox() -> None:
    """Mark this process as sandboxed; called by the sandboxed interpreter's bootstrap."""
    global _in_sandbox
    _in_sandbox = True


def is_in_sandbox() -> bool:
    """Tell whether this code runs inside a sandbox (complete mode or a partial-mode child)."""
    return _in_sandbox
