"""The wrappers that turn what a prompt allowed into the normal return value.

The ``Asking`` enforcer (``_inside.asking``) asks for a refused access; when the trusted
side performed it, the guard's refusal is a ``Granted``, which the wrappers installed
here (``install_grants``) catch and turn into what the original function returns:

- ``open``, ``io.open``, ``os.open``: a file object (or descriptor) on the descriptor
  handed over, named as the program named it;
- ``socket.connect``: the program's own socket, connected on the connection made;
- ``os.listdir``: the names sent; ``os.scandir``: entries (``AskedEntry``) with the
  names, their types and inodes, whose ``stat()`` is the judged ``os.stat``;
- ``os.stat``, ``os.lstat``: an ``os.stat_result`` of the fields sent;
- ``os.remove``, ``os.unlink``, ``os.rmdir``, ``os.mkdir``, ``os.rename``,
  ``os.replace``: ``None``, the change made by the trusted side;
- in partial mode, a read of a variable the sandbox lacks (``os.environ[name]``,
  ``.get``, ``os.getenv``): its value, when the program's own code reads it.

Only ``os``'s names are wrapped for the looks and changes, not ``posix``'s: the import
system calls ``posix`` directly, and its probes of hidden places are refused unasked,
as before. Each wrapper converts its path once (``path_arg``) and passes the converted
value on, so the guard judges what the request names.
"""

from __future__ import annotations

import os
import posixpath
import socket
from _thread import get_ident
from stat import S_ISDIR, S_ISREG

