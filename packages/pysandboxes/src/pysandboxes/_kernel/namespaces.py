"""New namespaces for this process, with or without root: the one ``unshare`` of the layer.

As root (or with the capability in the current user namespace) the namespaces are made
directly. Otherwise a user namespace is made with them, mapping the user and group to
themselves (the program sees the same ids), and its creator holds every capability over
it: enough to mount in the new mount namespace, nothing over the host. The caller drops
them (``drop_capabilities``) once its mounts are made, before any code of the program.

Call while single-threaded: the kernel refuses a user namespace to a threaded process,
and a process whose children go to a new pid namespace may start no thread.
"""

from __future__ import annotations

import os

from pysandboxes._kernel import libc

NEWNS = 0x00020000
NEWIPC = 0x08000000
NEWUSER = 0x10000000
NEWPID = 0x20000000
NEWNET = 0x40000000
_CAPABILITY_VERSION_3 = 0x20080522


def enter(flags: int) -> bool:
    """Move into new namespaces ``flags`` (``NEWPID | NEWNS``...).

    Returns whether a user namespace had to be made with them: the caller then holds
    capabilities over it, to drop.

    Raises:
        OSError: the kernel refused both ways; ``errno`` is the second refusal's, the
            message names both.
    """
    if libc.call("unshare", flags) == 0:
        return False
    first = libc.errno()
    uid, gid = os.getuid(), os.getgid()
    if libc.call("unshare", flags | NEWUSER) != 0:
        code = libc.errno()
        raise OSError(
            code,
            f"{os.strerror(first)}; with a user namespace: {os.strerror(code)} "
            "(are unprivileged user namespaces disabled?)",
        )
    _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
    _write("/proc/self/setgroups", "deny\n")  # required before an unprivileged gid map
    _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
    return True


def drop_capabilities() -> None:
    """Clear the effective, permitted and inheritable sets (those a new user namespace
    grants its creator).

    Raises:
        OSError: the kernel refused.
    """
    header = libc.uint32s(_CAPABILITY_VERSION_3, 0)  # version, pid 0: this thread
    data = libc.uint32s(0, 0, 0, 0, 0, 0)  # three sets of two 32-bit halves, all zero
    if libc.call("capset", header, data) != 0:
        code = libc.errno()
        raise OSError(code, f"cannot drop the namespace's capabilities: {os.strerror(code)}")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
