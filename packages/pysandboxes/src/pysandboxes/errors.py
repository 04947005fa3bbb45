"""The exceptions of Py-Sandboxes, one tree.

Every refusal is also the built-in exception the same failure would raise without a
sandbox, so ``except FileNotFoundError`` or ``except ImportError`` fallbacks in existing
code keep working, and ``except SandBoxError`` catches every one of ours::

    Exception
    └── SandBoxError                        anything Py-Sandboxes raises
        ├── ConfigSyntaxError               the rules cannot be used (every problem at once)
        │   └── ConfigRefusedError          they read well, but are refused at start-up
        ├── RuleFileNotFoundError           + FileNotFoundError: path not exposed, or ignored
        ├── RulePermissionError             + PermissionError: write to read-only, protected file
        ├── RuleSocketConnectionRefusedError + ConnectionRefusedError: net= refused it
        ├── RuleModuleNotFoundError         + ModuleNotFoundError: python-import= refused it
        ├── RuleApiPermissionError          + PermissionError: python-api= refused the call
        ├── RuleEvalPermissionError         + PermissionError: evaluated code's run-time check
        ├── EvalSyntaxRejected              + SyntaxError: source outside the eval-* language
        ├── OSLayerUnavailable              the kernel layer could not be applied
        ├── RuleResultRefusedError          + TypeError: partial mode: a result that is not
        │                                     a value remote-result-mode= allows, or too large
        ├── SandboxCrashed                  partial mode: the child ended during the call
        ├── SandboxTimeout                  + TimeoutError: partial mode: the call ran past
        │                                     its timeout and was stopped
        └── RemoteError                     partial mode: a sandboxed function raised an
                                            exception whose class is not rebuilt here
                                            (+ its nearest built-in base, e.g. ValueError)
    BaseException └── EvalInterrupted      an eval-* budget stopped evaluated code

The names are those of the established implementation, so existing ``except`` clauses keep
working. Every class pickles with its fields: refusals raised in a sandboxed child reach the
caller intact. Messages say what was refused, by which rule (``file(line)``), and the exact
line that would allow it.
"""

from __future__ import annotations

import errno

from pysandboxes._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Any

__all__ = [
    "ConfigIssue",
    "ConfigRefusedError",
    "ConfigSyntaxError",
    "EvalInterrupted",
    "EvalSyntaxRejected",
    "OSLayerUnavailable",
    "RemoteError",
    "RuleApiPermissionError",
    "RuleEvalPermissionError",
    "RuleFileNotFoundError",
    "RuleModuleNotFoundError",
    "RulePermissionError",
    "RuleResultRefusedError",
    "RuleSocketConnectionRefusedError",
    "SandBoxError",
    "SandboxCrashed",
    "SandboxTimeout",
    "sandbox_denials",
]


class SandBoxError(Exception):
    """Base of every exception Py-Sandboxes raises.

    Catch it to handle any refusal or configuration problem at once; catch the built-in
    base of a subclass (``PermissionError``...) to treat a refusal like the ordinary failure.
    """


@record
class ConfigIssue:
    """One problem found in the rules: where it is and what is wrong.

    Attributes:
        source: the rule file as shown to the user, or ``<arg>`` for command-line and API rules.
        line: 1-based line number in ``source`` (0 when the problem has no single line).
        message: what is wrong, naming the offending text.
    """

    source: str
    line: int
    message: str

    def __str__(self) -> str:
        where = f"{self.source}({self.line})" if self.line else self.source
        return f"{where}: {self.message}"


class ConfigSyntaxError(SandBoxError):
    """The rules cannot be used. Raised before anything runs.

    ``errors`` holds every problem of every file, sorted by file and line, so one run
    shows them all. Fix the lines named; nothing was started.
    """

    errors: tuple[ConfigIssue, ...]
    #: The line shown above the problems.
    heading = "Syntax error in config files."

    def __init__(self, errors: Sequence[ConfigIssue]) -> None:
        self.errors = tuple(sorted(errors, key=lambda e: (e.source, e.line)))
        super().__init__(self._render())

    def _render(self) -> str:
        lines = [self.heading]
        lines.extend(f"  {issue}" for issue in self.errors)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self._render()

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.errors,))


class ConfigRefusedError(ConfigSyntaxError):
    """The rules read well, but are refused at start-up, as they are. Raised before
    anything runs.

    Each problem names the rule and why: a writable rule over a place where code is loaded
    from before the walls (the sandbox would plant code for the next run), or over a rule
    file nothing else keeps read-only (it would rewrite its own rules), or a request a
    ``learn=false`` lock forbids. It is a ``ConfigSyntaxError`` (the same exit status
    255), under a heading of its own.
    """

    heading = "Refused at start-up: the rules cannot be used as they are."


