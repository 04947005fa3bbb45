"""Wrappers for the file functions that raise no audit event, or need a second look.

``stat``, ``lstat``, ``access``, ``readlink``, ``statvfs``, ``pathconf``, ``mkfifo`` and
``mknod`` have no audit event; their wrappers raise one (``pysandboxes.metadata``,
``pysandboxes.create``) so that the audit hook judges them like everything else: a hidden
path then looks absent, as it would without the file. ``listdir`` and ``scandir`` hand
their names to the hook, which removes the hidden ones (``listings``). ``open`` reports
the descriptor it got, which the hook judges again: the kernel's answer to "what did I
open?". Changes go through pinned directories (``pinned``).

Every wrapper is sealed (``audit.sealed_wrapper``): the original function is a hidden
default, never in a closure, a global, a frame's locals or ``__wrapped__``. What the
program can reach from a wrapper (its ``_before``, the pinner) holds only judged
functions. Each wrapper converts its arguments once (paths, ``dir_fd``, flags,
``follow_symlinks``), so an object cannot answer one thing to the guard and another to
the system call; a name relative to a ``dir_fd`` becomes the path through the descriptor,
and ``os.open`` gets only absolute names (see ``FileGuard._open_event``).
"""

from __future__ import annotations

import builtins
import io
import operator
import os
import posix
import sys

from pysandboxes._inside.guards.audit import sealed_function, sealed_wrapper
from pysandboxes._inside.guards.listings import LISTED, listdir_before, path_arg, scandir_before
from pysandboxes._inside.guards.pinned import (
    Pinner,
    changes_one_path,
    changes_two_paths,
    exact_options,
    is_descriptor,
    is_pinned,
    open_flags,
    relative_to,
    symlink,
)
from pysandboxes._inside.guards.shortcuts import seen_look, seen_open
from pysandboxes._inside.guards.workdir import KNOWN_SOURCE, NOTICE_SOURCE
from pysandboxes._policy.model import Access

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from pysandboxes._inside.guards.audit import Call
    from pysandboxes._inside.guards.workdir import WorkingDirectory

_NO_FOLLOW = frozenset({"lstat", "readlink"})
_METADATA = ("stat", "lstat", "access", "readlink", "statvfs", "pathconf")
_CREATING = ("mkfifo", "mknod")
_WRITE_MODES = frozenset("wax+")
_READ, _WRITE = Access.READ, Access.WRITE
_OS_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _metadata(name: str, known: Callable[[str, bool], bool]) -> Callable[..., Call]:
    api = f"os.{name}"
    follow_default = name not in _NO_FOLLOW
    audit = sys.audit

    def before(path: Any, *args: Any, **kwargs: Any) -> Call:
        if not kwargs and type(path) is str and known(path, follow_default):
            return (None, (path, *args), kwargs, None)  # judged before: nothing can change
        path = path_arg(path)
        kwargs = exact_options(kwargs)
        follow = kwargs.get("follow_symlinks", follow_default) and name != "readlink"
        audit("pysandboxes.metadata", api, path, kwargs.get("dir_fd"), follow)
        return (None, (path, *args), kwargs, None)

    return before


def _creating(name: str, pinner: Pinner) -> Callable[..., Call]:
    api = f"os.{name}"
    audit = sys.audit

    def before(path: Any, *args: Any, **kwargs: Any) -> Call:
        path = path_arg(path)
        if type(path) is int:
            audit("pysandboxes.create", api, path, None)
            return (None, (path, *args), kwargs, None)
        text = relative_to(os.fsdecode(path), exact_options(kwargs).pop("dir_fd", None))  # type: ignore[arg-type]
        fd, pinned = pinner.parent(text)
        try:
            audit("pysandboxes.create", api, pinned, None)
        except BaseException:
            pinner.release(fd)
            raise

        def after(result: Any, error: BaseException | None) -> Any:
            pinner.release(fd)
            return result

        return (None, (pinned, *args), kwargs, after)

    return before


def _name(handle: Any, name: object) -> None:
    """Give a file opened by descriptor the name ``open()`` would have given it."""
    raw = getattr(getattr(handle, "buffer", handle), "raw", handle)
    try:
        raw.name = name
    except (AttributeError, TypeError):
        pass


