"""Landlock: the kernel's sandbox for unprivileged processes, applied to this process.

A small binding of our own over libc's ``syscall`` (no binary, no root, works in
containers). The best ABI the kernel offers is used: file rights (ABI 1), ``REFER``
(2), ``TRUNCATE`` (3), TCP bind and connect ports (4), device ioctls (5), and the scopes
that keep signals and abstract UNIX sockets inside the sandbox (6). Whatever a right
does not cover stays allowed by Landlock, so every concern the kernel cannot enforce is
reported in ``AppliedLayer.missing`` instead of being silently dropped.

Landlock applies to the calling thread and the processes it starts afterwards: apply it
while the interpreter is still single-threaded. It only ever removes rights, and the
process can never lift it.
"""

from __future__ import annotations

import errno
import os
import stat
import sys

from pysandboxes._kernel import libc
from pysandboxes._policy import plan as concerns
from pysandboxes._policy.plan import AppliedLayer
from pysandboxes.errors import OSLayerUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from pysandboxes._policy.plan import ConfinementPlan

# System call numbers: the same on every architecture since the unified table (424 and up).
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_RULE_NET_PORT = 2
_PR_SET_NO_NEW_PRIVS = 38

# include/uapi/linux/landlock.h
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

_FS_V1 = (1 << 13) - 1
#: Rights the kernel accepts on a rule for a file that is not a directory (else EINVAL).
_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
_READ = FS_READ_FILE | FS_READ_DIR
# Read-write: everything but making device nodes (which also needs CAP_MKNOD).
_CHANGE = FS_WRITE_FILE | FS_TRUNCATE | FS_REFER | FS_REMOVE_DIR | FS_REMOVE_FILE
_WRITE = _READ | _CHANGE | FS_MAKE_DIR | FS_MAKE_REG | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_SYM
#: On the directory of a planned read-write file: Landlock's rules hold inodes, so the
#: right to make it (when missing, or again after a rename) is its directory's, for every
#: regular file there (the Python layer keeps it to the name). Making, reading, writing,
#: truncating and removing regular files; never a directory, a link, a socket, a
#: listing or a rename from elsewhere (REFER).
_CREATE = FS_MAKE_REG | FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE | FS_REMOVE_FILE
#: Likewise for a directory the program may make (``expose-rw=./out/``): directories too.
_CREATE_TREE = _CREATE | FS_MAKE_DIR | FS_REMOVE_DIR | FS_READ_DIR


def _handled_fs(abi: int) -> int:
    rights = _FS_V1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