class _Refusal(SandBoxError):
    """Shared behaviour of the refusals: a fixed message, extra fields, pickling."""

    message: str

    def _setup(self, message: str, fields: dict[str, Any]) -> None:
        self.message = message
        for key, value in fields.items():
            setattr(self, key, value)
        self._fields = fields

    def __str__(self) -> str:
        # OSError subclasses would otherwise render "[Errno 2] ..." or the filename shutil
        # sets; the rule message is what the user needs.
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self._fields))


def _rebuild(cls: type[_Refusal], message: str, fields: dict[str, Any]) -> _Refusal:
    return cls(message, **fields)


class RuleFileNotFoundError(_Refusal, FileNotFoundError):
    """A path is not exposed by any rule, or is hidden by ``ignore=``: it looks absent.

    Attributes:
        path: the path as the program named it.
        rule: the deciding rule (``ignore=...`` with its place), or ``None`` when no rule
            exposes the path.
    """

    path: str
    rule: str | None

    def __init__(self, message: str, *, path: str = "", rule: str | None = None) -> None:
        FileNotFoundError.__init__(self, errno.ENOENT, message)
        self._setup(message, {"path": path, "rule": rule})


class RulePermissionError(_Refusal, PermissionError):
    """A path is visible but the access is not granted (write to ``expose-ro``, protected file).

    Attributes:
        path: the path as the program named it.
        rule: the deciding rule with its place, or ``None``.
    """

    path: str
    rule: str | None

    def __init__(self, message: str, *, path: str = "", rule: str | None = None) -> None:
        PermissionError.__init__(self, errno.EACCES, message)
        self._setup(message, {"path": path, "rule": rule})


class RuleSocketConnectionRefusedError(_Refusal, ConnectionRefusedError):
    """A connection, bind, datagram or name resolution is refused by the ``net=`` rules.

    Attributes:
        address: the address judged, as ``host:port``.
        rule: the deciding rule with its place, or ``None`` for the default deny.
    """

    address: str
    rule: str | None

    def __init__(self, message: str, *, address: str = "", rule: str | None = None) -> None:
        ConnectionRefusedError.__init__(self, errno.ECONNREFUSED, message)
        self._setup(message, {"address": address, "rule": rule})


class RuleModuleNotFoundError(_Refusal, ModuleNotFoundError):
    """An import is refused by the ``python-import=`` rules.

    It is a ``ModuleNotFoundError``, so ``try: import x / except ImportError`` fallbacks in
    libraries behave as if the module were not installed.
    """

    def __init__(self, message: str, *, name: str = "") -> None:
        ModuleNotFoundError.__init__(self, message, name=name)
        self._setup(message, {"name": name})


class RuleApiPermissionError(_Refusal, PermissionError):
    """A sensitive function is refused by the ``python-api=`` rules.

    Attributes:
        qualname: the function, e.g. ``os.system``.
        category: its category, e.g. ``process-exec``.
    """

    qualname: str
    category: str

    def __init__(self, message: str, *, qualname: str = "", category: str = "") -> None:
        PermissionError.__init__(self, errno.EPERM, message)
        self._setup(message, {"qualname": qualname, "category": category})


class RuleEvalPermissionError(_Refusal, PermissionError):
    """Evaluated code did what its ``eval-*`` profile refuses at run time."""

    def __init__(self, message: str) -> None:
        PermissionError.__init__(self, errno.EPERM, message)
        self._setup(message, {})


class EvalSyntaxRejected(_Refusal, SyntaxError):
    """A source uses constructs its ``eval-*`` profile does not allow: the message lists
    all (line, column, caret, line to add), ``violations`` each; ``lineno`` the first."""

    def __init__(self, message: str, *, violations: tuple[str, ...] = (), lineno: int = 1) -> None:
        SyntaxError.__init__(self, message)
        self.lineno = lineno
        self._setup(message, {"violations": violations, "lineno": lineno})


class EvalInterrupted(BaseException):
    """An ``eval-*`` budget stopped evaluated code; not an ``Exception``, so that code
    cannot swallow it. ``reason`` is the budget's line (``eval-max-iterations=1000``),
    ``where`` where the rules set it (``set at .py-sandboxes(4)``, or that it is the
    default)."""

    def __init__(self, reason: str, *, where: str = "") -> None:
        super().__init__(f"evaluation interrupted: {reason}" + (f" ({where})" if where else ""))
        self.reason = reason
        self.where = where

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_interrupted, (self.reason, self.where))


