"""Native probes for the kernel-layer tests, and what they need.

Every probe goes around the Python layer on purpose: it calls libc through ctypes (the
rules grant ``python-api=ALLOW:native`` so that the Python layer lets it), and only the
kernel is left to refuse.
"""

from __future__ import annotations

import ctypes

import pytest

from listener import Listener as Listener  # re-exported: the kernel tests import it here

#: Code every probe starts with: libc, and ``outcome`` printing DONE or REFUSED <errno name>.
NATIVE = """
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def outcome(result):
    if result < 0:
        print("REFUSED", errno.errorcode[ctypes.get_errno()])
    else:
        print("DONE")
    sys.stdout.flush()
def sockaddr(port):
    addr = bytes([2, 0]) + port.to_bytes(2, "big") + bytes([127, 0, 0, 1]) + bytes(8)
    return ctypes.create_string_buffer(addr, 16)
"""

#: Rules that let the probes call C: the Python layer steps aside, the kernel does not.
NATIVE_RULES = "expose-ro=.\npython-api=ALLOW:native\npython-import=*\n"


def landlock_abi() -> int:
    """The Landlock ABI of this kernel, 0 without Landlock."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(version), 0)


def need_abi(version: int, feature: str) -> None:
    """Skip, naming the feature, when the kernel's Landlock is older than ``version``."""
    abi = landlock_abi()
    if abi < version:
        pytest.skip(f"kernel without Landlock ABI >= {version} (has {abi}): no {feature}")


#: Connect to ``port`` over MPTCP, which speaks plain TCP to a server without MPTCP:
#: Landlock's TCP port rules apply to TCP sockets only.
CONNECT_MPTCP = """
fd = libc.socket(2, 1, 262)  # IPPROTO_MPTCP
if fd < 0:
    outcome(fd)
else:
    outcome(libc.connect(fd, sockaddr({port}), 16))
"""


def mptcp_enabled() -> bool:
    """Whether this host makes MPTCP sockets at all (the probe's positive control)."""
    try:
        with open("/proc/sys/net/mptcp/enabled") as handle:
            return handle.read().strip() == "1"
    except OSError:
        return False


#: Send to ``port`` with TCP Fast Open: ``sendto(MSG_FASTOPEN)`` connects the socket
#: without the connect hook Landlock's port rules rely on.
SEND_FASTOPEN = """
fd = libc.socket(2, 1, 0)
outcome(libc.sendto(fd, b"fastopen", 8, 0x20000000, sockaddr({port}), 16))
"""
