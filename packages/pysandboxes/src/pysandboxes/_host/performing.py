"""What the trusted side performs for the sandbox once a prompt allowed it.

The broker (``_host.prompts``) has judged the request and someone allowed it; this module
does it, outside the sandbox, and returns the descriptor to hand over (``SCM_RIGHTS``):

- a file is opened by its exact path, following no symbolic link on the way (each
  directory opened ``O_PATH | O_NOFOLLOW`` from the last), only a regular file, never
  under ``/proc``, ``/sys`` or ``/dev``, never a rule file for writing, and only with
  open flags that match the operation asked about (``unopenable`` says why not);
- a TCP connection is made here, and the connected socket handed over.

Nothing here reads what the sandbox wrote but the decoded request.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._wire.asks import Ask

#: How long the trusted side tries to connect for the sandbox.
CONNECT_TIMEOUT = 10.0
_OPEN_FLAGS = os.O_ACCMODE | os.O_CREAT | os.O_EXCL | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC
_NOT_OPENED_HERE = ("/proc", "/sys", "/dev")


def unopenable(ask: Ask, protected: tuple[str, ...]) -> str:
    """Why the file of ``ask`` is never opened for the sandbox, or ``""``."""
    path, flags = ask.resource, ask.flags
    if not path.startswith("/") or os.path.normpath(path) != path or path.startswith("//"):
        return "only a plain absolute path is opened for the sandbox"
    if any(path == top or path.startswith(top + "/") for top in _NOT_OPENED_HERE):
        return "files of /proc, /sys and /dev are never opened for the sandbox"
    if flags & ~_OPEN_FLAGS:
        return "only plain open flags are honoured for the sandbox"
    mode = flags & os.O_ACCMODE
    reading = ask.operation == "read"
    if reading != (mode == os.O_RDONLY) or (reading and flags & (os.O_CREAT | os.O_TRUNC)):
        return "the open flags do not match the operation asked about"
    if ask.operation == "write" and flags & os.O_EXCL:
        return "the open flags do not match the operation asked about"
    if not reading and (path in protected or os.path.basename(path) == ".py-sandboxes"):
        return "a rule file is never written for the sandbox"
    return ""


def open_without_links(path: str, flags: int) -> int:
    """Open ``path`` (absolute, normalized) with no symbolic link on the way: each
    directory opened ``O_PATH | O_NOFOLLOW`` from the last, the file ``O_NOFOLLOW`` and
    non-blocking (a FIFO must not hold this thread); anything but a regular file is
    refused. What a swap of a directory meanwhile can do is change the answer to
    "no", never reach a file by another name.

    Raises:
        OSError: refused (``ELOOP`` for a link, ``EACCES`` for not a regular file).
    """
    parts = path.strip("/").split("/")
    walk = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    directory = os.open("/", walk)
    try:
        for part in parts[:-1]:
            following = os.open(part, walk, dir_fd=directory)
            os.close(directory)
            directory = following
        last = os.O_NOFOLLOW | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(parts[-1], flags | last, 0o666, dir_fd=directory)
    finally:
        os.close(directory)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PermissionError(13, "not a regular file", path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def connect(host: str, port: int) -> int:
    """A TCP connection to ``host:port``, made here; its descriptor. Resolved, judged
    (the SSRF-safe defaults hold for a name) and connected at once: ``_host.egress``."""
    from pysandboxes._host.egress import connect_asked

    return connect_asked(host, port, CONNECT_TIMEOUT)