def _reported(
    file: object, writes: bool, known: Callable[[str, object], bool]
) -> Callable[[Any, BaseException | None], Any]:
    """An ``after`` that has the hook judge what ``open`` really opened, unless it was
    judged in a stable area, where nothing can have been swapped (``FileGuard.settled``)."""
    audit = sys.audit
    access = _WRITE if writes else _READ

    def after(handle: Any, error: BaseException | None) -> Any:
        if error is not None:
            return None
        if type(file) is str and known(file, access):
            return handle
        try:
            audit("pysandboxes.opened", handle.fileno(), os.fsdecode(file), writes)  # type: ignore[arg-type]
        except BaseException:
            handle.close()
            raise
        return handle

    return after


def _open_before(pinner: Pinner, known: Callable[[str, object], bool]) -> Callable[..., Call]:
    """The ``_before`` of ``open()``: a change opens through the pinned directory."""
    import _io

    raw_open = _io.open  # public (``_io.open``): holding it hands out nothing new

    def written(file: Any, mode: str, *args: Any, **kwargs: Any) -> Any:
        fd = pinner.open(os.fsdecode(file), open_flags(mode), 0o666)
        try:
            handle = raw_open(fd, mode, *args, **kwargs)
        except BaseException:
            posix.close(fd)
            raise
        _name(handle, file)
        return handle

    def before(file: Any, mode: Any = "r", *args: Any, **kwargs: Any) -> Call:
        given, file = file, path_arg(file)
        writes = type(mode) is str and not _WRITE_MODES.isdisjoint(mode)
        if writes and type(file) is not int and kwargs.get("opener") is None and len(args) < 6:
            # Re-checked by os.open, which opens the file.
            return (written, (file, mode, *args), kwargs, _renamed(os.fsdecode(file), given))  # type: ignore[arg-type]
        after = None if type(file) is int else _reported(file, writes, known)
        return (None, (file, mode, *args), kwargs, after)

    return before


def _renamed(passed: str, given: object) -> Callable[[Any, BaseException | None], Any]:
    """An ``after`` that names the file in an error as the program named it, not as
    the wrapper passed it on (absolute, or through a pinned directory)."""

    def after(result: Any, error: BaseException | None) -> Any:
        if isinstance(error, OSError):
            named = error.filename
            if named == passed or (type(named) is str and is_pinned(named)):
                error.filename = given
        return result

    return after


def _os_open_before(pinner: Pinner) -> Callable[..., Call]:
    """The ``_before`` of ``os.open``: absolute names only (a ``dir_fd`` folded in), a
    change through the pinned directory, what was opened judged again."""
    audit = sys.audit
    close = posix.close

    def before(path: Any, flags: Any, mode: Any = 0o777, *, dir_fd: Any = None) -> Call:
        given = path
        path, flags, mode = path_arg(path), operator.index(flags), operator.index(mode)
        dir_fd = None if dir_fd is None else operator.index(dir_fd)
        if type(path) is not str and type(path) is not bytes:
            return (None, (path, flags, mode), {"dir_fd": dir_fd}, None)  # C refuses it
        text = pinner.absolute(relative_to(os.fsdecode(path), dir_fd))  # type: ignore[arg-type]
        writes = bool(flags & _OS_WRITE_FLAGS)
        renamed = _renamed(text, given)
        # A descriptor is reopened as it is; an entry of a pinned directory not followed
        # cannot be redirected: both are the pinned forms the pinner itself opens.
        if writes and not (is_descriptor(text) or (is_pinned(text) and flags & os.O_NOFOLLOW)):
            return (pinner.open, (text, flags, mode), {}, renamed)  # checked when opened
        handle_only = bool(flags & os.O_PATH)

        def after(fd: Any, error: BaseException | None) -> Any:
            if error is not None:
                return renamed(None, error)
            try:
                audit("pysandboxes.opened", fd, text, writes, handle_only)
            except BaseException:
                close(fd)
                raise
            return fd

        return (None, (text, flags, mode), {}, after)

    return before


