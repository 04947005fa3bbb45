"""The rules as the kernel layer needs them: a ``ConfinementPlan`` compiled from a policy.

The plan grants what the Python layer grants (every exposure, the private temporary
directory, the devices, the CA stores, the interpreter's own trees), plus the few system
files the interpreter and the C library read natively, where no Python guard ever sees
them. That list is short on purpose and never holds ``/``, ``/etc``, ``/home``, ``/root``,
``/tmp``, ``/proc`` or ``/dev`` whole:

- always: the shared libraries and the loader's cache (``/usr/lib``, ``/lib``, ``/lib64``,
  ``/usr/lib64``, ``/etc/ld.so.cache``), and the time zone (``/etc/localtime``,
  ``/usr/share/zoneinfo``), which ``time`` and ``datetime`` read at import;
- with a ``net=`` ALLOW rule: what the resolver and OpenSSL read (``/etc/hosts``,
  ``/etc/resolv.conf``, ``/etc/nsswitch.conf``, ``/etc/host.conf``, ``/etc/gai.conf``,
  ``/etc/services``, ``/etc/protocols``, ``/etc/ssl/openssl.cnf``);
- with a ``python-api=`` rule that lets the program start another program: the
  directories of commands (``/usr/bin``, ``/bin``, ``/usr/local/bin``, ``/usr/sbin``,
  ``/sbin``), so that ``subprocess.run(["ls"])`` works as the rule says.

What Landlock cannot express stays with the Python layer alone: ``ignore=`` patterns
(Landlock only adds rights, never takes a subtree back), hosts and addresses (Landlock
knows TCP ports), UDP, and ``DENY`` network rules. The rule files inside a read-write
exposure are listed apart (``read_only``): a provider that can make a mount namespace binds
them read-only onto themselves.
"""

from __future__ import annotations

from pysandboxes._policy.judge import ApiJudge
from pysandboxes._policy.plan import ConfinementPlan
from pysandboxes._policy.registry import CATEGORY_MEMBERS, SUBINTERPRETER_FUNCTIONS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from pysandboxes._policy.model import ExposeRule, NetRule, Policy

SYSTEM_READ = (
    "/usr/lib",
    "/usr/lib64",
    "/lib",
    "/lib64",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/usr/share/zoneinfo",
)
NETWORK_READ = (
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/ssl/openssl.cnf",
)
COMMAND_DIRS = ("/usr/bin", "/bin", "/usr/local/bin", "/usr/sbin", "/sbin")

#: Above this many ports in one direction, the kernel is not asked to list them (one rule
#: per port: 64k rules would cost the start-up time); the Python layer still checks them.
MAX_PORTS = 1024

# process-exec functions that start no other program: they fork the interpreter, or run
# a sub-interpreter in this process. Allowing only these gives no right to execute files.
_NO_PROGRAM = frozenset(
    {
        "os.fork",
        "posix.fork",
        "os.forkpty",
        "posix.forkpty",
        "pty.fork",
        *SUBINTERPRETER_FUNCTIONS,
    }
)


def may_start_programs(policy: Policy) -> bool:
    """Whether a ``python-api=`` rule allows a function that executes another program."""
    api = ApiJudge(policy)
    return any(api.judge(name).allowed for name in CATEGORY_MEMBERS["process-exec"] - _NO_PROGRAM)


def may_use_unix_sockets(policy: Policy) -> bool:
    """Whether the rules may need AF_UNIX sockets: a read-write exposure (other than a
    device) where a socket file may live, or processes to start (``multiprocessing``
    talks to its manager through one). Otherwise none is made at all: the kernel cannot
    judge where one connects, and connecting needs write access to the socket anyway."""
    if any(rule.writable and not rule.path.startswith("/dev/") for rule in policy.expose):
        return True
    api = ApiJudge(policy)
    return any(api.judge(name).allowed for name in CATEGORY_MEMBERS["process-exec"])


