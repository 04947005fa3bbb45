"""Mounts in the sandbox's own mount namespace: rule files bound read-only, a fresh ``/proc``.

Landlock only adds rights: inside a directory it lets the sandbox write, it cannot keep one
file (the rule file) read-only. A bind mount of the file onto itself, remounted read-only,
can: a write fails with ``EROFS``, and removing or renaming it fails with ``EBUSY`` (it is a
mount point), whatever the code, native or not. The mounts live in a mount namespace made
for the sandbox (``namespaces.enter(NEWNS)``), so the host never sees them, and the
sandbox cannot undo them: it keeps no capability, and Landlock refuses every mount change
to a process it confines.

Call with the capabilities the new namespace gave, before dropping them.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

_MS_RDONLY = 0x1
_MS_NOSUID = 0x2
_MS_NODEV = 0x4
_MS_NOEXEC = 0x8
_MS_REMOUNT = 0x20
_MS_NOATIME = 0x400
_MS_NODIRATIME = 0x800
_MS_BIND = 0x1000
_MS_REC = 0x4000
_MS_PRIVATE = 0x40000
_MS_RELATIME = 0x200000
#: Flags of the mount below that a remount in a user namespace must keep (else EPERM).
_LOCKED = (
    (os.ST_NOSUID, _MS_NOSUID),
    (os.ST_NODEV, _MS_NODEV),
    (os.ST_NOEXEC, _MS_NOEXEC),
    (os.ST_NOATIME, _MS_NOATIME),
    (os.ST_NODIRATIME, _MS_NODIRATIME),
    (os.ST_RELATIME, _MS_RELATIME),
)


def keep_private() -> None:
    """Make every mount of this namespace private: nothing mounted here reaches the host.

    Raises:
        OSError: the kernel refused.
    """
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)


def mask(paths: tuple[str, ...]) -> list[tuple[str, str]]:
    """Cover each path: a file by ``/dev/null``, a directory by an empty read-only
    ``tmpfs``, both read-only. Returns those that could not be, with why (a path that
    vanished meanwhile is skipped)."""

    def cover(path: str) -> None:
        if os.path.isdir(path) and not os.path.islink(path):
            flags = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
            _mount("tmpfs", path, "tmpfs", flags, "size=4k,mode=0555")
        elif os.path.isfile(path) and not os.path.islink(path):
            _mount("/dev/null", path, None, _MS_BIND)
            _mount(None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _kept(path))

    return _each(paths, cover)


def _each(paths: tuple[str, ...], mount_one: Callable[[str], None]) -> list[tuple[str, str]]:
    """``mount_one`` on each path; those that failed, with why (a vanished one skipped)."""
    failed: list[tuple[str, str]] = []
    for path in paths:
        try:
            mount_one(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            failed.append((path, exc.strerror or str(exc)))
    return failed


def _kept(path: str) -> int:
    flags = os.statvfs(path).f_flag
    return sum(mount_flag for flag, mount_flag in _LOCKED if flags & flag)


def keep_in_place(paths: tuple[str, ...]) -> list[tuple[str, str]]:
    """Bind each directory of ``paths`` onto itself, as writable as it was: a mount point
    cannot be renamed or removed. Returns those that could not be, with why."""
    return _each(paths, lambda path: _mount(path, path, None, _MS_BIND))


def keep_read_only(paths: tuple[str, ...]) -> list[tuple[str, str]]:
    """Bind each file of ``paths`` read-only onto itself; return those that could not be,
    with why (a file that vanished meanwhile is skipped)."""
    failed: list[tuple[str, str]] = []
    for path in paths:
        try:
            _mount(path, path, None, _MS_BIND)
        except FileNotFoundError:
            continue
        except OSError as exc:
            failed.append((path, exc.strerror or str(exc)))
            continue
        try:
            flags = os.statvfs(path).f_flag
            kept = sum(mount_flag for flag, mount_flag in _LOCKED if flags & flag)
            _mount(None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | kept)
        except OSError as exc:
            _unmount(path)  # a writable bind is no protection, and not what was asked
            failed.append((path, exc.strerror or str(exc)))
    return failed


def mount_proc() -> bool:
    """Mount a ``/proc`` of this process's pid namespace over the host's; ``False`` when
    the kernel refuses (a container hiding parts of its ``/proc`` forbids it)."""
    try:
        _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    except OSError:
        return False
    return True


def _mount(
    source: str | None, target: str, kind: str | None, flags: int, data: str | None = None
) -> None:
    from pysandboxes._kernel import libc

    encoded = [os.fsencode(v) if v is not None else None for v in (source, target, kind, data)]
    if libc.call("mount", encoded[0], encoded[1], encoded[2], flags, encoded[3]) != 0:
        code = libc.errno()
        raise OSError(code, os.strerror(code), target)


def _unmount(target: str) -> None:
    from pysandboxes._kernel import libc

    libc.call("umount2", os.fsencode(target), 2)  # MNT_DETACH
