"""What ``os.listdir`` and ``os.scandir`` show: only the entries the rules expose.

The listing functions hand the names they got to the audit hook, which removes the hidden
ones in place. A symlink found by ``scandir`` is shown as a stand-in that asks the judged
``os.stat`` before following it: ``DirEntry.stat()`` follows links in C, with no audit
event, so the stand-in keeps no ``DirEntry`` the program could call.
"""

from __future__ import annotations

import os as _os
import sys
from os import fspath as _fspath
from stat import S_ISDIR, S_ISREG

from pysandboxes._inside.guards.askers import OWN_DIRS
from pysandboxes._inside.guards.audit import WRAPPER_FILE, current_frame
from pysandboxes._inside.guards.values import plain_bytes, plain_int, plain_str

TYPE_CHECKING = False
if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Iterator
    from types import TracebackType
    from typing import Any

    from pysandboxes._inside.guards.audit import Call


def path_arg(value: object) -> object:
    """Convert a path-like object once; the same value then goes to guard and call.

    Subclasses of str, bytes and int become exact copies of what C reads from them, so
    no method of the program's can answer the guard differently than the kernel.
    """
    kind = type(value)
    if kind is str or kind is bytes or kind is int or value is None:
        return value  # the common case, first: this runs for every file operation
    text, raw, number = plain_str(value), plain_bytes(value), plain_int(value)
    plain = text if text is not None else raw if raw is not None else number
    return plain if plain is not None else path_arg(_fspath(value))  # type: ignore[arg-type]


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

    Following it goes through the judged ``os.stat`` (named by ``dir_fd`` when the listing
    was of a descriptor), so a link to a hidden file looks dangling.
    """

    def __init__(self, entry: os.DirEntry[Any], dir_fd: int | None, judged_stat: Any) -> None:
        self.name = entry.name
        self.path = entry.path
        self._inode = entry.inode()
        self._dir_fd = dir_fd
        self._stat: Callable[..., os.stat_result] = judged_stat

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        follow = bool(follow_symlinks)
        if self._dir_fd is None:
            return self._stat(self.path, follow_symlinks=follow)
        return self._stat(self.name, dir_fd=self._dir_fd, follow_symlinks=follow)

    def _is(self, test: Callable[[int], bool], follow_symlinks: bool) -> bool:
        if not follow_symlinks:
            return False  # a link is neither a file nor a directory
        try:
            return test(self.stat().st_mode)
        except OSError:
            return False

    def is_symlink(self) -> bool:
        return True

    def is_dir(self, *, follow_symlinks: bool = True) -> bool:
        return self._is(S_ISDIR, follow_symlinks)

    def is_file(self, *, follow_symlinks: bool = True) -> bool:
        return self._is(S_ISREG, follow_symlinks)

    def inode(self) -> int:
        return self._inode

    def is_junction(self) -> bool:
        return False

    def __fspath__(self) -> Any:
        return self.path

    def __repr__(self) -> str:
        return f"<DirEntry {self.name!r}>"


#: The kind of a judged name (``workdir.Seen``) whose listing shows every entry.
LISTED = "listed"
#: Directories listed before the walls (the program's, an editable project's: see
#: ``_inside.listings``), by path, with what their listing shows: the entries the rules
#: expose. The import system's listing of one (``importlib.metadata``'s) is answered
#: from it rather than refused: the kernel may not list them, and their exposed entries
#: are no secret.
PRELISTED: dict[str, Callable[[], list[str]]] = {}


#: The code that finds modules and their metadata for the program (``importlib.metadata``
#: lists each directory of ``sys.path`` for ``*.dist-info``).
_IMPORT_SYSTEM = (
    *(
        f"{_os.path.dirname(_os.__file__)}/{name}"
        for name in ("importlib/", "pkgutil.py", "site.py")
    ),
    "<frozen importlib.",
    "<frozen zipimport",
)


def _asked_by_import_system() -> bool:
    """Whether the listing under way is the import system's, not the program's own: the
    program's own gets the refusal and the rule that would allow it. (A program naming
    its code after importlib gets no more than the exposed entries either way.)"""
    frame = current_frame()
    for _ in range(64):
        if frame is None:
            return False
        name = frame.f_code.co_filename
        if not name.startswith((*OWN_DIRS, WRAPPER_FILE, "<pysandboxes ")):
            return name.startswith(_IMPORT_SYSTEM)
        frame = frame.f_back
    return False


def _prelisted(path: object) -> Callable[[], list[str]] | None:
    if not PRELISTED or not (path is None or type(path) is str):
        return None
    from posix import getcwd
    from posixpath import join, normpath

    try:
        full = normpath(join(getcwd(), path or "."))
    except OSError:
        return None
    shown = PRELISTED.get(full)
    return shown if shown is not None and _asked_by_import_system() else None


def listdir_before(known: Callable[[str, object], bool]) -> Callable[..., Call]:
    """The ``_before`` of the ``os.listdir`` wrapper: the names go through the hook,
    unless the directory was found exposed whole in a part nothing can change."""
    audit = sys.audit

    def before(path: Any = None) -> Call:
        path = path_arg(path)
        if type(path) is str and known(path, LISTED):
            return (None, (path,), {}, None)
        shown = _prelisted(path)
        if shown is not None:
            return (shown, (), {}, None)

        def after(names: Any, error: BaseException | None) -> Any:
            if error is None:
                audit("pysandboxes.listing", path, names)
            return names

        return (None, (path,), {}, after)

    return before


def scandir_before(judged_stat: Callable[..., Any]) -> Callable[..., Call]:
    """The ``_before`` of the ``os.scandir`` wrapper (links judged by ``judged_stat``)."""
    audit = sys.audit

    def before(path: Any = None) -> Call:
        path = path_arg(path)

        def after(found: Any, error: BaseException | None) -> Any:
            if error is not None:
                return None
            with found:
                entries = list(found)
            names = [entry.name for entry in entries]
            audit("pysandboxes.listing", path, names)
            if len(names) != len(entries):
                kept = set(names)
                entries = [entry for entry in entries if entry.name in kept]
            dir_fd = path if type(path) is int else None
            shown: list[Any] = [
                _LinkEntry(entry, dir_fd, judged_stat) if entry.is_symlink() else entry
                for entry in entries
            ]
            return _Entries(shown)

        return (None, () if path is None else (path,), {}, after)

    return before
