"""A small seccomp filter for what neither Landlock nor the namespaces mediate.

- **TCP by other protocols.** Landlock's TCP port rules apply to TCP sockets only: an
  MPTCP socket (``IPPROTO_MPTCP``), which speaks plain TCP to a server without MPTCP, an
  SCTP one and an ``AF_SMC`` one (which falls back to TCP) connect to any port. The filter
  refuses creating them, and every family but UNIX, IPv4, IPv6 and netlink (which the C
  library's resolver uses): ``AF_VSOCK`` reaches the hypervisor's host past any network
  namespace, and no rule speaks of the others.
- **TCP Fast Open.** ``sendto`` or ``sendmsg`` with ``MSG_FASTOPEN`` on a TCP socket
  connects it without the ``connect`` hook Landlock's port rules rely on: the flag is
  refused.
- **io_uring**, whose ``IORING_OP_SOCKET`` makes sockets without the ``socket`` system
  call, out of the filter's sight: ``io_uring_setup`` is refused.
- **Kernel keyrings** (``keyctl``, ``add_key``, ``request_key``): the user's own keyring
  is reachable from any process of the user without a user namespace of its own.
- **Set-user-ID and set-group-ID bits.** Landlock (up to ABI 7) does not mediate
  ``chmod``: a sandbox run as root could make any root-owned program set-user-ID (a root
  shell for every user of the host), and create one where it may write. A mode with
  ``S_ISUID`` or ``S_ISGID`` is refused to ``chmod``, ``open`` and their kin;
  ``openat2``, whose mode the filter cannot read, answers ``ENOSYS`` (callers fall back to
  ``openat``).
- **System calls of another ABI** (``int 0x80`` with i386 numbers, x32) are refused: the
  numbers above would not apply to them.

A refused call fails with ``EACCES`` (``ENOSYS`` for another ABI). The filter needs
``no_new_privs`` (set before Landlock) and binds the calling thread and every process it
starts; it cannot be removed.
"""

from __future__ import annotations

import os

from pysandboxes.errors import OSLayerUnavailable

_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_EACCES = 13
_ENOSYS = 38

# BPF opcodes (linux/filter.h): ld word abs, jeq/jge/jset k, ret k, alu and k.
_LD_ABS = 0x20
_JEQ = 0x15
_JGE = 0x35
_RET = 0x06
_AND = 0x54

_AF_UNIX, _AF_INET, _AF_INET6, _AF_NETLINK = 1, 2, 10, 16
_SOCK_SEQPACKET = 5  # an inet SEQPACKET socket is SCTP
_IPPROTO_SCTP, _IPPROTO_MPTCP = 132, 262

_JSET = 0x45
_SET_ID_BITS = 0o6000  # S_ISUID | S_ISGID
_MSG_FASTOPEN = 0x20000000
_OPENAT2 = 437  # its mode is in a struct the filter cannot read

#: Per machine: the audit architecture, socket, io_uring_setup, the keyring calls, and the
#: calls refused when an argument (by index) has one of some bits.
_ABI: dict[str, tuple[int, int, int, tuple[int, ...], tuple[tuple[int, int, int], ...]]] = {
    "x86_64": (
        0xC000003E,
        41,
        425,
        (248, 249, 250),
        # open, creat, openat, chmod, fchmod, fchmodat, fchmodat2: a set-ID mode;
        # sendto, sendmsg, sendmmsg: MSG_FASTOPEN
        tuple((n, a, _SET_ID_BITS) for n, a in ((2, 2), (85, 1), (257, 3), (90, 1), (91, 1)))
        + ((268, 2, _SET_ID_BITS), (452, 2, _SET_ID_BITS))
        + ((44, 3, _MSG_FASTOPEN), (46, 2, _MSG_FASTOPEN), (307, 3, _MSG_FASTOPEN)),
    ),
    "aarch64": (
        0xC00000B7,
        198,
        425,
        (217, 218, 219),
        # openat, fchmod, fchmodat, fchmodat2; sendto, sendmsg, sendmmsg
        tuple((n, a, _SET_ID_BITS) for n, a in ((56, 3), (52, 1), (53, 2), (452, 2)))
        + ((206, 3, _MSG_FASTOPEN), (211, 2, _MSG_FASTOPEN), (269, 3, _MSG_FASTOPEN)),
    ),
}


