"""A seccomp filter for what neither Landlock nor the namespaces mediate.

Landlock judges paths, ports and scopes; a few system calls reach the host by other
means, and Python programs have no use for them:

- ``ioctl(TIOCSTI)`` and ``ioctl(TIOCLINUX)`` type into the terminal the sandbox
  inherited, and the user's shell runs what they type. Landlock's device-ioctl right is
  checked when a device is opened; standard input was opened before the walls.
- ``add_key``, ``keyctl``, ``request_key``: the kernel keyrings are reached by user id,
  not by path, and may hold the user's credentials.
- System V IPC (``shmat``, ``msgsnd``, ``semop``...): the host's shared memory segments,
  message queues and semaphores are reached by number, not by path.
- ``socket()`` of any family but IPv4, IPv6 and (when the rules may need them) AF_UNIX:
  netlink lists the host's connections and routes, vsock reaches a virtual machine's
  host, and no ``net=`` rule can speak of either. The C library falls back when its
  netlink query fails.
- ``io_uring_*``, ``bpf``, ``perf_event_open``, ``userfaultfd``: large kernel interfaces,
  the usual first step of a kernel exploit, unused by Python programs.
- TCP past Landlock's port rules: MPTCP, SCTP and SMC sockets (Landlock's rules hold for
  TCP sockets only; an MPTCP or SMC socket speaks plain TCP to any server), and ``MSG_FASTOPEN``,
  which connects a TCP socket from ``sendto``/``sendmsg`` without the hook the port rules
  rely on.
- Set-user-ID and set-group-ID modes (``chmod``, ``open``, ``mknod`` and their kin): Landlock does
  not mediate ``chmod``, and as root any system program made set-user-ID is a root shell
  for every user. ``openat2``, whose mode the filter cannot read, fails with ``ENOSYS``
  (callers fall back to ``openat``).
- New namespaces (``unshare``, ``clone`` with a ``CLONE_NEW*`` flag): inside a user
  namespace of its own a process holds every capability over it, which opens much of the
  kernel to it. ``clone3`` passes its flags in memory, out of a filter's sight: it fails
  with ``ENOSYS``, and the C library falls back to ``clone``.

Each is refused with ``EPERM``. So is every system call of another ABI than the
interpreter's (32-bit ``int 0x80``, x32), which the numbers below would not describe.
The filter is applied after Landlock and stays for every process the sandbox starts.
"""

from __future__ import annotations

import errno
import os
import struct

from pysandboxes._policy.plan import (
    KERNEL_INTERFACES,
    TERMINAL_INPUT,
    UNIX_SOCKETS,
    AppliedLayer,
    ConfinementPlan,
)
from pysandboxes.errors import OSLayerUnavailable

#: Offsets in ``struct seccomp_data``: nr, arch, instruction pointer, args[6].
_NR, _ARCH, _ARG0_LOW, _ARG1_LOW, _ARG2_LOW = 0, 4, 16, 24, 32
_AF_UNIX, _AF_INET, _AF_INET6 = 1, 2, 10
_SOCK_DGRAM, _SOCK_RAW, _SOCK_SEQPACKET = 2, 3, 5  # SEQPACKET over IPv4 or IPv6: SCTP
_IPPROTO_SCTP, _IPPROTO_SMC, _IPPROTO_MPTCP = 132, 256, 262
_SET_ID_BITS = 0o6000  # S_ISUID | S_ISGID
_MSG_FASTOPEN = 0x20000000
_OPENAT2 = 437  # the same on both ABIs; its mode is in a struct the filter cannot read

# Classic BPF opcodes (linux/filter.h).
_LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JUMP_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JUMP_AT_LEAST = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JUMP_ANY_BIT = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_AND = 0x54  # BPF_ALU | BPF_AND | BPF_K
_RETURN = 0x06  # BPF_RET | BPF_K

_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_REFUSE = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO
_ABSENT = 0x00050000 | errno.ENOSYS
#: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET.
_NEW_NAMESPACES = 0x7E020000
_X32_BIT = 0x40000000
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2

