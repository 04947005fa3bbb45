"""What the trusted side hands the sandboxed interpreter: the program and its rules.

The spec travels one way only, from the trusted side to the child it has just spawned,
over a pipe inherited by that child alone. Nothing here decodes what a sandboxed process
sends back: that is the job of the RPC codec.
"""

from __future__ import annotations

from pysandboxes._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pysandboxes._policy.model import ExposeRule, Policy

PROGRAM_KINDS = ("script", "module", "command", "stdin", "repl", "serve")
#: Providers that start the interpreter through a program of their own (a mount view and
#: namespaces made before it runs): the child knows it is namespaced by its spec alone.
WRAPPING = ("bwrap", "unshare")
#: Providers with a kernel layer: Landlock and the seccomp filter (in namespaces too).
KERNEL_LAYERED = ("landlock", *WRAPPING)

#: The code the trusted side gives ``python -c``. The child starts without the variables
#: that run code at start-up (see ``deferred_env``), and this code takes the working
#: directory ("") off ``sys.path`` before importing anything: a module there named like a
#: standard one (``fnmatch.py``) would otherwise run before the kernel layer and the guards.
#: ``main`` gets the path CPython made; the runner restores it, with the program's directory
#: first, once everything is in place. It puts this package on the path, takes it off
#: again, and starts ``pysandboxes._inside.bootstrap.main``. First of all, while the
#: process is small, it closes every descriptor it inherited but those the spec names and
#: puts the program below a pid 1 of its own (``_kernel.lifetime``): ``sys.argv`` holds
#: the spec's descriptor, the provider, and the descriptors kept. Then it binds the public
#: entry points (imported on first use elsewhere): once the guards are up, the program
#: may not import the private modules they live in. The cyclic garbage collector waits
#: until the walls are up (``bootstrap.main`` freezes what the start-up made, then
#: starts it): the start-up's objects are the sandbox's for good, and collecting them,
#: during the imports and again at every full collection, cost milliseconds of each run.
BOOT = (
    "import gc,sys;gc.disable();_p=sys.path[:];sys.path[:]=[p for p in _p if p];"
    "sys.path.insert(0,{path!r});"
    "from pysandboxes._kernel.lifetime import begin as _b;_b(*sys.argv[2:4]);"
    "import pysandboxes as _s;[getattr(_s,_n) for _n in _s.__all__];del _s;"
    "from pysandboxes._inside.bootstrap import main as _m;"
    "from pysandboxes._inside.runner import run as _r;"
    "del sys.path[0];_r(*_m(_p))"
)
#: ``PYTHON*`` variables the interpreter may read at start-up: they set modes, never where
#: code comes from. Every other ``PYTHON*`` variable (``PYTHONPATH``, ``PYTHONHOME``,
#: ``PYTHONPYCACHEPREFIX``, ``PYTHONWARNINGS``, ``PYTHONUSERBASE``...) waits for the walls.
STARTUP_VARIABLES = frozenset(
    {
        "PYTHONASYNCIODEBUG",
        "PYTHONBREAKPOINT",
        "PYTHONCOERCECLOCALE",
        "PYTHONDEBUG",
        "PYTHONDEVMODE",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONFAULTHANDLER",
        "PYTHONHASHSEED",
        "PYTHONINSPECT",
        "PYTHONINTMAXSTRDIGITS",
        "PYTHONIOENCODING",
        "PYTHONMALLOC",
        "PYTHONMALLOCSTATS",
        "PYTHONNODEBUGRANGES",
        "PYTHONNOUSERSITE",
        "PYTHONOPTIMIZE",
        "PYTHONPROFILEIMPORTTIME",
        "PYTHONSAFEPATH",
        "PYTHONTRACEMALLOC",
        "PYTHONUNBUFFERED",
        "PYTHONUTF8",
        "PYTHONVERBOSE",
        "PYTHONWARNDEFAULTENCODING",
    }
)


#: The deferred entry that carries ``-X pycache_prefix=``, taken off the start-up's options
#: for the same reason as ``PYTHONPYCACHEPREFIX``; the child removes it from the
#: environment when it sets ``sys.pycache_prefix``.
PYCACHE_OPTION = "PYSANDBOXES_X_PYCACHE_PREFIX"


