"""What the kernel layer is asked to enforce, and what it reports it enforced.

A ``ConfinementPlan`` is provider-neutral: paths by the right they need, the network by
TCP port, and the scopes. Each provider maps it onto what its kernel offers and returns an
``AppliedLayer`` saying which concerns it really enforced, so a report can state on this
host which layer stands behind each rule.
"""

from __future__ import annotations

from pysandboxes._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

#: Concern names an ``AppliedLayer`` lists (also its ``missing`` keys).
FILES = "files"
EXECUTE = "execute"
TRUNCATE = "truncate"
REFER = "refer"
DEVICE_IOCTL = "device-ioctl"
TCP_CONNECT = "tcp-connect"
TCP_BIND = "tcp-bind"
NO_NETWORK = "no-network"
SIGNALS = "signals"
ABSTRACT_SOCKETS = "abstract-sockets"
MOUNT_VIEW = "mount-view"
PROCESSES = "processes"
TERMINAL_INPUT = "terminal-input"
KERNEL_INTERFACES = "kernel-interfaces"
UNIX_SOCKETS = "unix-sockets"
IPC = "ipc"
SOCKET_PROTOCOLS = "socket-protocols"
RULE_FILES = "rule-files"
IGNORED = "ignored"


@record
class ConfinementPlan:
    """The rights the sandboxed process keeps; everything else is refused by the kernel.

    Paths are absolute; a path that does not exist when the plan is applied is skipped.
    A directory grants its whole tree, a file only itself.

    Attributes:
        read: files and directories that may be read (and listed).
        write: files and directories that may be read, written, created in and removed from.
        execute: files and directories whose files may be executed; empty when no program
            may be started at all.
        devices: device nodes (among ``read`` and ``write``) that may also take ioctls.
        tempdir: the private temporary directory (read-write, never executable), or ``None``.
        network: whether any network is allowed at all; ``False`` puts the process in a
            network namespace of its own, with no interface up.
        tcp_connect: TCP ports that may be connected to; ``None`` when any port may be.
        tcp_bind: TCP ports that may be bound; ``None`` when any port may be.
        scope_signals: refuse signals to processes outside the sandbox.
        scope_abstract_sockets: refuse connecting to abstract UNIX sockets made outside it.
        unix_sockets: whether AF_UNIX sockets may be made at all. Landlock cannot judge
            where one connects (any socket file of the host), so they are refused unless
            the rules may need one: a read-write exposure (where a socket may live) or
            programs to start (``multiprocessing`` talks through them).
        create: files of ``write`` the program may make (they may be missing when the plan
            is applied), remove and make again: a kernel that holds rights on existing
            inodes grants them in the file's directory (see docs/configuration.md, "Files
            that do not exist yet"). Never a file of the system's directories or of a home
            itself: those are granted only as they exist.
        create_dirs: directories of ``write`` the program may make (``expose-rw=./out/``),
            granted in their parent while they are missing.
        read_only: files inside ``write`` that must stay unchanged (the rule files):
            Landlock cannot take a file back from a directory it granted, a read-only bind
            of the file onto itself in a mount namespace can.
        masked: the paths ``ignore=`` hides that exist when the plan is made, inside the
            rules' exposures: each covered (an empty read-only directory, ``/dev/null``)
            in the sandbox's mount namespace, so that native code reads nothing there.
        masks_missing: why some ignored paths are not masked (too many to find at
            start), ``""`` when every one found is.
        pinned: directories inside ``write`` on the way to such a file: each bound onto
            itself (still writable), so that no process of the sandbox can rename or
            remove it, which would let it plant a rule file of its own where the next run
            looks (a mount point cannot be moved).
    """

    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    execute: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    tempdir: str | None = None
    network: bool = False
    tcp_connect: tuple[int, ...] | None = ()
    tcp_bind: tuple[int, ...] | None = ()
    scope_signals: bool = True
    scope_abstract_sockets: bool = True
    unix_sockets: bool = True
    read_only: tuple[str, ...] = ()
    create: tuple[str, ...] = ()
    create_dirs: tuple[str, ...] = ()
    pinned: tuple[str, ...] = ()
    masked: tuple[str, ...] = ()
    masks_missing: str = ""


@record
class AppliedLayer:
    """What a provider enforced on this process.

    Attributes:
        provider: ``landlock``, ``bwrap``, ``unshare``, or ``none`` when nothing was
            applied.
        abi: the provider's version on this kernel (Landlock ABI), 0 when not applicable.
        enforced: the concerns the kernel now enforces (``files``, ``tcp-connect``...).
        missing: concerns the plan asked for and the kernel could not enforce, each with
            the reason, as ``(concern, reason)``.
        skipped: planned paths that did not exist and got no rule.
    """

    provider: str
    abi: int = 0
    enforced: tuple[str, ...] = ()
    missing: tuple[tuple[str, str], ...] = ()
    skipped: tuple[str, ...] = ()

    def enforces(self, concern: str) -> bool:
        """Whether ``concern`` (one of this module's names) is enforced by the kernel."""
        return concern in self.enforced

    def plus(self, enforced: Iterable[str], missing: Iterable[tuple[str, str]]) -> AppliedLayer:
        """This layer, with more concerns enforced and missing."""
        return AppliedLayer(
            self.provider,
            self.abi,
            (*self.enforced, *enforced),
            (*self.missing, *missing),
            self.skipped,
        )

    def brokered(self) -> AppliedLayer:
        """This layer, with AF_UNIX addresses judged by the trusted side's broker."""
        missing = tuple((c, why) for c, why in self.missing if c != UNIX_SOCKETS)
        enforced = tuple(dict.fromkeys((*self.enforced, UNIX_SOCKETS)))
        return AppliedLayer(self.provider, self.abi, enforced, missing, self.skipped)

    def with_missing(self, concern: str, reason: str) -> AppliedLayer:
        """This layer, with ``concern`` not enforced, for ``reason``."""
        return AppliedLayer(
            self.provider, self.abi, self.enforced, (*self.missing, (concern, reason)), self.skipped
        )


def in_namespaces(provider: str, plan: ConfinementPlan, inner: AppliedLayer) -> AppliedLayer:
    """The layer of a namespace provider: what its namespaces enforce, plus ``inner``
    (Landlock applied inside them, or ``none`` with the reason)."""
    enforced = [*inner.enforced, PROCESSES, SIGNALS, IPC]  # pid and IPC namespaces of their own
    if provider == "bwrap":
        # Unexposed paths, socket files included, do not exist in the view.
        enforced += [MOUNT_VIEW, UNIX_SOCKETS]
    if not plan.network:
        enforced.append(NO_NETWORK)
    done = set(enforced)
    missing = tuple((c, why) for c, why in inner.missing if c not in done)
    return AppliedLayer(provider, inner.abi, tuple(dict.fromkeys(enforced)), missing, inner.skipped)
