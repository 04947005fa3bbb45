"""unshare: namespaces around the sandbox, made by util-linux ``unshare``; Landlock inside.

``unshare`` puts the sandboxed interpreter in new user, mount, pid, ipc and uts
namespaces, and a network namespace when the plan allows no network. The pid namespace
comes with a fresh ``/proc`` (``--mount-proc``): it lists the sandbox's processes only,
and no process outside can be signalled or read. The mount namespace is private, but its
view is the host's: **files are confined by Landlock inside it**, applied by the
sandboxed interpreter on itself, not hidden by the mounts. Building a root of its own
would be bwrap's job; choose ``bwrap`` for a view where unexposed paths do not exist.

The user is mapped to itself (``--map-current-user``), root included; the capabilities
the new user namespace grants are dropped by the sandboxed interpreter before anything
of the program runs (``drop_capabilities``), bounding set included, so none comes back
through a program it starts.

The sandboxed interpreter starts as pid 1 of its namespace, and pid 1 ignores every
signal it has no handler for, ``SIGTERM`` included. So it forks at once
(``lifetime.own_process_tree``): the parent stays pid 1, relays the signals the trusted
side forwards and ends as the program ends, taking every process of the namespace with it;
the program runs as pid 2 with ordinary signal semantics.
"""

from __future__ import annotations

import errno
import os
import shutil

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._policy.plan import ConfinementPlan

_PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAPABILITY_VERSION_3 = 0x20080522


def unavailable_reason() -> str | None:
    """Why unshare cannot run here, or ``None``."""
    if shutil.which("unshare") is None:
        return "the unshare program is not installed"
    return None


def command(plan: ConfinementPlan, argv: list[str]) -> tuple[str, list[str]]:
    """The executable and argv that run ``argv`` in new namespaces for this plan."""
    executable = shutil.which("unshare") or "unshare"
    args = [executable, "--user", "--map-current-user", "--mount", "--propagation", "private"]
    args += ["--pid", "--fork", "--kill-child", "--mount-proc", "--ipc", "--uts"]
    if not plan.network:
        args.append("--net")  # only loopback, and down: every connect fails at once
    return executable, [*args, "--", *argv]


def drop_capabilities() -> None:
    """Drop every capability this process holds, and the bounding set, for good.

    Raises:
        OSError: the kernel refused.
    """
    from pysandboxes._kernel import libc

    # No exec may gain a capability back (set-user-ID or file capabilities) either.
    if libc.call("prctl", _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _error(libc.errno(), "set no_new_privs")
    for number in range(_last_capability() + 1):  # needs CAP_SETPCAP: before the sets
        if libc.call("prctl", _PR_CAPBSET_DROP, number, 0, 0, 0) != 0:
            code = libc.errno()
            if code in (errno.EPERM, errno.EINVAL):
                break  # not held (an unprivileged user's exec cleared the sets), or the end
            raise _error(code, "drop the bounding set")
    libc.call("prctl", _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # none on old kernels
    header = libc.uint32s(_CAPABILITY_VERSION_3, 0)
    data = libc.uint32s(0, 0, 0, 0, 0, 0)  # effective, permitted, inheritable: all zero
    if libc.call("capset", header, data) != 0:
        raise _error(libc.errno(), "clear the capability sets")


def _last_capability() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return 63  # PR_CAPBSET_DROP of an unknown capability fails with EINVAL: the end


def _error(code: int, what: str) -> OSError:
    return OSError(code, f"cannot {what}: {os.strerror(code)}")
