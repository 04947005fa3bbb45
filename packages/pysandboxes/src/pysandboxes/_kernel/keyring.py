"""The kernel's keyrings: the sandbox leaves the session keyring it inherited.

A process inherits its parent's session keyring, and Landlock and the namespaces do not
mediate ``keyctl``: a sandboxed program could read every key of the session that started
``python-sb`` (Kerberos tickets, passwords cached by ``systemd-ask-password``, tokens a
tool stored with ``keyctl padd``), and add or change keys that processes outside then use.
So the sandboxed interpreter joins a new, empty, anonymous session keyring before any
code of the program runs; the processes it starts inherit that one.
"""

from __future__ import annotations

import errno
import os

from pysandboxes.errors import OSLayerUnavailable

#: ``keyctl`` system call number by machine (``os.uname().machine``).
_SYS_KEYCTL = {
    "x86_64": 250,
    "aarch64": 219,
    "riscv64": 219,
    "loongarch64": 219,
    "ppc64le": 355,
    "ppc64": 355,
    "s390x": 280,
    "i686": 288,
    "i386": 288,
    "armv7l": 311,
}
_KEYCTL_JOIN_SESSION_KEYRING = 1


def leave_session_keyring(provider: str) -> bool:
    """Join a new anonymous session keyring; ``False`` when the kernel has no keyrings or
    this machine's system call number is unknown.

    Raises:
        OSLayerUnavailable: the kernel refused.
    """
    number = _SYS_KEYCTL.get(os.uname().machine)
    if number is None:
        return False
    from pysandboxes._kernel import libc

    result = libc.call("syscall", number, _KEYCTL_JOIN_SESSION_KEYRING, None)
    if result >= 0:
        return True
    code = libc.errno()
    if code == errno.ENOSYS:
        return False  # built without keyrings: nothing to inherit
    raise OSLayerUnavailable(
        f"cannot leave the inherited session keyring: {os.strerror(code)}", provider=provider
    )
