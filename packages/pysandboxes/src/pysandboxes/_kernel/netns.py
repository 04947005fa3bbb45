"""A network namespace of its own, for a sandbox whose rules allow no network at all.

Landlock filters TCP by port only: UDP datagrams, raw and packet sockets, ICMP and
abstract UNIX sockets of the host pass it. An empty network namespace closes all of them
at once: it has only a loopback interface, and that interface is left down, so every
address is unreachable at once (``ENETUNREACH``, no waiting for a timeout) and nothing in
the sandbox can even talk to itself over IP. Nothing in the interpreter needs IP for its
own work (``asyncio`` and ``multiprocessing`` use UNIX socket pairs and pipes), and
bringing the interface up would take a capability this module would rather drop.

As root, the namespace is made directly. Otherwise a user namespace is made with it,
mapping the user to itself (the program sees the same uid and gid), and the capabilities
that namespace hands its creator are dropped at once: the sandbox keeps no privilege.
Apply it while the process is single-threaded (the kernel refuses a user namespace to a
threaded process).
"""

from __future__ import annotations

import errno
import os

from pysandboxes.errors import OSLayerUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ctypes

_CLONE_NEWNET = 0x40000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CAPABILITY_VERSION_3 = 0x20080522


def isolate_network() -> None:
    """Move this process into a new, empty network namespace, and a new IPC namespace:
    System V shared memory, semaphores and message queues of the host are reached by a
    key, not a path, and Landlock does not mediate them.

    Raises:
        OSLayerUnavailable: the kernel refused both ways of making one.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(ctypes.c_int(_CLONE_NEWNET | _CLONE_NEWIPC)) == 0:
        return  # privileged: the namespaces alone are enough
    first = ctypes.get_errno()
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(ctypes.c_int(_CLONE_NEWUSER | _CLONE_NEWNET | _CLONE_NEWIPC)) != 0:
        code = ctypes.get_errno()
        raise OSLayerUnavailable(
            "cannot make a network namespace for a sandbox without network rules: "
            f"{os.strerror(first)}; with a user namespace: {os.strerror(code)} "
            "(are unprivileged user namespaces disabled?)",
            provider="landlock",
        )
    try:
        _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
        _write("/proc/self/setgroups", "deny\n")  # required before an unprivileged gid map
        _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
    except OSError as exc:
        raise OSLayerUnavailable(
            f"cannot map the user into the sandbox's namespace: {exc.strerror}",
            provider="landlock",
        ) from exc
    _drop_capabilities(libc)


def isolate_ipc() -> bool:
    """Move this process into a new IPC namespace when it may without a user namespace
    (as root); ``False`` when it may not, and System V IPC stays the host's."""
    import ctypes

    return ctypes.CDLL(None, use_errno=True).unshare(ctypes.c_int(_CLONE_NEWIPC)) == 0


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _drop_capabilities(libc: ctypes.CDLL) -> None:
    """Clear the effective, permitted and inheritable sets the new namespace granted."""
    import ctypes

    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)  # version, pid 0: this thread
    data = (ctypes.c_uint32 * 6)()  # three sets of two 32-bit halves, all zero
    if libc.capset(ctypes.byref(header), ctypes.byref(data)) != 0:
        code = ctypes.get_errno()
        raise OSLayerUnavailable(
            f"cannot drop the capabilities of the sandbox's namespace: {os.strerror(code)}",
            provider="landlock",
        )


_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4


def drop_all_capabilities() -> None:
    """Give up every capability for good: ambient, bounding, then the three sets.

    Started as root, the sandbox would otherwise keep root's capabilities (renaming the
    host, setting the clock, loading BPF...), which Landlock does not mediate. With
    ``no_new_privs`` already set, nothing the sandbox executes can get them back.

    Raises:
        OSLayerUnavailable: the kernel refused to clear them.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # absent before 4.3
    for capability in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            code = ctypes.get_errno()
            if code in (errno.EINVAL, errno.EPERM):
                # Past the last capability this kernel knows, or no CAP_SETPCAP (bwrap
                # dropped it already): nothing can raise the sets back in either case.
                break
            raise OSLayerUnavailable(
                f"cannot drop capability {capability} from the bounding set: {os.strerror(code)}",
                provider="landlock",
            )
    _drop_capabilities(libc)
