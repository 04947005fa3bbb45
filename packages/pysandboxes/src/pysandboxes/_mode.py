"""Which side of the sandbox this process is on; backs ``is_in_sandbox()``.

The sandboxed interpreter is started by the trusted side with the marker below in its
environment; nothing else sets it. Reading it once at import keeps the check free.
"""

from __future__ import annotations

import os

#: Set by the trusted side in the environment of every sandboxed interpreter it starts.
SANDBOX_MARKER = "PYSANDBOXES_SANDBOXED"

_in_sandbox = os.environ.get(SANDBOX_MARKER) == "1"


def is_in_sandbox() -> bool:
    """Tell whether this code runs inside a sandbox (complete mode or a partial-mode child)."""
    return _in_sandbox
