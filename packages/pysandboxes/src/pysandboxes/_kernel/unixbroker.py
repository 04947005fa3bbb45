"""The sandbox's half of the socket broker: where the kernel cannot judge an address.

Landlock judges the TCP ports a socket binds and connects to, and paths; it does not
judge the socket file an AF_UNIX socket connects or sends to: native code under Landlock
alone could reach any socket of the host (an ssh agent, a tmux server, the D-Bus bus),
each a way to run commands outside. When the rules may need AF_UNIX sockets, this
filter hands every ``connect``, every ``sendto`` naming an address and every
``sendmsg``/``sendmmsg`` to the trusted side (``SECCOMP_RET_USER_NOTIF``), which judges
the address against the rules and makes the call itself on the sandbox's socket, with
the address it read (``_host.unixbroker``): nothing the sandbox changes afterwards, in
its memory or its descriptor table, reaches the call. The trusted side never lets a
call go on as the sandbox asked (``SECCOMP_USER_NOTIF_FLAG_CONTINUE``), which would read
the address again.

The filter's listener is handed over once, right after it is made, while the sandbox is
still single-threaded: this process writes the listener's number to the broker's
channel, the trusted side takes a copy of it (``pidfd_getfd``) and answers, and this
process closes its own, which it must not keep (whoever holds it answers the calls).
The filter also refuses any new listener (``SECCOMP_FILTER_FLAG_NEW_LISTENER``): a
filter of the sandbox's own, answered by the sandbox with ``CONTINUE``, would take the
calls before this one; the kernel refuses a second listener only while the broker's is
open, and the sandbox can make it close (ending the broker).
"""

from __future__ import annotations

import os
import struct

from pysandboxes._kernel.seccomp import assemble
from pysandboxes.errors import OSLayerUnavailable

_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
_RET_ALLOW = 0x7FFF0000
_RET_USER_NOTIF = 0x7FC00000
_RET_EPERM = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
#: Offsets in ``struct seccomp_data``: nr, arch, args[1] (seccomp's flags), args[4] (the
#: address of ``sendto``).
_NR, _ARCH, _ARG1_LOW, _ARG4_LOW, _ARG4_HIGH = 0, 4, 24, 48, 52


class Calls:
    """The numbers of the brokered calls, and those the broker needs, on one ABI."""

    def __init__(self, arch: int, numbers: tuple[int, ...]) -> None:
        self.arch = arch
        (
            self.connect,
            self.sendto,
            self.sendmsg,
            self.sendmmsg,
            self.seccomp,
            self.pidfd_open,
            self.pidfd_getfd,
        ) = numbers


CALLS = {
    "x86_64": Calls(0xC000003E, (42, 44, 46, 307, 317, 434, 438)),
    "aarch64": Calls(0xC00000B7, (203, 206, 211, 269, 277, 434, 438)),
}


def program(machine: str) -> bytes:
    """The filter for ``machine``: the brokered calls to the listener, the rest allowed
    (the sandbox's main filter, ``_kernel.seccomp``, refuses another ABI's calls)."""
    calls = CALLS[machine]
    notify, allow, refuse = "notify", "allow", "refuse"
    address, filters = "address", "filters"
    steps: list[tuple[object, ...]] = [
        ("load", _ARCH),
        ("unless", calls.arch, allow),
        ("load", _NR),
        ("equal", calls.connect, notify),
        ("equal", calls.sendmsg, notify),
        ("equal", calls.sendmmsg, notify),
        ("equal", calls.sendto, address),
        ("equal", calls.seccomp, filters),
        ("return", _RET_ALLOW),
        (filters,),  # no listener of the sandbox's own (see the module)
        ("load", _ARG1_LOW),
        ("any bit", _SECCOMP_FILTER_FLAG_NEW_LISTENER, refuse),
        ("return", _RET_ALLOW),
        (address,),  # sendto without an address (send) goes to the connected peer
        ("load", _ARG4_LOW),
        ("unless", 0, notify),
        ("load", _ARG4_HIGH),
        ("unless", 0, notify),
        ("return", _RET_ALLOW),
        (notify,),
        ("return", _RET_USER_NOTIF),
        (allow,),
        ("return", _RET_ALLOW),
        (refuse,),
        ("return", _RET_EPERM),
    ]
    return assemble(steps)


def unavailable_reason() -> str | None:
    """Why no broker can run here, or ``None``."""
    if os.uname().sysname != "Linux":
        return "seccomp is a Linux feature"
    if os.uname().machine not in CALLS:
        return f"no system call table for {os.uname().machine} in this release"
    return None


def hand_over(channel: int) -> None:
    """Install the filter on this process and its future children, and hand its listener
    to the trusted side over ``channel`` (see the module). Call it while single-threaded,
    after the sandbox's main filter (no new privileges is set already).

    Raises:
        OSLayerUnavailable: the kernel refused the filter, or the trusted side did not
            take the listener: the sandbox does not start without its broker.
    """
    import ctypes

    machine = os.uname().machine
    code = program(machine)
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = struct.pack("=HxxxxxxQ", len(code) // 8, ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    listener = libc.syscall(
        ctypes.c_long(CALLS[machine].seccomp),
        ctypes.c_long(_SECCOMP_SET_MODE_FILTER),
        ctypes.c_long(_SECCOMP_FILTER_FLAG_NEW_LISTENER),
        ctypes.c_char_p(fprog),
    )
    if listener < 0:
        number = ctypes.get_errno()
        raise OSLayerUnavailable(
            f"the kernel refused the socket broker's filter: {os.strerror(number)}",
            provider="landlock",
        )
    try:
        os.write(channel, b"%d\n" % listener)
        answer = _answer(channel)
    finally:
        os.close(listener)
        os.close(channel)
    if answer != b"k":
        raise OSLayerUnavailable(
            "the trusted side did not take the socket broker's listener", provider="landlock"
        )


def _answer(channel: int) -> bytes:
    import select

    ready, _, _ = select.select([channel], [], [], 30.0)
    return os.read(channel, 1) if ready else b""
