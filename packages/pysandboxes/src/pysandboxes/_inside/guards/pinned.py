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
program that reaches an unwrapped function cannot race them either. The pinner opens
through the judged ``os.open`` and reads links through the judged ``os.readlink``; the
wrappers built here are ``_before`` functions of sealed wrappers (``audit.sealed_wrapper``),
which alone hold the original functions.
"""

from __future__ import annotations

import errno
import operator
import os
import stat

from pysandboxes._inside.guards.values import plain_int, plain_path_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from pysandboxes._inside.guards.audit import Call

    After = Callable[[Any, BaseException | None], Any]

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
    """Opens parents and follows links through the judged ``os.open`` and ``os.readlink``
    (bound by ``bind`` once the wrappers exist): it holds no original function, so
    reaching it gives the program nothing the wrappers do not."""

    def __init__(self) -> None:
        import posix

        self._open: Callable[..., int] = _unbound
        self._readlink: Callable[[str], str] = _unbound
        self._close: Callable[[int], None] = posix.close
        self._fstat: Callable[[int], os.stat_result] = posix.fstat
        self._getcwd: Callable[[], str] = posix.getcwd

    def bind(self, judged_open: Callable[..., int], judged_readlink: Callable[[str], str]) -> None:
        """Use the wrappers of ``os.open`` and ``os.readlink``."""
        self._open = judged_open
        self._readlink = judged_readlink

    def absolute(self, path: str) -> str:
        """``path`` made absolute against the working directory, as the guard judges it.

        A relative name given to ``os.open`` could be resolved from a ``dir_fd`` the
        ``open`` audit event does not carry: the hook refuses them, so none is passed."""
        return path if path.startswith("/") else f"{self._getcwd().rstrip('/')}/{path}"

    def parent(self, path: str) -> tuple[int | None, str]:
        """Pin the directory of ``path``: ``(fd, pinned path)``; ``(None, path)`` if the
        last component is ``.`` or ``..`` (the call then fails on its own)."""
        head, name = split(self.absolute(path))
        if name in (".", ".."):
            return None, self.absolute(path)
        fd = self._open(head, _PIN)
        return fd, f"{_PREFIX}{fd}/{name}"

    def release(self, fd: int | None) -> None:
        if fd is not None:
            self._close(fd)

    def follow(self, path: str, pinned: str) -> str:
        """The path a symlink at ``pinned`` (the last component of ``path``) points to."""
        target = self._readlink(pinned)
        if target.startswith("/"):
            return target
        return f"{split(self.absolute(path))[0]}/{target}"

    def open(self, path: str, flags: int, mode: int = 0o777) -> int:
        """``os.open`` through pinned directories, following links one pinned step at a time."""
        if is_descriptor(path):
            return self._open(path, flags, mode)  # the kernel reopens that very file
        for _ in range(_MAX_LINKS):
            fd, pinned = self.parent(path)
            try:
                try:
                    return self._open(pinned, flags | os.O_NOFOLLOW, mode)
                except OSError as exc:
                    if exc.errno != errno.ELOOP or fd is None or flags & os.O_NOFOLLOW:
                        raise
                    path = self.follow(path, pinned)
            finally:
                self.release(fd)
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)

    def target(self, path: str) -> tuple[str, Callable[[], None]]:
        """A ``/proc/self/fd`` path naming the file ``path`` leads to (links followed,
        pinned) for calls that follow symlinks (``chmod``, ``utime``, ``truncate``...),
        and what releases it."""
        for _ in range(_MAX_LINKS):
            fd, pinned = self.parent(path)
            try:
                handle = self._open(pinned, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
            except BaseException:
                self.release(fd)
                raise
            try:
                is_link = stat.S_ISLNK(self._fstat(handle).st_mode)
                if is_link:
                    path = self.follow(path, pinned)
            except BaseException:
                self._close(handle)
                self.release(fd)
                raise
            if not is_link:
                return f"{_PREFIX}{handle}", _releaser(self, handle, fd)
            self._close(handle)
            self.release(fd)
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)


def _unbound(*args: object, **kwargs: object) -> Any:
    raise RuntimeError("the pinner is used before the wrappers exist")


def _releaser(pinner: Pinner, *fds: int | None) -> Callable[[], None]:
    def release() -> None:
        for fd in fds:
            pinner.release(fd)

    return release


def is_descriptor(path: str) -> bool:
    """Whether ``path`` is ``/proc/self/fd/N``: the file descriptor N itself."""
    return path.startswith(_PREFIX) and path[len(_PREFIX) :].isdigit()


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


def exact_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``dir_fd`` and ``follow_symlinks`` as C reads them, read once: an object's
    ``__index__`` or ``__bool__`` cannot answer the guard and the kernel apart."""
    if kwargs.get("dir_fd") is not None:
        kwargs["dir_fd"] = operator.index(kwargs["dir_fd"])
    if "follow_symlinks" in kwargs:
        kwargs["follow_symlinks"] = bool(kwargs["follow_symlinks"])
    return kwargs