#: ioctl requests refused on any descriptor (the same numbers on both ABIs below).
TERMINAL_INPUT_IOCTLS = (0x5412, 0x541C)  # TIOCSTI, TIOCLINUX
#: USERFAULTFD_IOC_NEW on /dev/userfaultfd: the userfaultfd the system call refused above.
_USERFAULTFD_IOC_NEW = 0xAA00


class _Abi:
    """The audit architecture and the numbers of the refused calls on one ABI."""

    def __init__(
        self,
        arch: int,
        calls: tuple[int, ...],
        socketpair: int,
        refused: dict[str, int],
        flagged: tuple[tuple[int, int, int], ...],
        x32: bool,
    ) -> None:
        self.arch = arch
        self.ioctl, self.socket, self.listen, self.clone, self.clone3 = calls
        self.socketpair = socketpair
        self.refused = refused
        self.flagged = flagged  # (call, argument, bits): refused when any bit is set
        self.x32 = x32


_ABIS = {
    "x86_64": _Abi(
        0xC000003E,
        (16, 41, 50, 56, 435),  # ioctl, socket, listen, clone, clone3
        53,  # socketpair
        {
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "perf_event_open": 298,
            "bpf": 321,
            "userfaultfd": 323,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "unshare": 272,
            "shmget": 29,
            "shmat": 30,
            "shmctl": 31,
            "semget": 64,
            "semop": 65,
            "semctl": 66,
            "shmdt": 67,
            "msgget": 68,
            "msgsnd": 69,
            "msgrcv": 70,
            "msgctl": 71,
            "semtimedop": 220,
        },
        # openat (first: the commonest), open, creat, chmod, fchmod, fchmodat, fchmodat2,
        # mknod, mknodat: a set-ID mode; sendto, sendmsg, sendmmsg: MSG_FASTOPEN.
        tuple((n, a, _SET_ID_BITS) for n, a in ((257, 3), (2, 2), (85, 1), (90, 1), (91, 1)))
        + ((268, 2, _SET_ID_BITS), (452, 2, _SET_ID_BITS))
        + ((133, 1, _SET_ID_BITS), (259, 2, _SET_ID_BITS))
        + ((44, 3, _MSG_FASTOPEN), (46, 2, _MSG_FASTOPEN), (307, 3, _MSG_FASTOPEN)),
        x32=True,
    ),
    "aarch64": _Abi(
        0xC00000B7,
        (29, 198, 201, 220, 435),
        199,
        {
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "perf_event_open": 241,
            "bpf": 280,
            "userfaultfd": 282,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "unshare": 97,
            "msgget": 186,
            "msgctl": 187,
            "msgrcv": 188,
            "msgsnd": 189,
            "semget": 190,
            "semctl": 191,
            "semtimedop": 192,
            "semop": 193,
            "shmget": 194,
            "shmctl": 195,
            "shmat": 196,
            "shmdt": 197,
        },
        # openat, fchmod, fchmodat, fchmodat2, mknodat; sendto, sendmsg, sendmmsg.
        tuple((n, a, _SET_ID_BITS) for n, a in ((56, 3), (52, 1), (53, 2), (452, 2), (33, 2)))
        + ((206, 3, _MSG_FASTOPEN), (211, 2, _MSG_FASTOPEN), (269, 3, _MSG_FASTOPEN)),
        x32=False,
    ),
}


def unavailable_reason() -> str | None:
    """Why no filter can be applied on this machine, or ``None`` when one can."""
    if os.uname().sysname != "Linux":  # os.uname: the platform module imports re (ms)
        return "seccomp is a Linux feature"
    machine = os.uname().machine
    if machine not in _ABIS:
        return f"no system call table for {machine} in this release"
    return None


