"""What the trusted side performs for the sandbox once a prompt allowed it.

The broker (``_host.prompts``) has judged the request and someone allowed it; this module
does it, outside the sandbox, and returns the descriptor to hand over (``SCM_RIGHTS``):

- a file is opened by its exact path, following no symbolic link on the way (each
  directory opened ``O_PATH | O_NOFOLLOW`` from the last), only a regular file, never
  under ``/proc``, ``/sys`` or ``/dev``, never a rule file for writing, and only with
  open flags that match the operation asked about (``unopenable`` says why not);
- a directory is listed here (``list_without_links``), its names written to a sealed
  memory file whose descriptor is handed over, at most ``MAX_LISTED`` entries and
  ``MAX_LISTING`` bytes, without the entries an ``ignore=`` rule hides;
- a ``stat`` is taken here (``stat_without_links``) and sent as its fields;
- a name is removed, a directory made or removed, a name renamed here
  (``change_without_links``), from directories reached with no link on the way, never
  a rule file, a name a rule file is searched by, or a directory holding one;
- a TCP connection is made here, and the connected socket handed over.

Nothing here reads what the sandbox wrote but the decoded request.
"""

from __future__ import annotations

import os
import stat

from pysandboxes._wire.asks import CHANGES, MAX_LISTED, MAX_LISTING, OPENS, STAT_FIELDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from pysandboxes._wire.asks import Ask

#: How long the trusted side tries to connect for the sandbox.
CONNECT_TIMEOUT = 10.0
_OPEN_FLAGS = os.O_ACCMODE | os.O_CREAT | os.O_EXCL | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC
_NOT_OPENED_HERE = ("/proc", "/sys", "/dev")
#: The names the rule files are found by: never made, removed or renamed for the sandbox.
_RULE_NAMES = frozenset({".py-sandboxes", "pyproject.toml"})
#: The most entries of a directory renamed for the sandbox looked through for a rule file.
MAX_RENAMED = 10_000


def unopenable(ask: Ask, protected: tuple[str, ...]) -> str:
    """Why the file of ``ask`` is never opened, listed, looked at or changed for the
    sandbox, or ``""``."""
    paths = (ask.resource, ask.target) if ask.target else (ask.resource,)
    for path in paths:
        if not path.startswith("/") or os.path.normpath(path) != path or path.startswith("//"):
            return "only a plain absolute path is opened for the sandbox"
        if any(path == top or path.startswith(top + "/") for top in _NOT_OPENED_HERE):
            return "files of /proc, /sys and /dev are never opened for the sandbox"
        if ask.operation in CHANGES and _holds_rules(path, protected):
            return "a rule file, or a directory holding one, is never changed for the sandbox"
    if ask.operation in CHANGES and "/" in paths:
        return "the root is never changed for the sandbox"
    if ask.operation not in OPENS:
        return ""
    path, flags = ask.resource, ask.flags
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


def _holds_rules(path: str, protected: tuple[str, ...]) -> bool:
    """Whether changing the name ``path`` could change a rule file: it is one, a name a
    rule file is found by, or a directory above one."""
    if os.path.basename(path) in _RULE_NAMES:
        return True
    return any(p == path or p.startswith(path + "/") for p in protected)


def _parent(path: str) -> tuple[int, str]:
    """The directory of ``path`` reached with no link on the way (``O_PATH``), and the
    last name; the caller closes it."""
    head, _, name = path.rpartition("/")
    walk = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    directory = os.open("/", walk)
    try:
        for part in head.strip("/").split("/") if head else ():
            following = os.open(part, walk, dir_fd=directory)
            os.close(directory)
            directory = following
    except BaseException:
        os.close(directory)
        raise
    return directory, name