def deferred(name: str) -> bool:
    """Whether the variable ``name`` waits for the walls (see ``LaunchSpec.deferred_env``)."""
    return name.startswith("PYTHON") and name not in STARTUP_VARIABLES


#: The target of an interactive session run under the template's rules, for want of a
#: rule file (its banner says so).
TEMPLATE_SESSION = "<template>"


@record
class Program:
    """What to run, as CPython's command line says it.

    Attributes:
        kind: ``script``, ``module`` (``-m``), ``command`` (``-c``), ``stdin`` (``-`` or a
            pipe), ``repl``, or ``serve`` (partial mode: serve ``@sandbox`` calls).
        target: the script path, module name or command text (a session's:
            ``TEMPLATE_SESSION`` or nothing).
        args: ``sys.argv[1:]`` of the program.
    """

    kind: str
    target: str = ""
    args: tuple[str, ...] = ()


@record
class LearnSpec:
    """Present when the run learns: where the child sends its events.

    Attributes:
        event_fd: the write end of the event pipe, inherited by the child alone.
        forwarded: the variables the rules give the sandbox; reads of others are learned.
    """

    event_fd: int
    forwarded: frozenset[str]


@record
class AuditSpec:
    """Present when the run keeps a decision log (``audit-log=``).

    Attributes:
        fd: the write end of the decision pipe, inherited by the child alone (the log
            itself stays with the trusted side: the child never learns where it is).
        allowed_too: ``audit-log-level=all``: allowed accesses are reported too.
        logged: a log is kept (``audit-log=``); without one the refusals are only summed
            up at exit, and reads of variables the sandbox lacks are not watched.
    """

    fd: int
    allowed_too: bool = True
    logged: bool = True


@record
class ServeSpec:
    """Present in partial mode: the child serves calls instead of running a program.

    Attributes:
        fd: the child's end of the connection (a socket the child alone inherits).
        workers: threads that run sync functions (calls beyond wait for one).
        files: the source files of the modules that define ``@sandbox`` functions and of
            their packages: the program, readable without a rule.
        path: the directories of the search path those modules are found in.
        modules: the names of those modules: importable without a rule, as the program.
        objects: results may hold objects (``remote-result-mode=objects``): the child
            sends them as data (``_wire.objects``).
        relief: the read end of a pipe the trusted side writes a byte to before it sends
            anything while a ``CALL_ALONE`` runs (``-1``: none).
    """

    fd: int
    workers: int
    files: tuple[str, ...] = ()
    path: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    objects: bool = False
    relief: int = -1


@record
class LaunchSpec:
    """Everything the sandboxed interpreter needs, resolved by the trusted side.

    Attributes:
        policy: the parsed rules.
        program: what to run.
        rule_file: the rule file as shown in messages.
        rule_dir: its directory (suggested paths are written relative to it).
        protected: files the sandbox may never write, create, rename or remove.
        implicit: exposures the rules do not list: devices, certificates, the private
            temporary directory.
        tempdir: the private temporary directory, or ``None``.
        learning: set when the run learns (nothing is refused, everything is recorded).
        deferred_env: variables that make the interpreter find or run code at start-up
            (``PYTHONPATH``, ``PYTHONPYCACHEPREFIX``...): kept out of the child's
            environment until its walls are up, then put back and applied.
        startup_flags: interpreter options the trusted side adds (``-s`` when the user's
            site directory lies where the sandbox may write).

        provider: the kernel provider of the run (``landlock``, ``bwrap``...), chosen by
            the trusted side; the child applies Landlock itself when it is ``landlock``.
        serve: set in partial mode (see ``ServeSpec``).
        audit: set when the run keeps a decision log (see ``AuditSpec``).
        broker_fd: the socket broker's channel (``_kernel.unixbroker``), ``-1`` when
            the run has no broker.
        ask_fd: the permission requests' socket (``_wire.asks``), ``-1`` when nobody
            answers them (prompting is off).
        egress_fd: the socket the broker connects through (``_host.egressroutes``): the
            same as ``ask_fd`` when the run prompts too, ``-1`` when the run has the
            host's network (no ``net=`` name or wildcard, or not ``landlock``).
    """

    policy: Policy
    program: Program
    rule_file: str
    rule_dir: str
    protected: tuple[str, ...]
    implicit: tuple[ExposeRule, ...]
    tempdir: str | None
    learning: LearnSpec | None = None
    provider: str = "subprocess"
    deferred_env: tuple[tuple[str, str], ...] = ()
    startup_flags: tuple[str, ...] = ()
    serve: ServeSpec | None = None
    audit: AuditSpec | None = None
    broker_fd: int = -1
    ask_fd: int = -1
    egress_fd: int = -1


