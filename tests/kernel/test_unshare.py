"""unshare: native code meets namespaces around the sandbox and Landlock inside them.

The mount view is the host's: a path outside the rules exists and Landlock refuses it
(``EACCES``).
"""

from __future__ import annotations

from namespaceprobes import NamespaceProbes


class TestUnshare(NamespaceProbes):
    provider = "unshare"
    hidden = "EACCES"
