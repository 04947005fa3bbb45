"""Wrappers for the file functions that raise no audit event, or need a second look.

``stat``, ``lstat``, ``access``, ``readlink``, ``statvfs``, ``pathconf``, ``mkfifo`` and
``mknod`` have no audit event, so they are wrapped; a hidden path then looks absent, as it
would without the file. ``listdir`` and ``scandir`` leave out hidden entries. ``open`` is
checked again on the descriptor it returns: the kernel's answer to "what did I open?".

Each wrapper converts its path argument once, so a path object cannot answer differently
to the guard and to the system call; the original is captured in a closure and never
exposed through ``__wrapped__``.
"""

from __future__ import annotations

import builtins
import io
import os
import posix

from pysandboxes._policy.model import Access

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import TracebackType
    from typing import Any

    from .files import FileGuard

_NO_FOLLOW_DEFAULT = {"lstat"}
_METADATA = ("stat", "lstat", "access", "readlink", "statvfs", "pathconf")
_CREATING = ("mkfifo", "mknod")


def _dress(wrapper: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    """Make the wrapper look like the original to help(), IPython and inspect."""
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


def _metadata(guard: FileGuard, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    follow_default = name not in _NO_FOLLOW_DEFAULT
    api = f"os.{name}"

    def wrapper(path: Any, *args: Any, **kwargs: Any) -> Any:
        path = _path_arg(path)
        follow = kwargs.get("follow_symlinks", follow_default) and name != "readlink"
        guard.check(
            path, Access.READ, api, kwargs.get("dir_fd"), follow=bool(follow), metadata=True
        )
        return original(path, *args, **kwargs)

    return _dress(wrapper, original)


def _creating(guard: FileGuard, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    api = f"os.{name}"

    def wrapper(path: Any, *args: Any, **kwargs: Any) -> Any:
        path = _path_arg(path)
        guard.check(path, Access.CREATE, api, kwargs.get("dir_fd"), follow=False)
        return original(path, *args, **kwargs)

    return _dress(wrapper, original)


class _FilteredScandir:
    """``os.scandir`` without the hidden entries, still a context manager."""

    def __init__(self, entries: Any, keep: Callable[[str], bool]) -> None:
        self._entries = entries
        self._keep = keep

    def __iter__(self) -> Iterator[os.DirEntry[Any]]:
        return self

    def __next__(self) -> os.DirEntry[Any]:
        while True:
            entry = next(self._entries)
            if self._keep(os.fsdecode(entry.name)):
                return entry

    def close(self) -> None:
        self._entries.close()

    def __enter__(self) -> _FilteredScandir:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _listing(guard: FileGuard, path: object) -> Callable[[str], bool] | None:
    """A predicate for the entries of ``path`` that may be shown, or ``None`` for all."""
    if not guard.judge.has_ignores:
        return None  # every entry of an exposed directory is exposed by the same rule
    if type(path) is int:
        base = guard.resolver.fd_path(path)
    else:
        absolute = guard.resolver.absolute(os.fsdecode(path or "."))  # type: ignore[arg-type]
        base = guard.resolver.real(absolute) if absolute is not None else None
    if base is None:
        return None
    prefix = base.rstrip("/")

    def keep(name: str) -> bool:
        real = f"{prefix}/{name}"
        return guard.judge.judge(real, Access.READ).allowed or guard.judge.leads_to_exposure(real)

    return keep


def _listdir(guard: FileGuard, original: Callable[..., Any]) -> Callable[..., Any]:
    def listdir(path: Any = None) -> Any:
        path = _path_arg(path)
        names = original(path) if path is not None else original()
        keep = _listing(guard, path)
        if keep is None:
            return names
        return [n for n in names if keep(os.fsdecode(n))]

    return _dress(listdir, original)


def _scandir(guard: FileGuard, original: Callable[..., Any]) -> Callable[..., Any]:
    def scandir(path: Any = None) -> Any:
        path = _path_arg(path)
        entries = original(path) if path is not None else original()
        keep = _listing(guard, path)
        return entries if keep is None else _FilteredScandir(entries, keep)

    return _dress(scandir, original)


def _open(guard: FileGuard, original: Callable[..., Any]) -> Callable[..., Any]:
    def open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        file = _path_arg(file)
        handle = original(file, mode, *args, **kwargs)
        if type(file) is not int:
            writes = type(mode) is str and any(c in mode for c in "wax+")
            access = Access.WRITE if writes else Access.READ
            named = os.fsdecode(file)
            if guard.settled(named, access):
                return handle  # nothing on the way could be swapped: the check stands
            try:
                guard.check_fd(handle.fileno(), access, named, "open")
            except BaseException:
                handle.close()
                raise
        return handle

    return _dress(open, original)


def install(guard: FileGuard) -> None:
    """Replace the file functions in ``os``, ``posix``, ``io`` and ``builtins``.

    ``posix`` is patched too: the import system calls ``posix.stat`` and
    ``posix.listdir`` directly.
    """
    for name in (*_METADATA, *_CREATING):
        original = getattr(posix, name, None)
        if original is None:
            continue
        factory = _metadata if name in _METADATA else _creating
        wrapper = factory(guard, name, original)
        setattr(posix, name, wrapper)
        setattr(os, name, wrapper)
    for name, factory in (("listdir", _listdir), ("scandir", _scandir)):
        wrapper = factory(guard, getattr(posix, name))
        setattr(posix, name, wrapper)
        setattr(os, name, wrapper)
    opener = _open(guard, builtins.open)
    builtins.open = opener
    io.open = opener