def _rebuild_interrupted(reason: str, where: str) -> EvalInterrupted:
    return EvalInterrupted(reason, where=where)


class OSLayerUnavailable(SandBoxError):
    """The kernel layer could not be applied: the kernel lacks the feature, or refused it.

    Raised in the sandboxed interpreter before any code of the program runs; the program
    is not started. The message says what is missing; choose another ``os-sandbox=``
    provider, or fix the host (a kernel with Landlock, user namespaces enabled).

    Attributes:
        provider: the kernel provider that failed (``landlock``...).
    """

    provider: str

    def __init__(self, message: str, *, provider: str = "") -> None:
        super().__init__(message)
        self.provider = provider

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_unavailable, (str(self), self.provider))


def _rebuild_unavailable(message: str, provider: str) -> OSLayerUnavailable:
    return OSLayerUnavailable(message, provider=provider)


class RuleResultRefusedError(SandBoxError, TypeError):
    """Partial mode: what a sandboxed function returned is not rebuilt in the caller.

    Its class is not a value ``remote-result-mode=`` allows (the message names it and the
    rule that would), it is nested too deep or too large, or the reply is over
    ``sandboxes(result_limit=...)``. Nothing of it ran in the caller.
    """


class SandboxCrashed(SandBoxError):
    """Partial mode: the sandboxed child ended while this call was in flight.

    The call may have run partly, never twice: it is not sent again. The next call
    starts a fresh child. The message says how the child ended.

    Attributes:
        exitcode: the child's exit status, or ``None`` when a signal ended it.
        signal: the number of the signal that ended it, or ``None``.
    """

    exitcode: int | None
    signal: int | None

    def __init__(self, message: str, *, exitcode: int | None = None, signal: int | None = None):
        super().__init__(message)
        self.exitcode = exitcode
        self.signal = signal

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_crashed, (str(self), self.exitcode, self.signal))


def _rebuild_crashed(message: str, exitcode: int | None, signal: int | None) -> SandboxCrashed:
    return SandboxCrashed(message, exitcode=exitcode, signal=signal)


class SandboxTimeout(SandBoxError, TimeoutError):
    """Partial mode: a sandboxed call ran past its timeout (``@sandbox(timeout=...)`` or
    ``sandbox-timeout=``) and was stopped.

    ``except TimeoutError`` catches it too. The call did not finish: an async function
    was cancelled; one that could not be interrupted (a sync function, a loop that never
    awaits) ended with the sandboxed process, replaced for the next call.

    Attributes:
        timeout: the timeout that expired, in seconds.
    """

    timeout: float

    def __init__(self, message: str, *, timeout: float = 0.0) -> None:
        super().__init__(message)
        self.timeout = timeout

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_timeout, (str(self), self.timeout))


def _rebuild_timeout(message: str, timeout: float) -> SandboxTimeout:
    return SandboxTimeout(message, timeout=timeout)


class RemoteError(SandBoxError):
    """Partial mode: a sandboxed function raised an exception of a class the caller does
    not rebuild (one of the program's own, or of a library).

    The caller gets a subclass named like the remote class that also inherits the
    nearest built-in base (``except ValueError`` still catches a remote ``ValueError``
    subclass). Its traceback shows the remote frames.

    Attributes:
        remote_class: ``module.qualname`` of the class raised in the child.
        remote_args: the exception's arguments, values kept, others as their ``repr``.
    """

    remote_class: str = ""
    remote_args: tuple[object, ...] = ()


def _chain(exc: BaseException, seen: set[int]) -> Iterator[BaseException]:
    if id(exc) in seen:
        return
    seen.add(id(exc))
    yield exc
    if isinstance(exc, BaseExceptionGroup):
        inner_exceptions: tuple[BaseException, ...] = exc.exceptions  # type: ignore[assignment]
        for inner in inner_exceptions:
            yield from _chain(inner, seen)
    for linked in (exc.__cause__, exc.__context__):
        if linked is not None:
            yield from _chain(linked, seen)


def sandbox_denials(exc: BaseException) -> list[str]:
    """List the sandbox refusals in an exception, its causes, contexts and groups.

    Useful when a library wrapped a refusal in its own exception: the refusal is still
    found. Each entry reads ``"<Class>: <message>"``.
    """
    return [
        f"{type(found).__name__}: {found}"
        for found in _chain(exc, set())
        if isinstance(found, SandBoxError) and not isinstance(found, ConfigSyntaxError)
    ]
