"""The policy as data: frozen dataclasses, no I/O.

The parser builds a ``Policy`` from rule files; every later layer (guards, kernel plan,
learning) reads it through the verdict functions of ``judge``. Each rule keeps its
``Origin`` so that any refusal can name the line that decided it.
"""

from __future__ import annotations

from pysandboxes._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ipaddress import IPv4Network, IPv6Network
    from typing import ClassVar, Generic, TypeVar

    T = TypeVar("T")

#: Display name of rules given on the command line or as API keywords.
ARG_SOURCE = "<arg>"


@record
class Origin:
    """Where a rule comes from: the file as shown to the user, the line, its text.

    Attributes:
        source: the file, relative to the cwd when it is below it, or ``<arg>``.
        line: 1-based line number (the position among the extra rules for ``<arg>``).
        text: the rule as written, comments and surrounding spaces removed.
        path: the absolute path of the file, ``None`` for ``<arg>``.
    """

    source: str
    line: int
    text: str
    path: str | None = None

    @property
    def where(self) -> str:
        """``file(line)``, the form every message uses."""
        return f"{self.source}({self.line})"

    def __str__(self) -> str:
        return f"'{self.text}' from {self.where}"


class Access:
    """What a program does to a path; each maps onto one kernel right.

    A small closed set of singletons (``Access.READ``...), kept apart from ``enum``, whose
    import every sandboxed start would pay.
    """

    __slots__ = ("modifies", "value")
    READ: ClassVar[Access]
    WRITE: ClassVar[Access]
    CREATE: ClassVar[Access]
    DELETE: ClassVar[Access]
    EXECUTE: ClassVar[Access]

    value: str
    modifies: bool  # whether the access needs a read-write exposure

    def __init__(self, value: str, modifies: bool) -> None:
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "modifies", modifies)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Access values are constants")

    def __repr__(self) -> str:
        return f"Access.{self.value.upper()}"

    def __reduce__(self) -> tuple[object, ...]:
        return (access_named, (self.value,))


Access.READ = Access("read", False)
Access.WRITE = Access("write", True)
Access.CREATE = Access("create", True)
Access.DELETE = Access("delete", True)
Access.EXECUTE = Access("execute", False)


def access_named(value: str) -> Access:
    """The ``Access`` constant of a name (``"read"``...)."""
    found = getattr(Access, value.upper(), None)
    if not isinstance(found, Access):
        raise ValueError(f"unknown access {value!r}")
    return found


@record
class ExposeRule:
    """``expose-ro=`` / ``expose-rw=``: a directory tree or a single file made visible.

    Attributes:
        made: a directory the program makes (``expose-rw=./out/``, missing when the rules
            were read): the program may make it, by ``mkdir`` only.
    """

    path: str
    writable: bool
    is_dir: bool
    origin: Origin
    made: bool = False


@record
class IgnoreRule:
    """``ignore=``: a gitignore-like pattern that hides paths even inside an exposure.

    Attributes:
        pattern: the pattern (``*``, ``?``, ``[...]``, ``**``); for an anchored one, the
            part below ``base``.
        base: for a pattern containing ``/``, the real path of the directory it is anchored
            to: its fixed directories joined to the rule file's directory (or the cwd for
            ``<arg>``, or ``/``) and resolved, as exposures are; ``None`` for a pattern
            without ``/``, which matches any path component.
    """

    pattern: str
    base: str | None
    origin: Origin


@record
class EnvRule:
    """``env=NAME=template``: a variable given to the sandbox; ``NAME`` may contain ``*``."""

    name: str
    template: str
    origin: Origin


@record
class UnenvRule:
    """``unenv=NAME``: a variable (or ``*`` pattern) the sandbox never receives."""

    pattern: str
    origin: Origin


if TYPE_CHECKING:
    IPNetwork = IPv4Network | IPv6Network


@record
class NetRule:
    """``net=ACTION|PROTO|NETWORK|PORTS|DIRECTION``.

    Attributes:
        allow: ``True`` for ALLOW, ``False`` for DENY.
        protos: a subset of ``{"tcp", "udp"}``.
        networks: the networks the rule covers (hostnames already resolved and pinned;
            none for a ``*.suffix`` pattern, which is matched as a name only).
        host: the hostname or ``*.suffix`` pattern, lower case without a final dot;
            ``None`` for an address, a network or ``*``.
        ports: inclusive ``(low, high)`` ranges; empty means no port at all.
        directions: a subset of ``{"IN", "OUT"}``.
    """

    allow: bool
    protos: frozenset[str]
    networks: tuple[IPNetwork, ...]
    host: str | None
    ports: tuple[tuple[int, int], ...]
    directions: frozenset[str]
    origin: Origin