def program(machine: str, *, unix_sockets: bool = True, listen: bool = True) -> bytes:
    """The filter for ``machine`` as the kernel reads it: ``struct sock_filter[]``.

    ``unix_sockets``: whether ``socket(AF_UNIX, ...)`` may be called (an AF_UNIX
    ``socketpair`` of stream or sequenced-packet sockets always may: they stay connected
    to each other only; a datagram pair's sockets may ``connect`` or ``sendto`` any socket
    file, so they follow ``socket``; IPv4 and IPv6 sockets always may be made).
    ``listen``: whether ``listen`` may be called at all.
    """
    abi = _ABIS[machine]
    refuse, allow, absent = "refuse", "allow", "absent"
    terminal, socket, inet, clone = "terminal", "socket", "inet", "clone"
    pair = "pair"
    steps: list[tuple[object, ...]] = [
        ("load", _ARCH),
        ("unless", abi.arch, refuse),  # another ABI's numbers mean other calls
        ("load", _NR),
    ]
    if abi.x32:
        steps.append(("at least", _X32_BIT, refuse))
    # The calls judged by their arguments come first: the kernel runs the filter for them
    # each time (openat, ioctl), while a call whose answer never depends on them is
    # decided once and cached.
    steps += [("equal", call, ("flagged", index)) for index, (call, _, _) in enumerate(abi.flagged)]
    steps += [("equal", abi.ioctl, terminal), ("equal", abi.socket, socket)]
    steps.append(("equal", abi.socketpair, pair))
    steps += [("equal", abi.clone, clone), ("equal", abi.clone3, absent)]
    steps.append(("equal", _OPENAT2, absent))  # callers fall back to openat
    steps += [("equal", number, refuse) for number in sorted(abi.refused.values())]
    if not listen:
        steps.append(("equal", abi.listen, refuse))
    steps.append(("return", _ALLOW))
    for index, (_, argument, bits) in enumerate(abi.flagged):
        steps += [(("flagged", index),), ("load", _ARG0_LOW + 8 * argument)]
        steps += [("any bit", bits, refuse), ("return", _ALLOW)]
    steps += [(clone,), ("load", _ARG0_LOW), ("any bit", _NEW_NAMESPACES, refuse)]
    steps.append(("return", _ALLOW))
    steps += [(terminal,), ("load", _ARG1_LOW)]  # the request: an int, its low word
    refused_requests = (*TERMINAL_INPUT_IOCTLS, _USERFAULTFD_IOC_NEW)
    steps += [("equal", request, refuse) for request in refused_requests]
    steps.append(("return", _ALLOW))
    steps += [(socket,), ("load", _ARG0_LOW)]  # the family
    steps += [("equal", _AF_INET, inet), ("equal", _AF_INET6, inet)]
    if unix_sockets:
        steps.append(("equal", _AF_UNIX, allow))
    steps.append(("return", _REFUSE))
    # Landlock's port rules hold for TCP sockets only: SCTP and MPTCP reach any port.
    steps += [(inet,), ("load", _ARG1_LOW), ("and", 0xF), ("equal", _SOCK_SEQPACKET, refuse)]
    steps += [("load", _ARG2_LOW), ("equal", _IPPROTO_MPTCP, refuse)]
    steps += [("equal", _IPPROTO_SCTP, refuse), ("equal", _IPPROTO_SMC, refuse)]
    steps.append(("return", _ALLOW))
    # socketpair: AF_UNIX only; without AF_UNIX sockets, no datagram pair (SOCK_RAW is
    # one too), whose sockets reach any socket file by connect or sendto.
    steps += [(pair,), ("load", _ARG0_LOW), ("unless", _AF_UNIX, refuse)]
    if not unix_sockets:
        steps += [("load", _ARG1_LOW), ("and", 0xF)]
        steps += [("equal", _SOCK_DGRAM, refuse), ("equal", _SOCK_RAW, refuse)]
    steps.append(("return", _ALLOW))
    steps += [(allow,), ("return", _ALLOW), (refuse,), ("return", _REFUSE)]
    steps += [(absent,), ("return", _ABSENT)]
    return assemble(steps)


