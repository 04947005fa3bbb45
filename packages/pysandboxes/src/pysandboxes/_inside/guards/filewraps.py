"""Wrappers for the file functions that raise no audit event, or need a second look.

``stat``, ``lstat``, ``access``, ``readlink``, ``statvfs``, ``pathconf``, ``mkfifo`` and
``mknod`` have no audit event; their wrappers raise one (``pysandboxes.metadata``,
``pysandboxes.create``) so that the audit hook judges them like everything else: a hidden
path then looks absent, as it would without the file. ``listdir`` and ``scandir`` hand
their names to the hook, which removes the hidden ones. ``open`` reports the descriptor
it got, which the hook judges again: the kernel's answer to "what did I open?".

The wrappers hold nothing but the original function: no guard state is reachable from
them. Each converts its path argument once, so a path object cannot answer one thing to
the guard and another to the system call.
"""

from __future__ import annotations

import builtins
import io
import os
import posix
import sys

from pysandboxes._inside.guards.pinned import (
    Pinner,
    capture,
    changes_one_path,
    changes_two_paths,
    open_flags,
    relative_to,
    symlink,
)
from pysandboxes._inside.guards.values import plain_bytes, plain_int, plain_str

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import TracebackType
    from typing import Any

_NO_FOLLOW = frozenset({"lstat", "readlink"})
_METADATA = ("stat", "lstat", "access", "readlink", "statvfs", "pathconf")
_CREATING = ("mkfifo", "mknod")
_WRITE_MODES = frozenset("wax+")