@record
class ImportRule:
    """``python-import=``: top-level modules the program may import (``*``: any)."""

    modules: frozenset[str]
    any_module: bool
    origin: Origin


@record
class ApiRule:
    """``python-api=ALLOW:...`` / ``DENY:...``: categories, functions or ``*``."""

    allow: bool
    targets: tuple[str, ...]
    origin: Origin


@record
class EvalRule:
    """One ``eval-*`` line, validated; enforced by the eval guard.

    Attributes:
        key: the key without ``eval-`` and profile (``syntax``, ``timeout``...).
        profile: the profile name, ``""`` for the default one.
        deny: the line starts with ``DENY:`` (list keys only).
        values: the listed names (list keys), or the one normalised value (scalar keys:
            seconds for ``timeout``, bytes for ``max-alloc``, an int otherwise, the mode
            name for ``namespace``).
    """

    key: str
    profile: str
    deny: bool
    values: tuple[str | int | float, ...]
    origin: Origin


@record
class ResultClassRule:
    """``remote-result-class=``: classes whose instances ``remote-result-mode=objects``
    rebuilds, besides the application's own, as ``module.qualname`` (or
    ``module:qualname`` when the class is nested in another)."""

    names: frozenset[str]
    origin: Origin


@record
class ProviderOption:
    """``<provider>.<option>=value`` for a kernel provider we ship."""

    provider: str
    option: str
    value: str
    origin: Origin


if TYPE_CHECKING:

    @record
    class Setting(Generic[T]):
        """A single-valued key with the line that set it."""

        value: T
        origin: Origin

else:

    @record
    class Setting:
        """A single-valued key with the line that set it."""

        value: object
        origin: Origin


@record
class Policy:
    """Everything the rules say, merged from the command line, the file and its includes.

    Attributes:
        rule_files: every rule file consulted, the main one first, including includes that
            do not exist yet (creating one would change the rules, so all are protected).
        pins: hostnames of ``net=`` rules with the addresses they resolved to at parse time.
        warnings: problems that do not stop the run, shown to the user.
    """

    expose: tuple[ExposeRule, ...] = ()
    ignore: tuple[IgnoreRule, ...] = ()
    env: tuple[EnvRule, ...] = ()
    unenv: tuple[UnenvRule, ...] = ()
    net: tuple[NetRule, ...] = ()
    imports: tuple[ImportRule, ...] = ()
    api: tuple[ApiRule, ...] = ()
    eval: tuple[EvalRule, ...] = ()
    provider_options: tuple[ProviderOption, ...] = ()
    py_sandbox: Setting[bool] | None = None
    os_sandbox: Setting[str] | None = None
    remote_result_mode: Setting[str] | None = None
    remote_result_guard: Setting[bool] | None = None
    result_classes: tuple[ResultClassRule, ...] = ()
    sandbox_timeout: Setting[float] | None = None
    sandbox_memory: Setting[int] | None = None
    sandbox_open_files: Setting[int] | None = None
    sandbox_processes: Setting[int] | None = None
    audit_log: Setting[str] | None = None
    audit_log_level: Setting[str] | None = None
    quiet_refusals: Setting[bool] | None = None
    prompt: Setting[str] | None = None
    learn: Setting[str] | None = None
    learn_lock: Origin | None = None
    rule_files: tuple[str, ...] = ()
    pins: tuple[tuple[str, tuple[str, ...]], ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def prompting(self) -> bool:
        """Whether refusals are asked about on the terminal: ``prompt=tty`` (``--prompt``)."""
        return self.prompt is not None and self.prompt.value == "tty"

    @property
    def python_layer(self) -> bool:
        """Whether the Python layer is on: ``py-sandbox=`` absent or ``true``."""
        return self.py_sandbox is None or self.py_sandbox.value


@record
class Verdict:
    """The answer of a verdict function.

    Attributes:
        allowed: whether the access may happen.
        rule: the deciding rule; ``None`` when nothing matched (default deny) or for an
            implicit grant.
        hidden: for paths, whether a refusal must look like absence (not exposed, ignored)
            rather than a permission error.
        category: for sensitive functions, the registry category.
        fix: the exact rule line that would allow the access, when one would.
        address_class: for a connection refused by the SSRF-safe defaults, the class of
            its address ("loopback", "link-local (cloud metadata)": ``netclasses``).
    """

    allowed: bool
    rule: Origin | None = None
    hidden: bool = False
    category: str | None = None
    fix: str | None = None
    address_class: str | None = None