class _FileIOType(type):
    """Keeps ``isinstance(raw, io.FileIO)`` true for files made by ``open()``."""

    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, _RawFileIO)

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, _RawFileIO)


_RawFileIO = io.FileIO  # public (``_io.FileIO``): holding it hands out nothing new
#: The pinner of ``FileIO``: it holds only judged functions.
_pinner: Pinner | None = None


class FileIO(_RawFileIO, metaclass=_FileIOType):  # type: ignore[misc]
    """``io.FileIO`` that reports the descriptor it opened, like ``open()`` does."""

    def __init__(
        self, file: Any, mode: str = "r", closefd: bool = True, opener: Any = None
    ) -> None:
        file = path_arg(file)
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

_FOLLOWING = ("chmod", "chown", "utime", "truncate", "setxattr", "removexattr")
_NOT_FOLLOWING = ("mkdir", "rmdir", "remove", "unlink", "lchown")


def _chdir_before(notice: Callable[[bool], None]) -> Callable[..., Call]:
    """The ``_before`` of ``os.chdir`` and ``os.fchdir``: the kept working directory is
    dropped before the call and again after it (see ``workdir``)."""

    def after(result: Any, error: BaseException | None) -> Any:
        notice(True)
        return result

    def before(*args: Any, **kwargs: Any) -> Call:
        notice(False)
        return (None, args, kwargs, after)

    return before


def install(workdir: WorkingDirectory, sealed_globals: dict[str, object]) -> None:
    """Replace the file functions in ``os``, ``posix``, ``io`` and ``builtins``.

    ``posix`` is patched too: the import system calls ``posix.stat`` and
    ``posix.listdir`` directly. ``sealed_globals`` are the globals of the sealed
    functions, which the integrity guard watches.
    """
    global _pinner

    def wrap(original: Callable[..., Any], before: Callable[..., Call]) -> Any:
        return sealed_wrapper(original, before, sealed_globals)

    def put(name: str, wrapper: Any) -> None:
        setattr(posix, name, wrapper)
        setattr(os, name, wrapper)

    pinner = _pinner = Pinner()
    hidden: dict[str, object] = {"_workdir": workdir}
    known: Any = sealed_function(
        KNOWN_SOURCE, (), sealed_globals, "<pysandboxes sealed call>", hidden
    )
    notice: Any = sealed_function(
        NOTICE_SOURCE, (), sealed_globals, "<pysandboxes sealed call>", hidden
    )
    judged: dict[str, Any] = {}
    for name in _METADATA:
        original = getattr(posix, name, None)
        if original is not None:
            follow = name not in _NO_FOLLOW
            judged[name] = seen_look(
                original, _metadata(name, known), sealed_globals, workdir, follow
            )
    judged["open"] = wrap(posix.open, _os_open_before(pinner))
    pinner.bind(judged["open"], judged["readlink"])
    for name in _CREATING:
        original = getattr(posix, name, None)
        if original is not None:
            judged[name] = wrap(original, _creating(name, pinner))
    for name in (*_FOLLOWING, *_NOT_FOLLOWING):
        original = getattr(posix, name, None)
        if original is not None:
            judged[name] = wrap(original, changes_one_path(pinner, follows=name in _FOLLOWING))
    for name in ("rename", "replace", "link"):
        judged[name] = wrap(getattr(posix, name), changes_two_paths(pinner, link=name == "link"))
    judged["symlink"] = wrap(posix.symlink, symlink(pinner))
    for name in ("chdir", "fchdir"):
        judged[name] = wrap(getattr(posix, name), _chdir_before(notice))
    judged["listdir"] = seen_look(
        posix.listdir, listdir_before(known), sealed_globals, workdir, LISTED
    )
    judged["scandir"] = wrap(posix.scandir, scandir_before(judged["stat"]))
    for name, wrapper in judged.items():
        put(name, wrapper)
    opener = seen_open(builtins.open, _open_before(pinner, known), sealed_globals, workdir, _READ)
    builtins.open = opener
    io.open = opener
    io.FileIO = FileIO  # type: ignore[misc]