def _dress(wrapper: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    """Make the wrapper look like the original to help() and IPython."""
    wrapper.__name__ = original.__name__
    wrapper.__qualname__ = getattr(original, "__qualname__", original.__name__)
    wrapper.__doc__ = original.__doc__
    wrapper.__module__ = getattr(original, "__module__", None) or "posix"
    wrapper.__annotations__ = {}  # help() then shows the signature as the builtin's
    return wrapper


def _path_arg(value: object) -> object:
    """Convert a path-like object once; the same value then goes to guard and call.

    Subclasses of str, bytes and int become exact copies of what C reads from them, so
    no method of the program's can answer the guard differently than the kernel.
    """
    kind = type(value)
    if kind is str or kind is bytes or kind is int or value is None:
        return value  # the common case, first: this runs for every file operation
    text, raw, number = plain_str(value), plain_bytes(value), plain_int(value)
    plain = text if text is not None else raw if raw is not None else number
    return plain if plain is not None else _path_arg(os.fspath(value))  # type: ignore[arg-type]


def _fd_arg(value: object) -> object:
    """A descriptor argument as C reads it (an int subclass's own value)."""
    number = plain_int(value)
    return value if number is None else number


def _metadata(
    name: str, original: Callable[..., Any], seen: set[tuple[str, bool]]
) -> Callable[..., Any]:
    api = f"os.{name}"
    follow_default = name not in _NO_FOLLOW
    audit = sys.audit

    def wrapper(path: Any, *args: Any, **kwargs: Any) -> Any:
        if not kwargs and type(path) is str and (path, follow_default) in seen:
            return original(path, *args)  # judged before, in a part nothing can change
        path = _path_arg(path)
        follow = bool(kwargs.get("follow_symlinks", follow_default)) and name != "readlink"
        audit("pysandboxes.metadata", api, path, kwargs.get("dir_fd"), follow)
        return original(path, *args, **kwargs)

    return _dress(wrapper, original)


def _creating(name: str, original: Callable[..., Any], pinner: Pinner) -> Callable[..., Any]:
    api = f"os.{name}"
    audit = sys.audit

    def wrapper(path: Any, *args: Any, **kwargs: Any) -> Any:
        path = _path_arg(path)
        if type(path) is int:
            audit("pysandboxes.create", api, path, None)
            return original(path, *args, **kwargs)
        text = relative_to(os.fsdecode(path), kwargs.pop("dir_fd", None))  # type: ignore[arg-type]
        fd, pinned = pinner.parent(text)
        try:
            audit("pysandboxes.create", api, pinned, None)
            return original(pinned, *args, **kwargs)
        finally:
            pinner.release(fd)

    return _dress(wrapper, original)


class _Entries:
    """What ``os.scandir`` returns, without the hidden entries; still a context manager."""

    def __init__(self, entries: list[Any]) -> None:
        self._entries = iter(entries)

    def __iter__(self) -> Iterator[os.DirEntry[Any]]:
        return self

    def __next__(self) -> os.DirEntry[Any]:
        return next(self._entries)

    def close(self) -> None:
        self._entries = iter(())

    def __enter__(self) -> _Entries:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _LinkEntry:
    """A ``DirEntry`` that is a symlink: what it points to is judged before it is shown.

    ``DirEntry.stat()`` and ``is_file()`` follow links in C, with no audit event; this
    stand-in asks the guard first, so a link to a hidden file looks dangling.
    """

    def __init__(self, entry: os.DirEntry[Any]) -> None:
        self._entry = entry
        self.name = entry.name
        self.path = entry.path

    def _visible(self) -> bool:
        try:
            sys.audit("pysandboxes.metadata", "os.DirEntry.stat", self.path, None, True)
        except OSError:
            return False
        return True

    def is_symlink(self) -> bool:
        return True

    def is_dir(self, *, follow_symlinks: bool = True) -> bool:
        if follow_symlinks and not self._visible():
            return False
        return self._entry.is_dir(follow_symlinks=follow_symlinks)

    def is_file(self, *, follow_symlinks: bool = True) -> bool:
        if follow_symlinks and not self._visible():
            return False
        return self._entry.is_file(follow_symlinks=follow_symlinks)

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        if follow_symlinks:
            sys.audit("pysandboxes.metadata", "os.DirEntry.stat", self.path, None, True)
        return self._entry.stat(follow_symlinks=follow_symlinks)

    def inode(self) -> int:
        return self._entry.inode()

    def is_junction(self) -> bool:
        return False

    def __fspath__(self) -> Any:
        return self.path

    def __repr__(self) -> str:
        return f"<DirEntry {self.name!r}>"


def _listdir(original: Callable[..., Any]) -> Callable[..., Any]:
    audit = sys.audit

    def listdir(path: Any = None) -> Any:
        path = _path_arg(path)
        names = original(path) if path is not None else original()
        audit("pysandboxes.listing", path, names)
        return names

    return _dress(listdir, original)


def _scandir(original: Callable[..., Any]) -> Callable[..., Any]:
    audit = sys.audit

    def scandir(path: Any = None) -> Any:
        path = _path_arg(path)
        with original(path) if path is not None else original() as found:
            entries = list(found)
        names = [entry.name for entry in entries]
        audit("pysandboxes.listing", path, names)
        if len(names) != len(entries):
            kept = set(names)
            entries = [entry for entry in entries if entry.name in kept]
        shown: list[Any] = [_LinkEntry(entry) if entry.is_symlink() else entry for entry in entries]
        return _Entries(shown)

    return _dress(scandir, original)


def _name(handle: Any, name: object) -> None:
    """Give a file opened by descriptor the name ``open()`` would have given it."""
    raw = getattr(getattr(handle, "buffer", handle), "raw", handle)
    try:
        raw.name = name
    except (AttributeError, TypeError):
        pass


def _open(original: Callable[..., Any], pinner: Pinner) -> Callable[..., Any]:
    audit = sys.audit

    def open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        file = _path_arg(file)
        writes = type(mode) is str and not _WRITE_MODES.isdisjoint(mode)
        if writes and type(file) is not int and kwargs.get("opener") is None and len(args) < 6:
            # A change: opened through the pinned directory, then wrapped as open() would.
            fd = pinner.open(os.fsdecode(file), open_flags(mode), 0o666)
            try:
                handle = original(fd, mode, *args, **kwargs)
            except BaseException:
                posix.close(fd)
                raise
            _name(handle, file)
        else:
            handle = original(file, mode, *args, **kwargs)
        if type(file) is not int:
            try:
                audit("pysandboxes.opened", handle.fileno(), os.fsdecode(file), writes)  # type: ignore[arg-type]
            except BaseException:
                handle.close()
                raise
        return handle

    return _dress(open, original)


_OS_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _os_open(
    original: Callable[..., Any], readlink: Callable[[str], str], pinner: Pinner
) -> Callable[..., Any]:
    audit = sys.audit
    close = posix.close

    def open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        path, dir_fd = _path_arg(path), _fd_arg(dir_fd)  # type: ignore[assignment]
        if dir_fd is not None and type(path) in (str, bytes):
            # The "open" audit event does not carry dir_fd: name the file through the
            # descriptor instead, which is what the guard then judges.
            path, dir_fd = relative_to(os.fsdecode(path), dir_fd), None  # type: ignore[arg-type]
        if flags & _OS_WRITE_FLAGS and dir_fd is None and type(path) in (str, bytes):
            fd: int = pinner.open(os.fsdecode(path), flags, mode)  # type: ignore[arg-type]
        else:
            fd = original(path, flags, mode, dir_fd=dir_fd)
        if type(path) is not int:
            try:
                audit("pysandboxes.opened", fd, os.fsdecode(path), bool(flags & _OS_WRITE_FLAGS))  # type: ignore[arg-type]
            except BaseException:
                close(fd)
                raise
        return fd

    return _dress(open, original)


class _FileIOType(type):
    """Keeps ``isinstance(raw, io.FileIO)`` true for files made by ``open()``."""

    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, _RawFileIO)

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, _RawFileIO)