def _program(
    arch: int,
    socket: int,
    io_uring: int,
    keyrings: tuple[int, ...],
    flagged: tuple[tuple[int, int, int], ...],
) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions; jumps are relative."""
    deny = (_RET, 0, 0, _RET_ERRNO | _EACCES)
    allow = (_RET, 0, 0, _RET_ALLOW)
    checks: list[tuple[int, int, int, int]] = [
        (_LD_ABS, 0, 0, 4),  # arch
        (_JEQ, 1, 0, arch),
        (_RET, 0, 0, _RET_ERRNO | _ENOSYS),
        (_LD_ABS, 0, 0, 0),  # nr
        (_JGE, 0, 1, 0x40000000),  # x32
        (_RET, 0, 0, _RET_ERRNO | _ENOSYS),
    ]
    for number in (io_uring, *keyrings):
        checks += [(_JEQ, 0, 1, number), deny]
    checks += [(_JEQ, 0, 1, _OPENAT2), (_RET, 0, 0, _RET_ERRNO | _ENOSYS)]  # callers fall back
    for number, argument, bits in flagged:
        checks += [
            (_JEQ, 0, 4, number),
            (_LD_ABS, 0, 0, 16 + 8 * argument),
            (_JSET, 0, 1, bits),
            deny,
            allow,
        ]
    checks += [
        (_JEQ, 1, 0, socket),
        (_RET, 0, 0, _RET_ALLOW),
        (_LD_ABS, 0, 0, 16),  # args[0]: the family
        (_JEQ, 5, 0, _AF_INET),
        (_JEQ, 4, 0, _AF_INET6),
        (_JEQ, 2, 0, _AF_UNIX),
        (_JEQ, 1, 0, _AF_NETLINK),
        deny,  # vsock, SMC, TIPC...: families no rule speaks of, some outside the netns
        (_RET, 0, 0, _RET_ALLOW),
        (_LD_ABS, 0, 0, 24),  # args[1]: the type, flags masked off
        (_AND, 0, 0, 0xF),
        (_JEQ, 0, 1, _SOCK_SEQPACKET),
        deny,
        (_LD_ABS, 0, 0, 32),  # args[2]: the protocol
        (_JEQ, 0, 1, _IPPROTO_MPTCP),
        deny,
        (_JEQ, 0, 1, _IPPROTO_SCTP),
        deny,
        (_RET, 0, 0, _RET_ALLOW),
    ]
    return checks


def supported() -> bool:
    """Whether this machine's system call numbers are known to the filter."""
    return os.uname().machine in _ABI


def apply(provider: str) -> None:
    """Install the filter on this thread and everything it starts; never undone.

    Raises:
        OSLayerUnavailable: the machine is unknown, or the kernel refused the filter.
    """
    abi = _ABI.get(os.uname().machine)
    if abi is None:
        raise OSLayerUnavailable(f"no seccomp filter for {os.uname().machine}", provider=provider)
    import ctypes

    class Instruction(ctypes.Structure):
        _fields_ = [
            ("code", ctypes.c_uint16),
            ("jt", ctypes.c_uint8),
            ("jf", ctypes.c_uint8),
            ("k", ctypes.c_uint32),
        ]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Instruction))]

    code = _program(*abi)
    instructions = (Instruction * len(code))(*(Instruction(*i) for i in code))
    program = Program(len(code), instructions)
    libc = ctypes.CDLL(None, use_errno=True)
    zero = ctypes.c_ulong(0)
    mode = ctypes.c_ulong(_SECCOMP_MODE_FILTER)
    if libc.prctl(_PR_SET_SECCOMP, mode, ctypes.byref(program), zero, zero) != 0:
        code_ = ctypes.get_errno()
        raise OSLayerUnavailable(
            f"the kernel refused the seccomp filter: {os.strerror(code_)}", provider=provider
        )