def tcp_ports(rules: Iterable[NetRule], direction: str) -> tuple[int, ...] | None:
    """The TCP ports ALLOW rules open in ``direction`` (``OUT``: connect, ``IN``: bind);
    ``None`` when they open more than ``MAX_PORTS`` of them."""
    ports: set[int] = set()
    for rule in rules:
        if rule.allow and "tcp" in rule.protos and direction in rule.directions:
            for low, high in rule.ports:
                if len(ports) + high - low + 1 > MAX_PORTS:
                    return None
                ports.update(range(low, high + 1))
    return tuple(sorted(ports))


def compile_plan(
    policy: Policy,
    exposures: Iterable[ExposeRule],
    tempdir: str | None,
    interpreter_files: Iterable[str] = (),
) -> ConfinementPlan:
    """The plan for a sandbox with these rules.

    Args:
        policy: the parsed rules (``net=`` and ``python-api=`` are read here).
        exposures: every path the Python layer exposes, rules and implicit grants alike
            (what ``_inside.bootstrap`` gives the file guard).
        tempdir: the private temporary directory, or ``None``.
        interpreter_files: files the interpreter reads at start-up before any guard
            (``pyvenv.cfg``): a sub-interpreter or a started interpreter reads them again.
    """
    exposures = list(exposures)  # walked twice: the grants, then what ignore= hides
    network = any(rule.allow for rule in policy.net)
    read = [*SYSTEM_READ, *interpreter_files]
    if network:
        read += NETWORK_READ
    write: list[str] = []
    exposed: list[str] = []
    devices: list[str] = []
    create: list[str] = []
    create_dirs: list[str] = []
    for rule in exposures:
        if rule.path == tempdir:
            continue  # granted as the tempdir: writable, never executable
        (write if rule.writable else read).append(rule.path)
        if rule.writable and not _wide(_parent(rule.path)):
            # Made by the program if missing when the plan is applied (or made again).
            (create_dirs if rule.is_dir else create).append(rule.path)
        if rule.path.startswith("/dev/"):
            devices.append(rule.path)
        else:
            exposed.append(rule.path)
    execute: list[str] = []
    if may_start_programs(policy):
        read += COMMAND_DIRS
        execute = [*SYSTEM_READ, *COMMAND_DIRS, *exposed]
    masked, masks_missing = _masks(policy, exposures)
    return ConfinementPlan(
        read=_unique(read),
        write=_unique(write),
        execute=_unique(execute),
        devices=_unique(devices),
        tempdir=tempdir,
        network=network,
        tcp_connect=tcp_ports(policy.net, "OUT") if network else (),
        tcp_bind=tcp_ports(policy.net, "IN") if network else (),
        unix_sockets=may_use_unix_sockets(policy),
        read_only=rule_files_inside(policy, [*write, *map(_parent, [*create, *create_dirs])]),
        pinned=directories_to_rule_files(policy, write),
        masked=masked,
        masks_missing=masks_missing,
        create=_unique(create),
        create_dirs=_unique(create_dirs),
    )


def _parent(path: str) -> str:
    return path.rpartition("/")[0] or "/"


#: Directories whose regular files the kernel never grants for the sake of one file rule
#: (see ``ConfinementPlan.create``): the system's, and homes, where a file beside the one
#: named (``~/.bashrc``, ``/etc/passwd``) or below it (``~/.ssh/authorized_keys``) would
#: hand a program the sandbox starts the machine. A file there is granted only if it exists.
_WIDE_ROOTS = (
    "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/boot", "/dev", "/proc", "/sys",
    "/var", "/run", "/snap",
)  # fmt: skip


def _wide(directory: str) -> bool:
    if directory in ("/", "/home", "/root", "/tmp", "/mnt", "/media", "/opt", "/srv"):
        return True
    if directory.startswith("/home/") and directory.count("/") == 2:
        return True  # a home itself (its subdirectories are the user's projects)
    return any(directory == root or directory.startswith(root + "/") for root in _WIDE_ROOTS)