from pysandboxes._inside.asking import INTENTS, Asking, Granted
from pysandboxes._inside.guards.listings import (
    _Entries,  # pyright: ignore[reportPrivateUsage]
    path_arg,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: A listing's entry types, as the trusted side sends them.
_DIR, _FILE, _LINK = "d", "f", "l"


def install_grants(asking: Asking, environment: bool = False) -> None:
    """Wrap the judged functions (see module docs). Installed after the file wrappers,
    before the hook: they hold nothing the program could not reach anyway (the judged
    functions, the public ``_io.open``). ``environment``: partial mode, whose trusted
    side has the variables' values."""
    import _io
    import builtins
    import io
    import posix

    from pysandboxes._inside.guards.pinned import open_flags

    judged_open, judged_os_open, raw_open = builtins.open, posix.open, _io.open
    raw_connect = socket.socket.connect
    intents = INTENTS

    def opened(file: Any, mode: Any = "r", *args: Any, **kwargs: Any) -> Any:
        thread = get_ident()
        before = intents.get(thread)
        intents[thread] = ("open", open_flags(mode) if type(mode) is str else 0)
        try:
            return judged_open(file, mode, *args, **kwargs)
        except Granted as granted:
            fd = asking.take(granted)
            kwargs.pop("opener", None)
            kwargs["closefd"] = True
            try:
                handle = raw_open(fd, mode, *args[:4], **kwargs)
            except BaseException:
                os.close(fd)
                raise
            raw: Any = getattr(getattr(handle, "buffer", handle), "raw", handle)
            try:
                raw.name = file  # as open() names it
            except (AttributeError, TypeError):
                pass
            return handle
        finally:
            _restore(thread, before)

    def os_opened(path: Any, flags: Any, mode: Any = 0o777, **kwargs: Any) -> Any:
        thread = get_ident()
        before = intents.get(thread)
        intents[thread] = ("open", flags if type(flags) is int else 0)
        try:
            return judged_os_open(path, flags, mode, **kwargs)
        except Granted as granted:
            return asking.take(granted)
        finally:
            _restore(thread, before)

    def connect(self: Any, address: Any) -> None:
        thread = get_ident()
        before = intents.get(thread)
        intents[thread] = ("connect", self.fileno())
        try:
            return raw_connect(self, address)
        except Granted as granted:
            if granted.fd != -1:
                raise
            return None
        finally:
            _restore(thread, before)

    for made, like in ((opened, judged_open), (os_opened, judged_os_open)):
        made.__name__, made.__qualname__ = like.__name__, like.__qualname__
        made.__doc__ = like.__doc__
    opened.__module__ = judged_open.__module__
    builtins.open = io.open = opened
    posix.open = os.open = os_opened
    socket.socket.connect = connect  # type: ignore[method-assign]
    _wrap_looks()
    _wrap_changes()
    if environment:
        ask_environ(asking)


def _granting(
    original: Callable[..., Any],
    intent: Callable[[tuple[Any, ...], dict[str, Any]], tuple[Any, ...] | None],
    done: Callable[[Granted, tuple[Any, ...]], Any],
    paths: int = 1,
) -> Callable[..., Any]:
    """``original`` with the intent ``intent`` makes of its arguments (the first
    ``paths`` converted) set while it runs; a ``Granted`` from it is returned as ``done``
    makes it."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if args:
            args = (*(path_arg(arg) for arg in args[:paths]), *args[paths:])
        thread = get_ident()
        before = INTENTS.get(thread)
        said = intent(args, kwargs)
        if said is not None:
            INTENTS[thread] = said
        try:
            return original(*args, **kwargs)
        except Granted as granted:
            if said is None or granted.fd != -1:
                raise
            return done(granted, args)
        finally:
            _restore(thread, before)

    wrapper.__name__ = wrapper.__qualname__ = original.__name__
    wrapper.__doc__ = original.__doc__
    wrapper.__module__ = "posix"
    return wrapper


def _wrap_looks() -> None:
    judged_stat = os.stat

    def listed(granted: Granted, args: tuple[Any, ...]) -> list[Any]:
        entries: list[tuple[str, str, int]] = granted.value  # type: ignore[assignment]
        if args and type(args[0]) is bytes:
            return [os.fsencode(name) for name, _, _ in entries]
        return [name for name, _, _ in entries]

    def scanned(granted: Granted, args: tuple[Any, ...]) -> Any:
        entries: list[tuple[str, str, int]] = granted.value  # type: ignore[assignment]
        base = args[0] if args and args[0] is not None else "."
        made = [AskedEntry(base, name, kind, inode, judged_stat) for name, kind, inode in entries]
        return _Entries(made)

    def stated(granted: Granted, args: tuple[Any, ...]) -> os.stat_result:
        return stat_result(granted.value)  # type: ignore[arg-type]

    def listing(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        return ("list", 0)

    def looking(follow: bool) -> Callable[[tuple[Any, ...], dict[str, Any]], tuple[Any, ...]]:
        def intent(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
            return ("stat", follow and kwargs.get("follow_symlinks", True) is True)

        return intent

    os.listdir = _granting(os.listdir, listing, listed)
    os.scandir = _granting(os.scandir, listing, scanned)
    os.stat = _granting(os.stat, looking(True), stated)
    os.lstat = _granting(os.lstat, looking(False), stated)


def _wrap_changes() -> None:
    def changed(granted: Granted, args: tuple[Any, ...]) -> None:
        return None

    def one(what: str) -> Callable[[tuple[Any, ...], dict[str, Any]], tuple[Any, ...] | None]:
        def intent(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
            if not args or kwargs.get("dir_fd") is not None:
                return None
            path = _absolute(args[0])
            mode = args[1] if len(args) > 1 else kwargs.get("mode", 0o777)
            if path is None or type(mode) is not int:
                return None
            return (what, path, mode)

        return intent

    def two(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
        if len(args) != 2 or kwargs:
            return None
        source, target = _absolute(args[0]), _absolute(args[1])
        if source is None or target is None:
            return None
        return ("rename", source, target)

    for name, what in (("remove", "delete"), ("unlink", "delete"), ("rmdir", "rmdir")):
        setattr(os, name, _granting(getattr(os, name), one(what), changed))
    os.mkdir = _granting(os.mkdir, one("mkdir"), changed)
    os.rename = _granting(os.rename, two, changed, paths=2)
    os.replace = _granting(os.replace, two, changed, paths=2)


def _absolute(path: object) -> str | None:
    """``path`` (converted) as the absolute path the trusted side is asked to change:
    ``None`` for a descriptor, or a name with ``..`` in it (which only the kernel can
    resolve)."""
    if type(path) is bytes:
        path = os.fsdecode(path)
    if type(path) is not str or not path or "\0" in path:
        return None
    text: str = path  # type: ignore[assignment]
    if ".." in text.split("/"):
        return None
    if not text.startswith("/"):
        text = f"{os.getcwd()}/{text}"
    return posixpath.normpath(text)


def stat_result(fields: tuple[int, ...]) -> os.stat_result:
    """An ``os.stat_result`` of the fields the trusted side sent (``asks.STAT_FIELDS``)."""
    mode, ino, dev, nlink, uid, gid, size, atime, mtime, ctime, blksize, blocks, rdev = fields
    seconds = [ns // 10**9 for ns in (atime, mtime, ctime)]
    floats = [ns // 10**9 + (ns % 10**9) * 1e-9 for ns in (atime, mtime, ctime)]
    head = (mode, ino, dev, nlink, uid, gid, size, *seconds, *floats, atime, mtime, ctime)
    return os.stat_result((*head, blksize, blocks, rdev))


class AskedEntry:
    """An entry of a listing the trusted side made: what ``os.DirEntry`` says, from the
    names, types and inodes sent. ``stat()`` and a link's ``is_dir()`` go through the
    judged ``os.stat`` (which may ask in turn)."""

    def __init__(
        self, base: Any, name: str, kind: str, inode: int, judged_stat: Callable[..., Any]
    ) -> None:
        self.name: Any = os.fsencode(name) if type(base) is bytes else name
        if type(base) is int:
            self.path: Any = self.name
        else:
            self.path = os.path.join(base, self.name)
        self._kind = kind
        self._inode = inode
        self._stat = judged_stat

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        return self._stat(self.path, follow_symlinks=bool(follow_symlinks))

    def _is(self, kind: str, test: Callable[[int], bool], follow_symlinks: bool) -> bool:
        if self._kind != _LINK or not follow_symlinks:
            return self._kind == kind
        try:
            return test(self.stat().st_mode)
        except OSError:
            return False

    def is_dir(self, *, follow_symlinks: bool = True) -> bool:
        return self._is(_DIR, S_ISDIR, follow_symlinks)

    def is_file(self, *, follow_symlinks: bool = True) -> bool:
        return self._is(_FILE, S_ISREG, follow_symlinks)

    def is_symlink(self) -> bool:
        return self._kind == _LINK

    def is_junction(self) -> bool:
        return False

    def inode(self) -> int:
        return self._inode

    def __fspath__(self) -> Any:
        return self.path

    def __repr__(self) -> str:
        return f"<DirEntry {self.name!r}>"


def ask_environ(asking: Asking) -> None:
    """Make a read of a variable the sandbox lacks ask the trusted side (partial mode):
    ``os.environ[name]``, ``.get`` and ``os.getenv``, when the program's own code reads
    it (not the standard library's look for an optional variable). ``in`` does not ask.
    The value is returned, never kept: each read asks (a ``RUN`` answer is not asked
    again). Names the program set or removed itself are its own."""
    import _collections_abc

    from pysandboxes._inside.guards.audit import current_frame

    environ: Any = os.environ
    base: Any = environ.__class__
    own: set[str] = set()
    stdlib = os.path.dirname(os.__file__) + "/"
    passing = (os.__file__, _collections_abc.__file__, __file__)

    def programs() -> bool:
        frame: Any = current_frame()
        while frame is not None and frame.f_code.co_filename in passing:
            frame = frame.f_back  # os.getenv, Mapping.get, this: the caller decides
        if frame is None:
            return False
        name: str = frame.f_code.co_filename
        return not (name.startswith(stdlib) and "-packages/" not in name)

    def getitem(self: Any, key: Any) -> Any:
        try:
            return base.__getitem__(self, key)
        except KeyError:
            if type(key) is not str or key in own or not key or "=" in key or not programs():
                raise
            value = asking.ask_env(key)
            if value is None:
                raise
            return value

    def contains(self: Any, key: Any) -> bool:
        try:
            base.__getitem__(self, key)
        except KeyError:
            return False
        return True

    def setitem(self: Any, key: Any, value: Any) -> None:
        if type(key) is str:
            own.add(key)
        base.__setitem__(self, key, value)

    def delitem(self: Any, key: Any) -> None:
        if type(key) is str:
            own.add(key)
        base.__delitem__(self, key)

    fields = {"__getitem__": getitem, "__contains__": contains, "__module__": base.__module__}
    fields.update({"__setitem__": setitem, "__delitem__": delitem})
    environ.__class__ = type(base.__name__, (base,), fields)


def _restore(thread: int, before: Any) -> None:
    if before is None:
        INTENTS.pop(thread, None)
    else:
        INTENTS[thread] = before
