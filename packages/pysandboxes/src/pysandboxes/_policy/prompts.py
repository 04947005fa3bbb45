"""Permission prompts as data: the request a person (or a callback) answers, the answers.

Public as ``pysandboxes.PermissionRequest`` and ``pysandboxes.Decision``. The trusted
side builds the request from what the sandbox asked, once it has judged it itself
(``_host.prompts``): every field is the trusted side's own, never a string the sandbox
chose to show (the resource and the location excepted: what is asked about, and where).
A ``record``: a frozen dataclass to type checkers, without importing ``dataclasses`` in
every sandboxed start (the package binds its public names there).
"""

from __future__ import annotations

import enum

from pysandboxes._record import record


class Decision(enum.Enum):
    """The answer to a permission request.

    ``ONCE`` allows this operation only; ``RUN`` the same resource and operation until
    the sandbox ends; ``ALWAYS`` writes the rule that allows it to the rule file (and
    allows it for the run), never offered for a secret; ``DENY`` refuses as the rules
    do.
    """

    ONCE = "once"
    RUN = "run"
    ALWAYS = "always"
    DENY = "deny"


@record
class PermissionRequest:
    """An access the rules refuse, asked about instead of refused.

    Attributes:
        kind: ``file``, ``net``, ``import``, ``call`` or ``env``.
        resource: what is asked for: a real path, ``host:port``, a module, a function,
            a variable's name.
        operation: ``read``, ``write`` or ``create`` (open), ``list``, ``stat`` or
            ``lstat`` (look), ``delete``, ``rmdir``, ``mkdir`` or ``rename`` for a
            file; ``connect`` for the network; ``import``; a sensitive call's category
            (``process-exec``...); ``read`` for a variable.
        location: the program's line that asked (``pkg/mod.py:42``), as the sandbox
            reported it (``""`` when unknown): shown, never trusted.
        rule: the exact rule ``Decision.ALWAYS`` would write (``expose-ro=./data/a.txt``).
        secret: the resource holds a secret (a key, a credential file, a token-like
            variable): ``ALWAYS`` is not offered, and answering it denies.
        target: the new name of a ``rename`` (a real path), else ``""``.
    """

    kind: str
    resource: str
    operation: str
    location: str
    rule: str
    secret: bool = False
    target: str = ""

    def __str__(self) -> str:
        where = f" (at {self.location})" if self.location else ""
        secret = " [a secret]" if self.secret else ""
        to = f" to {self.target}" if self.target else ""
        return f"{self.operation} {self.resource}{to}{where}{secret}; rule: {self.rule}"


# Public as pysandboxes.Decision and pysandboxes.PermissionRequest: pickled by that name.
Decision.__module__ = PermissionRequest.__module__ = "pysandboxes"