def changes_one_path(pinner: Pinner, *, follows: bool) -> Callable[..., Call]:
    """The ``_before`` of a wrapper for a change of one path (``mkdir``, ``remove``,
    ``chmod``...): the call goes to the pinned form of the path.

    ``follows``: the call acts on what a symlink points to, unless the caller passes
    ``follow_symlinks=False``. A ``dir_fd`` is turned into the path through it.
    """

    def before(path: Any, *args: Any, **kwargs: Any) -> Call:
        text = as_text(path)
        if text is None:
            return (None, (path, *args), kwargs, None)  # a descriptor: judged when opened
        text = relative_to(text, exact_options(kwargs).pop("dir_fd", None))
        if follows and kwargs.get("follow_symlinks", True):
            target, release = pinner.target(text)
            return (None, (target, *args), kwargs, _after_release(release))
        fd, pinned = pinner.parent(text)
        return (None, (pinned, *args), kwargs, _after_release(_releaser(pinner, fd)))

    return before


def changes_two_paths(pinner: Pinner, *, link: bool = False) -> Callable[..., Call]:
    """The ``_before`` of a wrapper for ``rename``, ``replace`` and ``link``: both
    parents pinned.

    ``link``: ``os.link`` follows a symlink given as its source (by default); the file it
    leads to is then pinned itself, so a swapped link cannot name another file.
    """

    def before(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Call:
        source, destination = as_text(src), as_text(dst)
        if source is None or destination is None:
            return (None, (src, dst, *args), kwargs, None)
        exact_options(kwargs)
        source = relative_to(source, _index(kwargs.pop("src_dir_fd", None)))
        destination = relative_to(destination, _index(kwargs.pop("dst_dir_fd", None)))
        second, dst = pinner.parent(destination)
        try:
            if link and kwargs.get("follow_symlinks", True):
                src, release = pinner.target(source)
                done = _after_release(release, _releaser(pinner, second))
                return (None, (src, dst, *args), kwargs, done)
            first, src = pinner.parent(source)
        except BaseException:
            pinner.release(second)
            raise
        return (None, (src, dst, *args), kwargs, _after_release(_releaser(pinner, first, second)))

    return before


def symlink(pinner: Pinner) -> Callable[..., Call]:
    """The ``_before`` of a wrapper for ``os.symlink``: the new link's directory pinned."""

    def before(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Call:
        destination = as_text(dst)
        if destination is None:
            return (None, (src, dst, *args), kwargs, None)
        destination = relative_to(destination, exact_options(kwargs).pop("dir_fd", None))
        fd, pinned = pinner.parent(destination)
        return (None, (src, pinned, *args), kwargs, _after_release(_releaser(pinner, fd)))

    return before


def _index(value: Any) -> int | None:
    return None if value is None else operator.index(value)


def _after_release(*releases: Callable[[], None]) -> After:
    """An ``after`` that releases the pinned directories, whatever the call did."""

    def after(result: Any, error: BaseException | None) -> Any:
        for release in releases:
            release()
        return result

    return after
