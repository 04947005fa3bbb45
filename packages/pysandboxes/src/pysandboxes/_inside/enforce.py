"""The one place that decides what a refused access becomes.

Guards report an access with its verdict; an enforcer decides. ``Enforcing`` raises the
refusal with a message that says what was refused, by which rule, and the exact line that
would allow it. Learning mode is another enforcer (``_inside.recorder.Learning``) that
records instead of raising, not an ``if`` in every guard; ``Recording`` keeps every report
for tests.
"""

from __future__ import annotations

import os

from pysandboxes._policy.model import Access
from pysandboxes._policy.secrets import DOCS, secret_path
from pysandboxes._record import record
from pysandboxes.errors import (
    RuleApiPermissionError,
    RuleFileNotFoundError,
    RuleModuleNotFoundError,
    RulePermissionError,
    RuleSocketConnectionRefusedError,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Set as AbstractSet
    from typing import Protocol

    from pysandboxes._policy.judge import ApiJudge
    from pysandboxes._policy.model import Verdict

_VERBS = {
    Access.READ: "Reading",
    Access.WRITE: "Writing to",
    Access.CREATE: "Creating",
    Access.DELETE: "Removing or renaming",
    Access.EXECUTE: "Executing",
}


def call_refusal(api: ApiJudge, qualname: str, category: str, rule_file: str) -> str:
    """The message refusing a sensitive call: the rule that decided, or the lines to add."""
    verdict = api.judge(qualname)
    allow_one = f"'python-api=ALLOW:{qualname}'"
    if verdict.rule is None:
        return (
            f"{qualname}() is denied by the API guard (category: {category}). Add {allow_one} "
            f"for this function only, or 'python-api=ALLOW:{category}' for the whole "
            f"category, to {rule_file} to allow it."
        )
    why = f"{qualname}() is denied by {verdict.rule} (category: {category})."
    if api.names(qualname):
        return f"{why} Remove that line to allow it."
    return f"{why} Add {allow_one} to {rule_file} to allow this function."


def secret_advice(rule_file: str) -> str:
    """The way to grant a secret on purpose, for a refusal message or a summary's hint."""
    return (
        " No grant is suggested for a secret: granting one is a deliberate edit of"
        f" {rule_file} (learning writes such a line commented out; uncomment it only if the"
        f" program must have it). See {DOCS}."
    )


@record
class FileAccess:
    """One file access as a guard saw it.

    Attributes:
        named: the path as the program gave it.
        real: the real path it was judged on.
        access: what the program does to it.
        api: the function used, for messages (``open``, ``os.stat``...).
    """

    named: str
    real: str
    access: Access
    api: str


@record
class Connection:
    """What a refused connection, bind or name lookup was about, for learning.

    Attributes:
        proto: ``tcp`` or ``udp`` (``""`` for a lookup).
        host: the host as the program named it: a name or an address.
        port: the port (0 for a lookup).
        direction: ``OUT`` (connect, send), ``IN`` (bind) or ``lookup``.
        addresses: the address judged, when the host is a name.
        fix: the line that would allow it, when the verdict names one (an address the
            SSRF-safe defaults refused needs the address, not the name).
    """

    proto: str
    host: str
    port: int
    direction: str
    addresses: tuple[str, ...] = ()
    fix: str = ""


if TYPE_CHECKING:

    class Enforcer(Protocol):
        """Decides what happens to an access the rules refuse."""

        #: Whether listings leave out the entries no rule exposes (not while learning:
        #: the program must see the directory as it is).
        hides_entries: bool
        #: Whether a program without a ``native`` grant meets the stand-in ctypes, which
        #: holds no memory (``_inside/datactypes``), not while learning: there it meets the
        #: real one, so that what it reaches C with is learned.
        stands_in_for_native: bool

        @property
        def learned(self) -> AbstractSet[tuple[str, Access, str]]:
            """``(real path, access, api)`` of the file accesses recorded already while
            learning, whose repeats the file guard lets through unjudged: empty when
            enforcing."""
            ...

        @property
        def learned_modules(self) -> AbstractSet[str]:
            """The top-level modules whose import was recorded already while learning,
            whose repeats the import guard lets through unjudged: empty when enforcing."""
            ...

        def refuse_file(self, report: FileAccess, verdict: Verdict) -> None:
            """Called for a refused file access; raise to stop it, return to let it through."""
            ...

        def refuse_call(self, qualname: str, category: str, message: str) -> None:
            """Called for a refused sensitive call; raise to stop it, return to let it through."""
            ...

        def refuse_connection(
            self, message: str, address: str, rule: str | None, target: Connection | None = None
        ) -> None:
            """Called for a refused connection, bind, datagram or name lookup; ``target``
            says what it was about, when a rule could allow it."""
            ...

        def refuse_import(self, module: str, message: str, category: str | None = None) -> None:
            """Called for a refused import; ``category`` is set when the API rules, not
            ``python-import=``, refuse it (a native extension)."""
            ...


@record
class Messages:
    """What a refusal message needs to know about the rules in force.

    Attributes:
        rule_file: the rule file as shown to the user (``.py-sandboxes``).
        rule_dir: its directory, to write suggested paths relative to it.
    """

    rule_file: str
    rule_dir: str

    def suggestion(self, fix: str | None) -> str:
        """``Add 'expose-ro=./data' to .py-sandboxes to allow it.``, or ``""``."""
        if fix is None:
            return ""
        key, _, value = fix.partition("=")
        if value.startswith("/") and self.rule_dir:
            relative = os.path.relpath(value, self.rule_dir)
            if not relative.startswith(".."):
                value = "." if relative == "." else f"./{relative}"
        return f" Add '{key}={value}' to {self.rule_file} to allow it."

    def secret(self) -> str:
        """What a refusal of a secret says instead of a grant to paste: granting one is a
        deliberate edit, never a copy of the last line of an error."""
        return secret_advice(self.rule_file)

    def file(self, report: FileAccess, verdict: Verdict) -> str:
        """The message of a refused file access."""
        # /proc/self/fd/N/name is the sandbox's own pinned route: the user's path only.
        named = report.real if report.named.startswith("/proc/self/fd/") else report.named
        if verdict.fix == "<exposure-root>":
            return (
                f"{_VERBS[report.access]} '{named}' is "
                f"refused: it is the path {verdict.rule} exposes, and its directory is not "
                "writable."
            )
        if verdict.fix == "<holds-rules>":
            return (
                f"{_VERBS[report.access]} '{named}' is "
                "refused: narrower rules name "
                "paths inside it, which the change would carry out of their rules"
                + (f" ({verdict.rule})." if verdict.rule is not None else ".")
            )
        if verdict.fix == "<planted-rules>":
            return (
                f"{_VERBS[report.access]} '{report.real}' is refused: a file named "
                ".py-sandboxes holds rules, and the sandbox may write none (the next run "
                "next to it would obey it)."
            )
        if verdict.fix == "<unpinned>":
            return (
                f"{_VERBS[report.access]} '{named}' is refused: in a writable "
                "directory, changes must go through Python's file functions (open, os.open, "
                "os.rename...), which the sandbox pins against swapped directories."
            )
        if verdict.fix == "<unseen-dir-fd>":
            return (
                f"{_VERBS[report.access]} '{named}' is refused: a relative name given "
                "to os.open's C function may be resolved from a dir_fd the sandbox cannot "
                "see. Call os.open, which judges the name through the descriptor."
            )
        if verdict.fix is not None and verdict.fix.startswith("<unjudgeable>"):
            return (
                f"{_VERBS[report.access]} '{named}' is refused: the sandbox cannot "
                f"judge it: {verdict.fix[13:]}. No rule allows what the sandbox cannot judge."
            )
        if report.real == "\0unknowable path object":
            return (
                f"{_VERBS[report.access]} a path given as {report.named} is refused: the "
                "sandbox cannot read such a path without running its code. Pass str(path)."
            )
        shown = f"'{named}'"
        if named != report.real:
            shown += f" ('{report.real}')"
        verb = _VERBS[report.access]
        if verdict.fix is not None and secret_path(report.real):
            return f"{verb} {shown} is refused: it holds a secret (keys or credentials)." + (
                self.secret()
            )
        if verdict.hidden and verdict.rule is not None:
            return f"{verb} {shown} is refused: it is hidden by {verdict.rule}."
        if verdict.hidden:
            return f"{verb} {shown} is refused: no rule exposes it." + self.suggestion(verdict.fix)
        if verdict.rule is not None and verdict.fix is not None:
            return (
                f"{verb} {shown} is refused: {verdict.rule} exposes it read-only."
                + self.suggestion(verdict.fix)
            )
        return (
            f"{verb} {shown} is refused: it is part of the active sandbox configuration, "
            "which the sandbox may never change."
        )


class Enforcing:
    """Raise every refusal: the normal mode."""

    hides_entries = True
    stands_in_for_native = True
    learned: frozenset[tuple[str, Access, str]] = frozenset()
    learned_modules: frozenset[str] = frozenset()

    def __init__(self, messages: Messages) -> None:
        self._messages = messages

    def refuse_file(self, report: FileAccess, verdict: Verdict) -> None:
        """Raise ``RuleFileNotFoundError`` (hidden) or ``RulePermissionError``."""
        message = self._messages.file(report, verdict)
        rule = str(verdict.rule) if verdict.rule is not None else None
        if verdict.hidden:
            raise RuleFileNotFoundError(message, path=report.named, rule=rule)
        raise RulePermissionError(message, path=report.named, rule=rule)

    def refuse_call(self, qualname: str, category: str, message: str) -> None:
        """Raise ``RuleApiPermissionError``."""
        raise RuleApiPermissionError(message, qualname=qualname, category=category)

    def refuse_connection(
        self, message: str, address: str, rule: str | None, target: Connection | None = None
    ) -> None:
        """Raise ``RuleSocketConnectionRefusedError``: at once, never a hang."""
        raise RuleSocketConnectionRefusedError(message, address=address, rule=rule)

    def refuse_import(self, module: str, message: str, category: str | None = None) -> None:
        """Raise ``RuleModuleNotFoundError``: ``except ImportError`` fallbacks still work."""
        raise RuleModuleNotFoundError(message, name=module)


class Recording:
    """Keep every refused access and let it through: for tests of the guards."""

    hides_entries = True
    stands_in_for_native = True
    learned: frozenset[tuple[str, Access, str]] = frozenset()
    learned_modules: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.files: list[tuple[FileAccess, Verdict]] = []
        self.calls: list[tuple[str, str]] = []
        self.connections: list[str] = []
        self.imports: list[str] = []

    def refuse_file(self, report: FileAccess, verdict: Verdict) -> None:
        """Record the refusal; the access goes on."""
        self.files.append((report, verdict))

    def refuse_call(self, qualname: str, category: str, message: str) -> None:
        """Record the refusal; the call goes on."""
        self.calls.append((qualname, category))

    def refuse_connection(
        self, message: str, address: str, rule: str | None, target: Connection | None = None
    ) -> None:
        """Record the refusal; the connection goes on."""
        self.connections.append(address)

    def refuse_import(self, module: str, message: str, category: str | None = None) -> None:
        """Record the refusal; the import goes on."""
        self.imports.append(module)