def named_descriptors(spec: LaunchSpec) -> tuple[int, ...]:
    """The descriptors ``spec`` hands the child besides its standard streams: every other
    one it inherits is closed before the program starts (``_kernel.lifetime.begin``)."""
    named = [spec.serve.fd if spec.serve is not None else -1]
    named.append(spec.serve.relief if spec.serve is not None else -1)
    named.append(spec.audit.fd if spec.audit is not None else -1)
    named.append(spec.learning.event_fd if spec.learning is not None else -1)
    named.append(spec.broker_fd)
    named.append(spec.ask_fd)
    named.append(spec.egress_fd)
    return tuple(fd for fd in named if fd > 2)


def _records() -> dict[str, type]:
    from pysandboxes._policy import model

    kinds: list[type] = [Program, LaunchSpec, LearnSpec, ServeSpec, AuditSpec]
    kinds += [
        model.Origin,
        model.ExposeRule,
        model.IgnoreRule,
        model.EnvRule,
        model.UnenvRule,
        model.NetRule,
        model.ImportRule,
        model.ApiRule,
        model.EvalRule,
        model.ProviderOption,
        model.ResultClassRule,
        model.Setting,
        model.Policy,
    ]
    return {kind.__name__: kind for kind in kinds}


def _plain(value: object) -> object:
    """A record tree as nested tuples of builtins, which ``marshal`` can carry."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    fields = getattr(type(value), "_fields", None)
    if fields is not None:
        return ("R", type(value).__name__, tuple(_plain(getattr(value, f)) for f in fields))
    if type(value) is tuple:
        return ("T", tuple(_plain(v) for v in value))  # type: ignore[union-attr]
    if type(value) is frozenset:
        return ("F", tuple(sorted(value)))  # type: ignore[arg-type]
    from pysandboxes._policy.model import Access

    if isinstance(value, Access):
        return ("A", value.value)
    from ipaddress import IPv4Network, IPv6Network

    if isinstance(value, (IPv4Network, IPv6Network)):
        return ("N", str(value))
    raise TypeError(f"cannot send a {type(value).__name__} to the sandbox")


def _rebuild(value: object, records: dict[str, type]) -> object:
    if type(value) is not tuple:
        return value
    item: tuple[Any, ...] = value  # type: ignore[assignment]
    tag = item[0]
    if tag == "R":
        return records[item[1]](*(_rebuild(v, records) for v in item[2]))
    if tag == "T":
        return tuple(_rebuild(v, records) for v in item[1])
    if tag == "F":
        return frozenset(item[1])
    if tag == "A":
        from pysandboxes._policy.model import access_named

        return access_named(item[1])
    if tag == "N":
        from ipaddress import ip_network

        return ip_network(item[1])
    raise ValueError(f"unknown tag {tag!r} in the launch spec")


def encode(spec: LaunchSpec) -> bytes:
    """The spec as bytes for the child's pipe (``marshal``: builtins only, no import)."""
    import marshal

    return marshal.dumps(_plain(spec))  # type: ignore[arg-type]


def decode(data: bytes) -> LaunchSpec:
    """Read a spec written by ``encode``. It comes from the trusted parent, never a child,
    and ``marshal`` builds only builtin values; records are rebuilt from a fixed list."""
    import marshal

    spec = _rebuild(marshal.loads(data), _records())
    if not isinstance(spec, LaunchSpec):
        raise TypeError("the launch spec is not a LaunchSpec")
    return spec
