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
    text_signature = getattr(original, "__text_signature__", None)
    if text_signature:
        wrapper.__text_signature__ = text_signature  # type: ignore[attr-defined]
    return wrapper


def _path_arg(value: object) -> object:
    """Convert a path-like object once; the same value then goes to guard and call."""
    if isinstance(value, (str, bytes, int)) or value is None:
        return value
    return os.fspath(value)  # type: ignore[arg-type]


def _metadata(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    api = f"os.{name}"
    follow_default = name not in _NO_FOLLOW
    audit = sys.audit

    def wrapper(path: Any, *args: Any, **kwargs: Any) -> Any:
        path = _path_arg(path)
        follow = bool(kwargs.get("follow_symlinks", follow_default)) and name != "readlink"
        audit("pysandboxes.metadata", api, path, kwargs.get("dir_fd"), follow)
        return original(path, *args, **kwargs)

    return _dress(wrapper, original)


def _creating(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    api = f"os.{name}"
    audit = sys.audit

    def wrapper(path: Any, *args: Any, **kwargs: Any) -> Any:
        path = _path_arg(path)
        audit("pysandboxes.create", api, path, kwargs.get("dir_fd"))
        return original(path, *args, **kwargs)

    return _dress(wrapper, original)


class _Entries:
    """What ``os.scandir`` returns, without the hidden entries; still a context manager."""

    def __init__(self, entries: list[os.DirEntry[Any]]) -> None:
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
        return _Entries(entries)

    return _dress(scandir, original)


def _open(original: Callable[..., Any]) -> Callable[..., Any]:
    audit = sys.audit

    def open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        file = _path_arg(file)
        handle = original(file, mode, *args, **kwargs)
        if type(file) is not int:
            writes = type(mode) is str and not _WRITE_MODES.isdisjoint(mode)
            try:
                audit("pysandboxes.opened", handle.fileno(), os.fsdecode(file), writes)
            except BaseException:
                handle.close()
                raise
        return handle

    return _dress(open, original)


def install() -> None:
    """Replace the file functions in ``os``, ``posix``, ``io`` and ``builtins``.

    ``posix`` is patched too: the import system calls ``posix.stat`` and
    ``posix.listdir`` directly.
    """
    for name in (*_METADATA, *_CREATING):
        original = getattr(posix, name, None)
        if original is None:
            continue
        wrapper = (_metadata if name in _METADATA else _creating)(name, original)
        setattr(posix, name, wrapper)
        setattr(os, name, wrapper)
    for name, factory in (("listdir", _listdir), ("scandir", _scandir)):
        wrapper = factory(getattr(posix, name))
        setattr(posix, name, wrapper)
        setattr(os, name, wrapper)
    opener = _open(builtins.open)
    builtins.open = opener
    io.open = opener
