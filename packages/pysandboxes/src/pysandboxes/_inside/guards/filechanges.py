"""The file guard's judgement of changes to the namespace: a directory made, a name
renamed, linked or symlinked, a tree copied or removed, a file or socket made by C code.

Each names a path that may not exist yet. A change of names may change what other names
mean: the guard forgets its cached resolutions first, then judges the old and the new
name.
"""

from __future__ import annotations

from pysandboxes._inside.enforce import FileAccess
from pysandboxes._inside.guards.pathargs import (
    UNKNOWABLE,
    exact_path,
    sqlite_file,
    unix_socket_file,
)
from pysandboxes._inside.guards.paths import Unjudgeable
from pysandboxes._inside.guards.values import plain_int
from pysandboxes._policy.judge import EXPOSURE_ROOT, HOLDS_RULES, UNJUDGEABLE
from pysandboxes._policy.model import Access, Verdict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pysandboxes._inside.enforce import Enforcer
    from pysandboxes._inside.guards.paths import Resolver
    from pysandboxes._policy.judge import FileJudge

_READ = Access.READ
_WRITE = Access.WRITE
_CREATE = Access.CREATE
_DELETE = Access.DELETE


def descriptor(dir_fd: object) -> object:
    """A ``dir_fd`` as C reads it: an int subclass's own value."""
    number = plain_int(dir_fd)
    return dir_fd if number is None else number