class _Kernel:
    """The three system calls and ``prctl``, through libc; ``OSError`` on failure."""

    # The kernel reads each attribute structure and writes none: they go as bytes, laid
    # out as the kernel's (little-endian here, packed: a path rule is 12 bytes).

    def _check(self, result: int, what: str) -> int:
        if result < 0:
            code = libc.errno()
            raise OSError(code, f"{what}: {os.strerror(code)}")
        return result

    def abi(self) -> int:
        return _abi()

    def create_ruleset(self, fs: int, net: int, scoped: int, abi: int) -> int:
        attr = b"".join(value.to_bytes(8, sys.byteorder) for value in (fs, net, scoped))
        # An older kernel knows a shorter struct and refuses non-zero fields it cannot read.
        size = 8 if abi < 4 else 16 if abi < 6 else 24
        return self._check(
            libc.call("syscall", _SYS_CREATE_RULESET, attr, size, 0), "landlock_create_ruleset"
        )

    def add_path(self, ruleset: int, fd: int, rights: int) -> None:
        attr = rights.to_bytes(8, sys.byteorder) + fd.to_bytes(4, sys.byteorder, signed=True)
        self._check(
            libc.call("syscall", _SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, attr, 0),
            "landlock_add_rule",
        )

    def add_ports(self, ruleset: int, ports: Iterable[int], right: int) -> None:
        for port in ports:
            attr = right.to_bytes(8, sys.byteorder) + port.to_bytes(8, sys.byteorder)
            self._check(
                libc.call("syscall", _SYS_ADD_RULE, ruleset, _RULE_NET_PORT, attr, 0),
                "landlock_add_rule",
            )

    def restrict_self(self, ruleset: int) -> None:
        # Without no_new_privs an unprivileged process may not restrict itself, and a
        # set-uid program run later could shed the restriction's meaning.
        self._check(
            libc.call("prctl", _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)"
        )
        self._check(libc.call("syscall", _SYS_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")


def abi_version() -> int:
    """The Landlock ABI of this kernel; 0 when it has none (or has it disabled)."""
    try:
        return _abi()
    except OSError:
        return 0


def unavailable_reason() -> str | None:
    """Why Landlock cannot be used here, or ``None`` when it can."""
    try:
        _abi()
    except OSError as exc:
        return _why(exc)
    return None


def _abi() -> int:
    """The kernel's answer to the version query: the trusted side asks it at every start."""
    version = libc.call("syscall", _SYS_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)
    if version < 0:
        code = libc.errno()
        raise OSError(code, f"landlock_create_ruleset: {os.strerror(code)}")
    return version


def _why(exc: OSError) -> str:
    if exc.errno == errno.ENOSYS:
        return "this kernel has no Landlock (built without CONFIG_SECURITY_LANDLOCK)"
    if exc.errno == errno.EOPNOTSUPP:
        return "Landlock is disabled on this kernel (add it to the lsm= boot parameter)"
    return f"Landlock cannot be queried: {exc.strerror}"


def _path_rights(plan: ConfinementPlan) -> dict[str, int]:
    """Each planned path with the union of the rights the plan gives it."""
    rights: dict[str, int] = {}

    def grant(paths: Iterable[str], bits: int) -> None:
        for path in paths:
            rights[path] = rights.get(path, 0) | bits

    grant(plan.read, _READ)
    grant(plan.write, _WRITE)
    grant(plan.execute, FS_EXECUTE | FS_READ_FILE)
    grant(plan.devices, FS_IOCTL_DEV)
    # A file rule lets its file be removed and made again (a rotated log, a journal):
    # the new file is a new inode, whose rights can only come from its directory.
    grant([os.path.dirname(p) for p in plan.create], _CREATE)
    grant([os.path.dirname(p) for p in plan.create_dirs if not os.path.lexists(p)], _CREATE_TREE)
    if plan.tempdir is not None:
        grant([plan.tempdir], _WRITE)
    return rights


def _add_paths(kernel: _Kernel, ruleset: int, plan: ConfinementPlan, handled: int) -> list[str]:
    skipped: list[str] = []
    for path, wanted in _path_rights(plan).items():
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            skipped.append(path)  # absent (or unreachable): nothing to grant
            continue
        try:
            rights = wanted & handled
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                rights &= _FILE_RIGHTS
            if rights:
                kernel.add_path(ruleset, fd, rights)
        finally:
            os.close(fd)
    return skipped


def apply(plan: ConfinementPlan) -> AppliedLayer:
    """Restrict this process (and every process it starts) to ``plan``; never undone.

    Raises:
        OSLayerUnavailable: the kernel has no usable Landlock, or refused the ruleset.
    """
    kernel = _Kernel()
    try:
        abi = kernel.abi()
    except OSError as exc:
        raise OSLayerUnavailable(_why(exc), provider="landlock") from exc
    try:
        handled_fs = _handled_fs(abi)
        enforced = [concerns.FILES, concerns.EXECUTE]
        missing: list[tuple[str, str]] = []
        for concern, needed in (
            (concerns.REFER, 2),
            (concerns.TRUNCATE, 3),
            (concerns.DEVICE_IOCTL, 5),
        ):
            if abi >= needed:
                enforced.append(concern)
            else:
                missing.append((concern, f"needs Landlock ABI {needed}, this kernel has {abi}"))
        handled_net, net_concerns = _net_rights(plan, abi, missing)
        enforced += net_concerns
        scoped = _scopes(plan, abi, enforced, missing)
        ruleset = kernel.create_ruleset(handled_fs, handled_net, scoped, abi)
        try:
            skipped = _add_paths(kernel, ruleset, plan, handled_fs)
            if handled_net & NET_CONNECT_TCP:
                kernel.add_ports(ruleset, plan.tcp_connect or (), NET_CONNECT_TCP)
            if handled_net & NET_BIND_TCP:
                kernel.add_ports(ruleset, plan.tcp_bind or (), NET_BIND_TCP)
            kernel.restrict_self(ruleset)
        finally:
            os.close(ruleset)
    except OSError as exc:
        raise OSLayerUnavailable(
            f"Landlock refused the sandbox's rules: {exc.strerror or exc}", provider="landlock"
        ) from exc
    return AppliedLayer("landlock", abi, tuple(enforced), tuple(missing), tuple(skipped))


def _net_rights(
    plan: ConfinementPlan, abi: int, missing: list[tuple[str, str]]
) -> tuple[int, list[str]]:
    """The TCP rights to handle: those the plan restricts (all of them with no network)."""
    handled = 0
    enforced: list[str] = []
    for concern, ports, right in (
        (concerns.TCP_CONNECT, plan.tcp_connect, NET_CONNECT_TCP),
        (concerns.TCP_BIND, plan.tcp_bind, NET_BIND_TCP),
    ):
        if ports is None and plan.network:
            continue  # any port: nothing to restrict
        if abi >= 4:
            handled |= right
            enforced.append(concern)
        else:
            missing.append((concern, f"needs Landlock ABI 4, this kernel has {abi}"))
    return handled, enforced


def _scopes(
    plan: ConfinementPlan, abi: int, enforced: list[str], missing: list[tuple[str, str]]
) -> int:
    scoped = 0
    for concern, wanted, bit in (
        (concerns.SIGNALS, plan.scope_signals, SCOPE_SIGNAL),
        (concerns.ABSTRACT_SOCKETS, plan.scope_abstract_sockets, SCOPE_ABSTRACT_UNIX_SOCKET),
    ):
        if not wanted:
            continue
        if abi >= 6:
            scoped |= bit
            enforced.append(concern)
        else:
            missing.append((concern, f"needs Landlock ABI 6, this kernel has {abi}"))
    return scoped