_RawFileIO = io.FileIO
_pinner: Pinner | None = None


class FileIO(_RawFileIO, metaclass=_FileIOType):  # type: ignore[misc]
    """``io.FileIO`` that reports the descriptor it opened, like ``open()`` does."""

    def __init__(
        self, file: Any, mode: str = "r", closefd: bool = True, opener: Any = None
    ) -> None:
        file = _path_arg(file)
        if (
            _pinner is not None
            and opener is None
            and type(file) is not int
            and type(mode) is str
            and not _WRITE_MODES.isdisjoint(mode)
        ):
            fd = _pinner.open(os.fsdecode(file), open_flags(mode), 0o666)  # type: ignore[arg-type]
            try:
                super().__init__(fd, mode, True)
            except BaseException:
                posix.close(fd)
                raise
            _name(self, file)
        else:
            super().__init__(file, mode, closefd, opener)
        if type(file) is not int:
            writes = type(mode) is str and not _WRITE_MODES.isdisjoint(mode)
            try:
                sys.audit("pysandboxes.opened", self.fileno(), os.fsdecode(file), writes)  # type: ignore[arg-type]
            except BaseException:
                self.close()
                raise


FileIO.__module__ = "io"
FileIO.__qualname__ = "FileIO"


def _set(name: str, wrapper: Callable[..., Any]) -> None:
    setattr(posix, name, wrapper)
    setattr(os, name, wrapper)


_FOLLOWING = ("chmod", "chown", "utime", "truncate", "setxattr", "removexattr")
_NOT_FOLLOWING = ("mkdir", "rmdir", "remove", "unlink", "lchown")


def install(metadata_seen: set[tuple[str, bool]]) -> None:
    """Replace the file functions in ``os``, ``posix``, ``io`` and ``builtins``.

    ``posix`` is patched too: the import system calls ``posix.stat`` and
    ``posix.listdir`` directly.
    """
    global _pinner
    readlink = posix.readlink  # the original, before it is wrapped below
    pinner = _pinner = Pinner(capture())
    for name in (*_FOLLOWING, *_NOT_FOLLOWING):
        original = getattr(posix, name, None)
        if original is not None:
            changer = changes_one_path(pinner, original, follows=name in _FOLLOWING)
            _set(name, _dress(changer, original))
    for name in ("rename", "replace", "link"):
        original = getattr(posix, name)
        _set(name, _dress(changes_two_paths(pinner, original, link=name == "link"), original))
    _set("symlink", _dress(symlink(pinner, posix.symlink), posix.symlink))
    for name in (*_METADATA, *_CREATING):
        original = getattr(posix, name, None)
        if original is None:
            continue
        if name in _METADATA:
            wrapper = _metadata(name, original, metadata_seen)
        else:
            wrapper = _creating(name, original, pinner)
        setattr(posix, name, wrapper)
        setattr(os, name, wrapper)
    for name, factory in (("listdir", _listdir), ("scandir", _scandir)):
        wrapper = factory(getattr(posix, name))
        setattr(posix, name, wrapper)
        setattr(os, name, wrapper)
    opened = _os_open(posix.open, readlink, pinner)
    posix.open = opened
    os.open = opened
    opener = _open(builtins.open, pinner)
    builtins.open = opener
    io.open = opener
    io.FileIO = FileIO  # type: ignore[misc]
