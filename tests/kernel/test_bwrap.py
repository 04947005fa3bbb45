"""bwrap: native code meets a mount view of its own, empty namespaces, no capability.

Paths outside the rules do not exist in the sandbox's view (``ENOENT``), whatever
Landlock inside it would also refuse.
"""

from __future__ import annotations

from namespaceprobes import NamespaceProbes


class TestBwrap(NamespaceProbes):
    provider = "bwrap"
    hidden = "ENOENT"
