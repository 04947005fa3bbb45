"""How the guards turn what a program names into the path the kernel will use.

Paths are judged on their real path, so ``..``, symlinks and ``dir_fd`` forms cannot
escape an exposure. Resolving is the costly part of a file verdict, so the real path of
each directory is cached; every operation of this process that can change what a
directory name means (rename, rmdir, unlink, symlink; keys are absolute) clears the
cache. Relative names start from the working directory ``workdir`` keeps. Opens are
re-checked on the file descriptor itself (``/proc/self/fd``), which no rename can fool.

Only "no such name" (``ENOENT``, ``ENOTDIR``) lets the rest of a path be judged as
named; any other error (``ENAMETOOLONG``, ``ELOOP``, ``EACCES``...) means the guard does
not know what the kernel will reach, and raises ``Unjudgeable``: the access is refused.
"""

from __future__ import annotations

import errno
import os
import stat

from pysandboxes._inside.guards.workdir import WorkingDirectory

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

#: Types a path may arrive as, once converted; anything else is refused by the guards.
PathArg = str | bytes | int

_FD_LINK = "/proc/self/fd/{}"
_CACHE_LIMIT = 4096
_MAX_LINKS = 40
_MISSING = frozenset({errno.ENOENT, errno.ENOTDIR})


class Unjudgeable(Exception):
    """A name the guard cannot judge: what the kernel would reach is unknown. Refused.

    Attributes:
        path: the name whose resolution failed.
        reason: why, for the refusal message.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path = path
        self.reason = reason


def _missing(error: OSError, path: str) -> None:
    """Return if ``error`` says ``path`` does not exist; raise ``Unjudgeable`` otherwise."""
    if error.errno in _MISSING:
        return
    name = errno.errorcode.get(error.errno or 0, "an error")
    raise Unjudgeable(path, f"'{path}' gave {name} ({error.strerror})") from None


def is_magic(path: str) -> bool:
    """Whether ``path`` is under ``/proc``, whose links follow the process, not the disk."""
    return path == "/proc" or path.startswith("/proc/")


class Resolver:
    """Resolves paths with functions captured before any guard was installed."""

    def __init__(self) -> None:
        self._lstat = os.lstat
        self._readlink = os.readlink
        #: The working directory, kept between accesses where it cannot go stale.
        self.workdir = WorkingDirectory(os.getcwd)
        self._fsdecode: Callable[[bytes], str] = os.fsdecode
        self._dirs: dict[str, str] = {}
        self._links: dict[str, bool] = {}
        try:  # the pid /proc knows: a pid namespace's own /proc, or the host's
            self._own_proc = "/proc/" + os.readlink("/proc/self")
        except OSError:
            self._own_proc = f"/proc/{os.getpid()}"

    def forget(self) -> None:
        """Drop cached resolutions: the namespace may have changed."""
        self._dirs.clear()
        self._links.clear()

    def is_link(self, path: str, *, cache: bool) -> bool:
        """Whether ``path`` is a symlink; ``cache`` where the sandbox cannot change it."""
        cache = cache and not is_magic(path)
        if cache:
            known = self._links.get(path)
            if known is not None:
                return known
        try:
            result = stat.S_ISLNK(self._lstat(path).st_mode)
        except OSError as error:
            _missing(error, path)
            result = False  # does not exist (yet): judged as named
        if cache:
            if len(self._links) >= _CACHE_LIMIT:
                self._links.clear()
            self._links[path] = result
        return result

    def real_dir(self, directory: str) -> str:
        """The real path of a directory, cached until ``forget``."""
        return self._real_dir(directory)

    def fd_path(self, fd: int) -> str | None:
        """The path the kernel holds for an open file descriptor, if it has one."""
        try:
            target = self._readlink(_FD_LINK.format(fd))
        except OSError as error:
            if error.errno in (errno.ENOENT, errno.EBADF):
                return None  # not open: the call fails with EBADF itself
            # ENAMETOOLONG: a path the kernel cannot even write out; refused, not skipped
            _missing(error, _FD_LINK.format(fd))
            return None
        return self._self_proc(target) if target.startswith("/") else None

    def absolute(self, path: str | bytes, dir_fd: int | None = None) -> str | None:
        """``path`` made absolute against ``dir_fd`` or the cwd.

        No lexical clean-up: ``link/../x`` goes through the link's target, as the kernel
        walks it; only ``realpath`` may remove a ``..``.
        """
        text = path if isinstance(path, str) else self._fsdecode(path)
        if not text.startswith("/"):
            base = self.workdir.current()[0] if dir_fd is None else self.fd_path(dir_fd)
            if base is None:
                return None
            text = f"{base}/{text}"
        return text

    def real(self, path: str, *, follow: bool = True) -> str:
        """The real path of the absolute ``path``; the last component is kept as is when
        ``follow`` is false (``lstat``, ``unlink``, ``rename`` act on a link itself).

        This process's own ``/proc/<pid>`` is reported as ``/proc/self``, the name a rule
        can use.
        """
        return self._self_proc(self._real(path, follow=follow))

    def self_proc(self, real: str) -> str:
        """This process's ``/proc/<pid>`` written ``/proc/self``, as rules name it."""
        return self._self_proc(real)

    def _self_proc(self, real: str) -> str:
        own = self._own_proc
        if real.startswith(own) and (len(real) == len(own) or real[len(own)] == "/"):
            return "/proc/self" + real[len(own) :]
        return real

    def _real(self, path: str, *, follow: bool) -> str:
        head, _, name = path.rstrip("/").rpartition("/") if path != "/" else ("", "", "")
        if name in ("", ".", ".."):
            return self.realpath(path)
        parent = self._real_dir(head or "/")
        candidate = f"{parent}/{name}" if parent != "/" else f"/{name}"
        if not follow:
            return candidate
        try:
            mode = self._lstat(candidate).st_mode
        except OSError as error:
            _missing(error, candidate)
            return candidate  # does not exist (yet): judged as named
        if stat.S_ISLNK(mode):
            return self.realpath(candidate)
        return candidate

    def _real_dir(self, directory: str) -> str:
        cached = self._dirs.get(directory)
        if cached is not None:
            return cached
        resolved = self.realpath(directory)
        if is_magic(directory) or is_magic(resolved):
            return resolved  # /proc links change meaning with every descriptor and chdir
        if len(self._dirs) >= _CACHE_LIMIT:
            self._dirs.clear()
        self._dirs[directory] = resolved
        return resolved

    def realpath(self, path: str) -> str:
        """``os.path.realpath`` of an absolute path, with the captured originals.

        The guarded ``os.lstat`` must not judge the components the guard itself walks.
        """
        pending = path.split("/")[::-1]
        resolved = ""
        links = 0
        missing = False
        while pending:
            part = pending.pop()
            if part in ("", "."):
                continue
            if part == "..":
                resolved = resolved.rpartition("/")[0]
                continue
            candidate = f"{resolved}/{part}"
            if missing:
                resolved = candidate
                continue
            try:
                mode = self._lstat(candidate).st_mode
            except OSError as error:
                _missing(error, candidate)
                missing = True  # the rest is judged as named, like realpath(strict=False)
                resolved = candidate
                continue
            if not stat.S_ISLNK(mode):
                resolved = candidate
                continue
            links += 1
            if links > _MAX_LINKS:
                raise Unjudgeable(
                    candidate, f"'{path}' leads through more than {_MAX_LINKS} links (ELOOP)"
                )
            try:
                target = self._readlink(candidate)
            except OSError as error:
                # A link the kernel will not show (another process's /proc/<pid>/root under
                # Landlock): where it leads is unknown, so it is refused.
                _missing(error, candidate)
                missing = True
                resolved = candidate
                continue
            if target.startswith("/"):
                resolved = ""
            pending.extend(target.split("/")[::-1])
        return resolved or "/"