def assemble(steps: list[tuple[object, ...]]) -> bytes:
    """Classic BPF from named steps; a one-element step is a label for the next one."""
    labels: dict[object, int] = {}
    instructions: list[tuple[object, ...]] = []
    for step in steps:
        if len(step) == 1:
            labels[step[0]] = len(instructions)
        else:
            instructions.append(step)
    encoded: list[bytes] = []
    for index, (kind, value, *target) in enumerate(instructions):
        skip = labels[target[0]] - index - 1 if target else 0
        code, true, false = {
            "load": (_LOAD_WORD, 0, 0),
            "and": (_AND, 0, 0),
            "return": (_RETURN, 0, 0),
            "equal": (_JUMP_EQUAL, skip, 0),
            "unless": (_JUMP_EQUAL, 0, skip),
            "at least": (_JUMP_AT_LEAST, skip, 0),
            "any bit": (_JUMP_ANY_BIT, skip, 0),
        }[str(kind)]
        encoded.append(struct.pack("=HBBI", code, true, false, value))
    return b"".join(encoded)


def apply(*, unix_sockets: bool = True, listen: bool = True) -> None:
    """Install the filter on this process and its future children.

    Raises:
        OSError: the kernel refused the filter.
    """
    from pysandboxes._kernel import libc

    machine = os.uname().machine
    code = program(machine, unix_sockets=unix_sockets, listen=listen)
    _kept, address = libc.pinned(code)  # the program must stay where fprog points
    fprog = struct.pack("=HxxxxxxQ", len(code) // 8, address)  # struct sock_fprog
    for what, option, value, pointer in (
        ("prctl(PR_SET_NO_NEW_PRIVS)", _PR_SET_NO_NEW_PRIVS, 1, 0),
        ("prctl(PR_SET_SECCOMP)", _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, fprog),
    ):
        if libc.call("prctl", option, value, pointer, 0, 0):
            number = libc.errno()
            raise OSError(number, f"{what} failed: {os.strerror(number)}")


def add_to(layer: AppliedLayer, plan: ConfinementPlan) -> AppliedLayer:
    """Apply the filter under ``layer``; the layer, saying what the filter enforces.

    Raises:
        OSLayerUnavailable: the kernel refused the filter (on a machine whose system
            calls the filter knows: elsewhere the layer lists its concerns as missing, and
            ``--show-layers`` says so before any run).
    """
    reason = unavailable_reason()
    if reason is None:
        try:
            apply(unix_sockets=plan.unix_sockets, listen=may_listen(plan))
        except OSError as exc:
            raise OSLayerUnavailable(
                f"the kernel refused the seccomp filter: {exc.strerror or exc}",
                provider=layer.provider,
            ) from exc
    concerns = (TERMINAL_INPUT, KERNEL_INTERFACES)
    enforced, missing = layer.enforced, layer.missing
    if reason is not None:
        missing += tuple((concern, reason) for concern in (*concerns, UNIX_SOCKETS))
    elif plan.unix_sockets:
        enforced += concerns
        missing += ((UNIX_SOCKETS, UNJUDGED_UNIX_SOCKETS),)
    else:
        enforced += (*concerns, UNIX_SOCKETS)
    return AppliedLayer(layer.provider, layer.abi, enforced, missing, layer.skipped)


def may_listen(plan: ConfinementPlan) -> bool:
    """Whether ``listen`` may be called: a socket listening without ``bind`` gets a port
    of the system's choosing on every address, which no Landlock bind rule sees. Without
    a TCP port to bind and without AF_UNIX sockets, nothing may listen at all."""
    return plan.unix_sockets or plan.tcp_bind != ()


#: Why AF_UNIX sockets are not the kernel's when the rules may need them.
UNJUDGED_UNIX_SOCKETS = (
    "Landlock does not judge where an AF_UNIX socket connects: native code may reach any "
    "socket file of the host (os-sandbox=bwrap shows only the exposed ones)"
)
