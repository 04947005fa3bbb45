"""Changes to files made through a pinned directory, so a swapped directory cannot
redirect them.

A check of a path and the system call that uses it are two steps; between them another
thread may replace a directory on the way by a symlink. A read is checked again on the
descriptor it returns, but a creation, a truncation, a rename or a removal has already
happened by then. So every change goes through its parent directory opened first
(``O_PATH``): the call then names ``/proc/self/fd/<fd>/<name>``, which the kernel resolves
through that very directory whatever happens to its path, and which the audit hook judges
as the same directory. The last component is not followed (``O_NOFOLLOW``, or an
``O_PATH`` descriptor of the file itself); a symlink there is followed here, one step at a
time, each step pinned and judged.

In a writable directory the audit hook refuses changes that do not come in this form: a
program that reaches an unwrapped function cannot race them either.
"""

from __future__ import annotations

import errno
import os
import stat

from pysandboxes._inside.guards.values import plain_int, plain_path_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

#: Flags of a directory opened only to pin it.
_PIN = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
_MAX_LINKS = 40
_PREFIX = "/proc/self/fd/"


def is_pinned(path: str) -> bool:
    """Whether ``path`` names a descriptor (``/proc/self/fd/N``) or one entry of a pinned
    directory (``/proc/self/fd/N/name``): either way the kernel cannot be redirected."""
    if not path.startswith(_PREFIX):
        return False
    number, slash, name = path[len(_PREFIX) :].partition("/")
    return number.isdigit() and (not slash or (bool(name) and "/" not in name))


def split(path: str) -> tuple[str, str]:
    """``(directory, name)`` of a path, the way the kernel reads its last component."""
    trimmed = path.rstrip("/")
    if not trimmed:
        return "/", "."
    head, slash, name = trimmed.rpartition("/")
    if not slash:
        return ".", name
    return head or "/", name


class Pinner:
    """Opens parents and follows links with the functions captured before any wrapper."""

    def __init__(self, originals: dict[str, Callable[..., Any]]) -> None:
        self._open: Callable[..., int] = originals["open"]
        self._close: Callable[[int], None] = originals["close"]
        self._readlink: Callable[[str], str] = originals["readlink"]
        self._fstat: Callable[[int], os.stat_result] = originals["fstat"]

    def parent(self, path: str) -> tuple[int | None, str]:
        """Pin the directory of ``path``: ``(fd, pinned path)``; ``(None, path)`` if the
        last component is ``.`` or ``..`` (the call then fails on its own)."""
        head, name = split(path)
        if name in (".", ".."):
            return None, path
        fd = self._open(head, _PIN)
        return fd, f"{_PREFIX}{fd}/{name}"

    def release(self, fd: int | None) -> None:
        if fd is not None:
            self._close(fd)

    def follow(self, path: str, fd: int, pinned: str) -> str:
        """The path a symlink at ``pinned`` (in directory ``fd``) points to."""
        target = self._readlink(pinned)
        if target.startswith("/"):
            return target
        return f"{self._readlink(f'{_PREFIX}{fd}')}/{target}"

    def open(self, path: str, flags: int, mode: int = 0o777) -> int:
        """``os.open`` through pinned directories, following links one pinned step at a time."""
        number = path[len(_PREFIX) :] if path.startswith(_PREFIX) else ""
        if number.isdigit():
            # Reopening a descriptor: open what it names, by its real path.
            path = self._readlink(path)
            if not path.startswith("/"):
                return self._open(f"{_PREFIX}{number}", flags, mode)  # a pipe, a socket
        for _ in range(_MAX_LINKS):
            fd, pinned = self.parent(path)
            try:
                try:
                    return self._open(pinned, flags | os.O_NOFOLLOW, mode)
                except OSError as exc:
                    if exc.errno != errno.ELOOP or fd is None or flags & os.O_NOFOLLOW:
                        raise
                    path = self.follow(path, fd, pinned)
            finally:
                self.release(fd)
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)

    def target(self, path: str) -> Iterator[str]:
        """Yield a ``/proc/self/fd`` path naming the file ``path`` leads to (links followed,
        pinned) for calls that follow symlinks (``chmod``, ``utime``, ``truncate``...)."""
        for _ in range(_MAX_LINKS):
            fd, pinned = self.parent(path)
            try:
                handle = self._open(pinned, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
            except BaseException:
                self.release(fd)
                raise
            try:
                if not stat.S_ISLNK(self._fstat(handle).st_mode):
                    yield f"{_PREFIX}{handle}"
                    return
                path = self.follow(path, fd if fd is not None else handle, pinned)
            finally:
                self._close(handle)
                self.release(fd)
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)