class ChangeEvents:
    """The handlers of the events that change the namespace (a base of ``FileGuard``)."""

    judge: FileJudge
    enforcer: Enforcer
    resolver: Resolver

    def check(
        self,
        path: object,
        access: Access,
        api: str,
        dir_fd: object = None,
        *,
        follow: bool = True,
        metadata: bool = False,
    ) -> str | None:
        raise NotImplementedError

    def forget(self) -> None:
        raise NotImplementedError

    def unjudgeable(self, named: str, error: Unjudgeable, access: Access, api: str) -> str:
        """Refuse a name the guard cannot judge (fail closed); the path that failed.

        Where the rules refuse the part that failed anyway (another process's
        ``/proc/<pid>/root``), that verdict and its message stand; elsewhere the refusal
        says what could not be judged, which no rule can allow."""
        verdict = self.judge.judge(error.path, access) if error.path[:1] == "/" else None
        if verdict is None or verdict.allowed:
            verdict = Verdict(False, None, hidden=False, fix=UNJUDGEABLE + error.reason)
        self.enforcer.refuse_file(FileAccess(named, error.path, access, api), verdict)
        return error.path

    def _path(
        self, path: object, access: Access, api: str, dir_fd: object = None, *, follow: bool = True
    ) -> None:
        if access is _DELETE or access is _CREATE:
            self.forget()
        self.check(path, access, api, dir_fd, follow=follow)

    def _mkdir(self, path: object, dir_fd: object) -> None:
        real = None
        try:
            self.check(path, _CREATE, "os.mkdir", dir_fd, follow=False)
        except OSError:
            named = exact_path(path)
            if named is not None:
                dir_fd = descriptor(dir_fd)
                base = dir_fd if type(dir_fd) is int else None
                try:
                    absolute = self.resolver.absolute(named, base)
                    real = self.resolver.real(absolute or named, follow=False)
                except Unjudgeable:
                    real = None  # refused already, with the reason
            # A directory that leads to an exposure exists, and the rules say so already:
            # report it as existing, which is what makes os.makedirs(exist_ok=True) work.
            if real is not None and self.judge.leads_to_exposure(real):
                raise FileExistsError(17, "File exists", named) from None
            raise

    def _rename_event(self, args: tuple[Any, ...]) -> None:
        src, dst, src_dir_fd, dst_dir_fd = args
        self.forget()
        source = self.check(src, _DELETE, "os.rename", src_dir_fd, follow=False)
        target = self._new_name(dst, "os.rename", dst_dir_fd)
        if source is None or target is None:
            return
        self._refuse_in_made_directory(target, dst, "os.rename")
        carried = self.judge.carries_ignored(source, target)
        if carried is not None:
            # Renamed, its files would no longer match the pattern: out of ignore=.
            verdict = Verdict(False, carried.origin, hidden=False, fix=HOLDS_RULES)
            report = FileAccess(exact_path(src) or source, source, _DELETE, "os.rename")
            self.enforcer.refuse_file(report, verdict)

    def _link_event(self, args: tuple[Any, ...]) -> None:
        src, dst, src_dir_fd, dst_dir_fd = args
        self.forget()
        # A hard link is another name for the same file: writing through it writes the
        # source, so the source must be writable, not only readable.
        self.check(src, _WRITE, "os.link", src_dir_fd)
        target = self._new_name(dst, "os.link", dst_dir_fd)
        self._refuse_in_made_directory(target, dst, "os.link")

    def _symlink_event(self, args: tuple[Any, ...]) -> None:
        self.forget()
        real = self._new_name(args[1], "os.symlink", args[2])
        replaced = self.judge.link_replaces(real) if real is not None else None
        if real is not None and replaced is not None:
            # A file rule lets its file be made and removed, never become a link: the
            # next run would grant the link's target.
            verdict = Verdict(False, replaced.origin, hidden=False, fix=EXPOSURE_ROOT)
            self.enforcer.refuse_file(
                FileAccess(exact_path(args[1]) or real, real, _CREATE, "os.symlink"), verdict
            )

    def _refuse_in_made_directory(self, real: str | None, named: object, api: str) -> None:
        """A directory to make (``expose-rw=./out/``) is made by mkdir: renamed or linked
        there, a link (or a folder holding one) would be what the next run's rule names."""
        replaced = self.judge.link_replaces(real) if real is not None else None
        if real is not None and replaced is not None and replaced.is_dir:
            verdict = Verdict(False, replaced.origin, hidden=False, fix=EXPOSURE_ROOT)
            self.enforcer.refuse_file(
                FileAccess(exact_path(named) or real, real, _CREATE, api), verdict
            )

    def _new_name(self, path: object, api: str, dir_fd: object) -> str | None:
        """A rename, link or symlink creates ``path``: also refused where it would bring
        a protected file into being (a directory renamed onto a missing include's)."""
        real = self.check(path, _CREATE, api, dir_fd, follow=False)
        if real is not None and self.judge.shadows_protected(real):
            self.enforcer.refuse_file(
                FileAccess(exact_path(path) or real, real, _CREATE, api),
                Verdict(False, None, hidden=False),
            )
        return real

    def _copy_event(self, args: tuple[Any, ...]) -> None:
        src, dst = args[0], args[1]
        if exact_path(src) is not UNKNOWABLE:
            self.check(src, _READ, "shutil.copyfile")
        if exact_path(dst) is not UNKNOWABLE:
            self.check(dst, _WRITE, "shutil.copyfile")

    def _rmtree_event(self, args: tuple[Any, ...]) -> None:
        if exact_path(args[0]) is not UNKNOWABLE:
            self._path(args[0], _DELETE, "shutil.rmtree", args[1])

    def _sqlite(self, args: tuple[Any, ...]) -> None:
        try:
            target = sqlite_file(args)
        except Unjudgeable as error:
            self.unjudgeable(error.path, error, _READ, "sqlite3.connect")
            return
        self._named(target, "sqlite3.connect")

    def _named(self, target: tuple[str, Access] | None, api: str, follow: bool = True) -> None:
        if target is not None:  # a file made by C code (SQLite, _posixshmem)
            self.check(target[0], target[1], api, follow=follow)

    def _unix(self, args: tuple[Any, ...], api: str) -> None:
        named = unix_socket_file(args)  # a socket file, which bind makes
        if named is UNKNOWABLE:
            shown = f"<{type(args[1]).__name__} object>"
            report = FileAccess(shown, UNKNOWABLE, _WRITE, api)
            self.enforcer.refuse_file(report, Verdict(False, None, hidden=True))
        elif named is not None:
            self.check(named, _WRITE, api)