def rule_files_inside(policy: Policy, write: Iterable[str]) -> tuple[str, ...]:
    """The rule files (and the ``learn=`` output, the decision log) that exist, as real
    paths, inside a writable path: what the sandbox could rewrite for its next run."""
    import os

    from pysandboxes._policy.pathnames import within

    places = [os.path.realpath(path) for path in write]
    found: list[str] = []
    for path in _guarded_files(policy):
        real = os.path.realpath(path)
        if os.path.isfile(real) and any(within(real, place) for place in places):
            found.append(real)
    return _unique(found)


#: The most entries looked at, and paths masked, to find what ``ignore=`` hides at start.
MAX_SCANNED = 50_000
MAX_MASKS = 2_000


def _masks(policy: Policy, exposures: Iterable[ExposeRule]) -> tuple[tuple[str, ...], str]:
    """``masked`` and ``masks_missing`` of the plan: what ``ignore=`` hides inside the
    rules' exposed directories (not the interpreter's trees), found by a bounded walk
    that never enters a hidden directory nor follows a link."""
    if not policy.ignore:
        return (), ""
    import os

    from pysandboxes._policy.judge import FileJudge
    from pysandboxes._policy.model import Access

    judge = FileJudge(list(exposures), policy.ignore)
    pending = [rule.path for rule in policy.expose if rule.is_dir and os.path.isdir(rule.path)]
    masked: list[str] = []
    scanned = 0
    while pending:
        directory = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            scanned += 1
            if scanned > MAX_SCANNED or len(masked) >= MAX_MASKS:
                why = f"more than {MAX_SCANNED} entries or {MAX_MASKS} ignored paths at start"
                return tuple(masked), why
            verdict = judge.judge(entry.path, Access.READ)
            if verdict.hidden and verdict.rule is not None:
                masked.append(entry.path)  # hidden by an ignore= rule: nothing below shown
            elif entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
    return tuple(masked), ""


def _guarded_files(policy: Policy) -> list[str]:
    """The files the next run reads its rules from, as they are named."""
    files = [*policy.rule_files, *([policy.learn.value] if policy.learn is not None else [])]
    if policy.audit_log is not None:
        files.append(policy.audit_log.value)
    return files


def directories_to_rule_files(policy: Policy, write: Iterable[str]) -> tuple[str, ...]:
    """The directories strictly inside a writable path on the way to a rule file (real
    paths, parents first): renamed, a new one of the same name could hold other rules."""
    import os

    from pysandboxes._policy.pathnames import within

    places = [os.path.realpath(path) for path in write]
    found: list[str] = []
    for path in _guarded_files(policy):
        directory = os.path.dirname(os.path.realpath(path))
        chain: list[str] = []
        while directory != "/":
            if any(within(directory, p) and directory != p for p in places):
                chain.append(directory)
            directory = os.path.dirname(directory)
        found += reversed(chain)
    return _unique(d for d in found if os.path.isdir(d))


def replaceable_links(policy: Policy) -> list[tuple[str, ExposeRule]]:
    """The links on the way to a rule file that lie in a read-write exposure, each with
    that exposure: the sandbox could replace the link, and so the next run's rules,
    which no kernel layer can prevent (a link cannot be bound onto itself)."""
    import os

    from pysandboxes._policy.links import links_on_the_way
    from pysandboxes._policy.pathnames import within

    writable = [rule for rule in policy.expose if rule.writable and rule.is_dir]
    found: list[tuple[str, ExposeRule]] = []
    for path in _guarded_files(policy):
        for link in links_on_the_way(os.path.abspath(path)):
            place = next((r for r in writable if within(link, r.path) and link != r.path), None)
            if place is not None:
                found.append((link, place))
    return found


def _unique(paths: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(paths))