def open_flags(mode: str) -> int:
    """The ``os.open`` flags ``open()`` uses for ``mode`` (as ``FileIO`` computes them)."""
    plus = "+" in mode
    if "x" in mode:
        flags = os.O_CREAT | os.O_EXCL
    elif "w" in mode:
        flags = os.O_CREAT | os.O_TRUNC
    elif "a" in mode:
        flags = os.O_CREAT | os.O_APPEND
    else:
        flags = 0
    if plus:
        flags |= os.O_RDWR
    elif "r" in mode and not flags:
        flags |= os.O_RDONLY
    else:
        flags |= os.O_WRONLY
    return flags | os.O_CLOEXEC


def as_text(path: object) -> str | None:
    """A path argument as ``str`` (``None`` for a descriptor): converted once."""
    if type(path) is int or path is None:
        return None
    text = plain_path_text(path)
    if text is not None:
        return text
    return as_text(os.fspath(path))  # type: ignore[arg-type]  # a str or bytes now


def relative_to(text: str, dir_fd: object) -> str:
    """A name relative to a directory descriptor, as a path through that descriptor.

    ``/proc/self/fd/<dir_fd>/<name>`` names the same file as ``(dir_fd, name)`` does, and
    the pinned form can then be made of it like of any path.
    """
    if dir_fd is None or text.startswith("/"):
        return text
    if not issubclass(type(dir_fd), int):
        raise TypeError(f"argument should be integer or None, not {type(dir_fd).__name__}")
    return f"{_PREFIX}{plain_int(dir_fd)}/{text}"


def changes_one_path(
    pinner: Pinner, original: Callable[..., Any], *, follows: bool
) -> Callable[..., Any]:
    """A wrapper for a change of one path (``mkdir``, ``remove``, ``chmod``...).

    ``follows``: the call acts on what a symlink points to, unless the caller passes
    ``follow_symlinks=False``. A ``dir_fd`` is turned into the path through it.
    """

    def wrapper(path: Any, *args: Any, **kwargs: Any) -> Any:
        text = as_text(path)
        if text is None:
            return original(path, *args, **kwargs)  # a descriptor: what it names is judged
        text = relative_to(text, kwargs.pop("dir_fd", None))
        if follows and kwargs.get("follow_symlinks", True):
            for target in pinner.target(text):
                return original(target, *args, **kwargs)
        fd, pinned = pinner.parent(text)
        try:
            return original(pinned, *args, **kwargs)
        finally:
            pinner.release(fd)

    return wrapper


def changes_two_paths(
    pinner: Pinner, original: Callable[..., Any], *, link: bool = False
) -> Callable[..., Any]:
    """A wrapper for ``rename``, ``replace`` and ``link``: both parents pinned.

    ``link``: ``os.link`` follows a symlink given as its source (by default); the file it
    leads to is then pinned itself, so a swapped link cannot name another file.
    """

    def wrapper(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Any:
        source, destination = as_text(src), as_text(dst)
        if source is None or destination is None:
            return original(src, dst, *args, **kwargs)
        source = relative_to(source, kwargs.pop("src_dir_fd", None))
        destination = relative_to(destination, kwargs.pop("dst_dir_fd", None))
        second, dst = pinner.parent(destination)
        try:
            if link and kwargs.get("follow_symlinks", True):
                for target in pinner.target(source):
                    return original(target, dst, *args, **kwargs)
            first, src = pinner.parent(source)
            try:
                return original(src, dst, *args, **kwargs)
            finally:
                pinner.release(first)
        finally:
            pinner.release(second)

    return wrapper


def symlink(pinner: Pinner, original: Callable[..., Any]) -> Callable[..., Any]:
    """A wrapper for ``os.symlink``: the new link's directory pinned."""

    def wrapper(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Any:
        destination = as_text(dst)
        if destination is None:
            return original(src, dst, *args, **kwargs)
        destination = relative_to(destination, kwargs.pop("dir_fd", None))
        fd, pinned = pinner.parent(destination)
        try:
            return original(src, pinned, *args, **kwargs)
        finally:
            pinner.release(fd)

    return wrapper


def capture() -> dict[str, Callable[..., Any]]:
    """The functions the pinner needs, taken before any wrapper replaces them."""
    import posix

    return {name: getattr(posix, name) for name in ("open", "close", "readlink", "fstat")}