def _open_directory(path: str) -> int:
    """``path``, a directory, opened for listing with no link on the way."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    if path == "/":
        return os.open("/", flags)
    parent, name = _parent(path)
    try:
        return os.open(name, flags, dir_fd=parent)
    finally:
        os.close(parent)


def list_without_links(path: str, hidden: Callable[[str], bool]) -> int:
    """List the directory ``path`` (no link followed on the way, nor the directory
    itself), leaving out the entries ``hidden`` names (by real path); a sealed memory
    file holding the listing as JSON, ``[[name, type, inode], ...]`` (type ``d``, ``f``,
    ``l`` or ``o``), whose descriptor is handed over.

    Raises:
        OSError: refused (``ELOOP`` for a link, ``E2BIG`` for too large a listing).
    """
    import json

    fd = _open_directory(path)
    entries: list[list[object]] = []
    size = 0
    prefix = path.rstrip("/")
    try:
        with os.scandir(fd) as found:
            for entry in found:
                if len(entries) >= MAX_LISTED or size > MAX_LISTING:
                    raise OSError(7, f"more than {MAX_LISTED} entries or {MAX_LISTING} bytes")
                if hidden(f"{prefix}/{entry.name}"):
                    continue
                kind = "o"
                if entry.is_symlink():
                    kind = "l"
                elif entry.is_dir(follow_symlinks=False):
                    kind = "d"
                elif entry.is_file(follow_symlinks=False):
                    kind = "f"
                entries.append([entry.name, kind, entry.inode()])
                size += len(entry.name) + 32
    finally:
        os.close(fd)
    data = json.dumps(entries, separators=(",", ":")).encode()  # ASCII: surrogates escaped
    if len(data) > MAX_LISTING:
        raise OSError(7, f"more than {MAX_LISTING} bytes of names")
    return _sealed(data)


def _sealed(data: bytes) -> int:
    """A memory file holding ``data``, sealed: neither side can change it."""
    import fcntl

    fd = os.memfd_create("pysandboxes-listing", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    except BaseException:
        os.close(fd)
        raise
    return fd


def stat_without_links(path: str, follow: bool) -> tuple[int, ...]:
    """The ``stat`` of ``path`` (no link on the way), as ``STAT_FIELDS``: the last name
    itself for ``lstat`` (``follow`` false); for ``stat``, a link there is refused
    (``ELOOP``: the guard resolved the path, so a link there is a swap)."""
    if path == "/":
        found = os.stat("/")
    else:
        parent, name = _parent(path)
        try:
            found = os.stat(name, dir_fd=parent, follow_symlinks=False)
        finally:
            os.close(parent)
    if follow and stat.S_ISLNK(found.st_mode):
        raise OSError(40, "a symbolic link: not followed for the sandbox", path)
    return tuple(int(getattr(found, field, 0)) for field in STAT_FIELDS)


def change_without_links(ask: Ask) -> None:
    """Remove (``delete``, ``rmdir``), make (``mkdir``, ``flags`` its mode) or rename
    (to ``target``) the name ``ask`` names, each directory reached with no link on the
    way; the last name is never followed (a link is removed or renamed as a link). A
    directory renamed is first looked through for a rule file (``MAX_RENAMED`` entries
    at most, else refused).

    Raises:
        OSError: refused, or what the system said.
    """
    parent, name = _parent(ask.resource)
    try:
        if ask.operation == "delete":
            if stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                raise IsADirectoryError(21, "Is a directory", ask.resource)
            os.unlink(name, dir_fd=parent)
        elif ask.operation == "rmdir":
            os.rmdir(name, dir_fd=parent)
        elif ask.operation == "mkdir":
            os.mkdir(name, ask.flags or 0o777, dir_fd=parent)
        else:
            _no_rules_below(parent, name)
            target, new = _parent(ask.target)
            try:
                os.rename(name, new, src_dir_fd=parent, dst_dir_fd=target)
            finally:
                os.close(target)
    finally:
        os.close(parent)


def _no_rules_below(parent: int, name: str) -> None:
    """Refuse to rename a directory that holds a rule file (or too much to look through)."""
    if not stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
        return
    seen = 0
    for _, dirs, files, _ in os.fwalk(name, dir_fd=parent, follow_symlinks=False):
        seen += len(dirs) + len(files)
        if seen > MAX_RENAMED:
            raise OSError(7, f"more than {MAX_RENAMED} entries to look through for a rule file")
        if not _RULE_NAMES.isdisjoint(files) or not _RULE_NAMES.isdisjoint(dirs):
            raise PermissionError(13, "it holds a rule file: never renamed for the sandbox")


def connect(host: str, port: int) -> int:
    """A TCP connection to ``host:port``, made here; its descriptor. Resolved, judged
    (the SSRF-safe defaults hold for a name) and connected at once: ``_host.egress``."""
    from pysandboxes._host.egress import connect_asked

    return connect_asked(host, port, CONNECT_TIMEOUT)
