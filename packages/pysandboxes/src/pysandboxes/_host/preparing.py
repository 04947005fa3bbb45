"""What the trusted side prepares around a spawn, and cleans of itself.

Descriptors it inherited are kept from the sandbox, the sandbox gets a private temporary
directory and the few exposures it needs without a rule (devices, CA certificates), the
trusted side's own initial environment block is blanked once the child runs, the
interpreter options that would feed the next start-up are held back, and the waiter gets
its copy of the rule files in a sealed descriptor.
"""

from __future__ import annotations

import os

from pysandboxes._policy.model import ExposeRule, Origin

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


def keep_only_standard_streams(keep: set[int]) -> None:
    """Let no descriptor python-sb inherited pass into the sandbox but standard input,
    output and error (and ``keep``): one open on a file outside the rules would be a way
    to it that no rule judged, and the kernel layer does not check descriptors already
    open. They stay usable here; the child and the waiter do not get them."""
    try:
        found = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return  # no /proc: descriptors cannot be listed; nothing better to do here
    for fd in found:
        if fd > 2 and fd not in keep:
            try:
                os.set_inheritable(fd, False)
            except OSError:
                continue  # closed meanwhile (the listing's own descriptor)


def make_private_dir() -> str:
    """A new mode-0700 directory for the sandbox's temporary files (``tempfile`` is slow
    to import and would be needed for this alone)."""
    base = os.environ.get("TMPDIR") or "/tmp"
    for _ in range(100):
        path = os.path.join(base, f"pysandboxes-{os.urandom(6).hex()}")
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return os.path.realpath(path)
    raise FileExistsError(f"cannot create a private directory in {base}")


def blank_environment_block() -> None:
    """Overwrite this process's initial environment, what ``/proc/<pid>/environ`` shows.

    ``os.environ`` is a copy and stays usable; only the block the kernel exposes to other
    processes of the same user is erased.
    """
    try:
        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rpartition(b")")[2].split()
        # Fields after "(comm)" start at field 3; env_start and env_end are fields 50, 51.
        start, end = int(fields[47]), int(fields[48])
        if end > start:
            with open("/proc/self/mem", "r+b", buffering=0) as memory:
                memory.seek(start)
                memory.write(b"\0" * (end - start))
    except (OSError, IndexError, ValueError):
        pass  # not Linux, or /proc is unavailable: the kernel layer must cover it


def pycache_prefixes(flags: Sequence[str]) -> list[str]:
    """The values of ``-X pycache_prefix=`` among the interpreter options (the last wins)."""
    from itertools import pairwise

    pairs = pairwise(flags)
    return [v.partition("=")[2] for f, v in pairs if f == "-X" and _is_pycache_prefix(v)][-1:]


def _is_pycache_prefix(option: str) -> bool:
    return option.partition("=")[0] == "pycache_prefix"


def without_pycache_prefix(flags: Sequence[str]) -> list[str]:
    """The options without ``-X pycache_prefix=``: a bytecode cache the sandbox may write
    would feed the next start-up, before the walls; the child sets it once they are up."""
    kept: list[str] = []
    for flag in flags:
        if kept and kept[-1] == "-X" and _is_pycache_prefix(flag):
            kept.pop()
            continue
        kept.append(flag)
    return kept


_DEVICES = Origin("<devices>", 0, "the standard devices")
_CERTIFICATES = Origin("<ca-certificates>", 0, "the system's CA certificates")
_TEMP = Origin("<tempdir>", 0, "the sandbox's private temporary directory")
_READ_DEVICES = ("/dev/zero", "/dev/urandom", "/dev/random")
_WRITE_DEVICES = ("/dev/null", "/dev/full")
_CA_STORES = (
    "/etc/ssl/certs",
    "/etc/ssl/cert.pem",
    "/etc/pki/tls/certs",
    "/etc/pki/ca-trust/extracted",
    "/etc/ca-certificates",
    "/usr/share/ca-certificates",
)


def implicit_exposures(tempdir: str) -> tuple[ExposeRule, ...]:
    """What the sandbox may use without a rule: its private temporary directory, the
    standard devices, the system's CA certificates."""
    rules = [ExposeRule(tempdir, True, True, _TEMP)]
    rules += [ExposeRule(d, True, False, _DEVICES) for d in _WRITE_DEVICES if os.path.exists(d)]
    rules += [ExposeRule(d, False, False, _DEVICES) for d in _READ_DEVICES if os.path.exists(d)]
    for store in _CA_STORES:
        if os.path.exists(store):
            real = os.path.realpath(store)
            rules.append(ExposeRule(real, False, os.path.isdir(real), _CERTIFICATES))
    return tuple(rules)


def watch_descriptor(data: bytes) -> int | str:
    """An inheritable descriptor holding ``data`` for the waiter, sealed: no process
    that might reach it (through ``/proc/<pid>/fd``) can change it; ``-`` when empty."""
    if not data:
        return "-"
    import fcntl

    fd = os.memfd_create("pysandboxes-rules", os.MFD_ALLOW_SEALING)  # the waiter's, by exec
    os.write(fd, data)
    seals = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
