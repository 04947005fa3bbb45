"""The file guard: every file API judged by the same verdict, on the real path.

Most file APIs raise a PEP 578 audit event after converting their path argument and
before the system call; the audit hook hands those to ``FileGuard.on_event``. The few
without an event (the ``stat`` family, ``readlink``, ``mkfifo``...) are wrapped. Listings
leave out what is hidden, and ``open`` is re-checked on the file descriptor it returns,
so swapping a directory while a path is checked cannot let a read through.
"""

from __future__ import annotations

import os

from pysandboxes._inside.enforce import FileAccess
from pysandboxes._inside.guards.filechanges import ChangeEvents, descriptor
from pysandboxes._inside.guards.filelooks import LookEvents
from pysandboxes._inside.guards.pathargs import UNKNOWABLE, exact_path, shm_file
from pysandboxes._inside.guards.paths import Unjudgeable, is_magic
from pysandboxes._inside.guards.pinned import is_pinned
from pysandboxes._policy.model import Access, Verdict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from pysandboxes._inside.decisions import DecisionLog
    from pysandboxes._inside.enforce import Enforcer
    from pysandboxes._inside.guards.paths import Resolver
    from pysandboxes._inside.guards.workdir import Seen
    from pysandboxes._policy.judge import FileJudge

_READ = Access.READ
_WRITE = Access.WRITE
_CREATE = Access.CREATE
_DELETE = Access.DELETE
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

#: The ``fix`` of a refusal for a change that bypassed the pinning wrappers.
UNPINNED = "<unpinned>"
#: The ``fix`` of a refusal of a relative name given to the unwrapped ``os.open``.
UNSEEN_DIR_FD = "<unseen-dir-fd>"


class FileGuard(ChangeEvents, LookEvents):
    """Judges file accesses and reports refusals to the enforcer."""

    def __init__(
        self, judge: FileJudge, enforcer: Enforcer, resolver: Resolver, *, walkways: bool = True
    ) -> None:
        self.judge = judge
        self.enforcer = enforcer
        self.resolver = resolver
        self._learned = enforcer.learned  # learning: reads recorded already, else empty
        self._learning = not isinstance(self._learned, frozenset)  # (see _learned_again)
        self._resolved: dict[tuple[str, bool], str] = {}
        # Whether a directory above an exposure may be listed (its way to the exposures shown):
        # not where Landlock refuses it, so both layers agree and the Python layer's names the rule.
        self._walkways = walkways
        # Verdicts reached in stable areas: (absolute, access, follow, metadata) -> real.
        self._settled: dict[tuple[str, Access, bool, bool], str] = {}
        #: The working directory and the names the wrappers may skip judging again, shared
        #: with them (see ``workdir``). It grants nothing the wrappers' originals do not.
        self.workdir = resolver.workdir
        resolver.workdir.keep = self._keeps_workdir
        # Real directories whose every entry the rules expose (no ignore= rule).
        self._exposed_dirs: set[str] = set()
        #: The decision log, when allowed accesses are logged too (``audit-log=``).
        self.log: DecisionLog | None = None
        self._events: Mapping[str, Callable[[tuple[Any, ...]], None]] = {
            "open": self._open_event,
            # A directory above an exposure may be listed: the listing then shows only the
            # way to the exposures (see _listing_event).
            "os.listdir": lambda a: self._list(a[0], "os.listdir"),
            "os.scandir": lambda a: self._list(a[0], "os.scandir"),
            "os.chdir": self._chdir_event,
            "os.remove": lambda a: self._path(a[0], _DELETE, "os.remove", a[1], follow=False),
            "os.rmdir": lambda a: self._path(a[0], _DELETE, "os.rmdir", a[1], follow=False),
            "os.mkdir": lambda a: self._mkdir(a[0], a[2]),
            "os.rename": self._rename_event,
            "os.link": self._link_event,
            "os.symlink": self._symlink_event,
            "os.chmod": lambda a: self._path(a[0], _WRITE, "os.chmod", a[2]),
            "os.chown": lambda a: self._path(a[0], _WRITE, "os.chown", a[3]),
            "os.chflags": lambda a: self._path(a[0], _WRITE, "os.chflags"),
            "os.lchflags": lambda a: self._path(a[0], _WRITE, "os.lchflags", follow=False),
            "os.truncate": lambda a: self._path(a[0], _WRITE, "os.truncate"),
            "os.utime": lambda a: self._path(a[0], _WRITE, "os.utime", a[3]),
            "os.getxattr": lambda a: self._path(a[0], _READ, "os.getxattr"),
            "os.listxattr": lambda a: self._path(a[0], _READ, "os.listxattr"),
            "os.setxattr": lambda a: self._path(a[0], _WRITE, "os.setxattr"),
            "os.removexattr": lambda a: self._path(a[0], _WRITE, "os.removexattr"),
            # shutil's events come before the os calls that do the work (each judged too):
            # they refuse early, before a half-done copy or removal.
            "shutil.rmtree": self._rmtree_event,
            "shutil.copyfile": self._copy_event,
            "sqlite3.connect": self._sqlite,
            "socket.bind": lambda a: self._unix(a, "socket.bind"),
            "socket.connect": lambda a: self._unix(a, "socket.connect"),
            "socket.sendto": lambda a: self._unix(a, "socket.sendto"),
            "socket.sendmsg": lambda a: self._unix(a, "socket.sendmsg"),
            # Raised by the wrappers of the functions CPython does not audit:
            "pysandboxes.metadata": self._metadata_event,
            "pysandboxes.create": lambda a: self._path(a[1], _CREATE, a[0], a[2], follow=False),
            "pysandboxes.listing": self._listing_event,
            "pysandboxes.opened": self._opened_event,
            # Raised by the judged copies of _posixshmem's functions (calls.py), which
            # CPython does not report: POSIX shared memory is a file of /dev/shm.
            "pysandboxes.shm": lambda a: self._named(shm_file(a), a[0], follow=False),
        }

    @property
    def events(self) -> Mapping[str, Callable[[tuple[Any, ...]], None]]:
        """Audit events this guard judges, with their handlers."""
        return self._events

    # -- the verdict -------------------------------------------------------------------

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
        """Judge ``access`` to ``path``; return the real path, or refuse.

        File descriptors are not judged: they were, when opened. ``metadata`` marks a
        ``stat``-like look, which also sees the directories leading to an exposure.
        """
        relative = None  # names judged against the kept working directory, if kept
        if type(path) is str and dir_fd is None:
            # The common case first: an exact string, no descriptor.
            named, base = path, None
            if path[:1] == "/":
                absolute = path
            else:
                cwd, relative = self.workdir.current()
                absolute = f"{cwd}/{path}"
        else:
            if path is None:
                return None
            if type(path) is int:
                if access.modifies:
                    # fchmod, futimes, fsetxattr... change what the descriptor names: judged
                    # on what it names, since it may have been opened for reading only.
                    self.check_fd(path, access, f"<descriptor {path}>", api)
                return None
            named = exact_path(path)
            if named is None:
                return None
            if named is UNKNOWABLE:
                self.enforcer.refuse_file(
                    FileAccess(f"<{type(path).__name__} object>", UNKNOWABLE, access, api),
                    Verdict(False, None, hidden=True),
                )
                return None
            dir_fd = descriptor(dir_fd)
            base = dir_fd if type(dir_fd) is int and dir_fd >= 0 else None
            try:
                absolute = self.resolver.absolute(named, base)
            except Unjudgeable as error:
                return self.unjudgeable(named, error, access, api)
            if absolute is None:
                absolute = named  # a dir_fd without a path: judged as named, hence hidden
        key = (absolute, access, follow, metadata)
        known = self._settled.get(key)
        if known is not None:
            self._skip_later(named, absolute, relative, base, access, follow, metadata)
            if self.log is not None:
                self.log.file(known, access, self.judge.exposure)
            return known
        if absolute.endswith("/"):
            follow = True  # "link/" names what the link points to, even for lstat
        if self._learning:
            known = self._learned_again(absolute, follow, access, api)
            if known is not None:
                self._skip_later(named, absolute, relative, base, access, follow, metadata)
                return known
        try:
            real, stable = self._resolve(absolute, follow)
        except Unjudgeable as error:
            return self.unjudgeable(named, error, access, api)
        if self._learned and (real, access, api) in self._learned:
            if self._learning and len(self._resolved) < 8192:
                self._resolved[(absolute, follow)] = real
            return real  # learning: recorded already, and judged the same every time
        verdict = self.judge.judge(real, access)
        if (
            verdict.allowed
            and access.modifies
            and not is_pinned(named)
            # shutil's events are advisory; sockets, sqlite and shared memory open in C,
            # with no pinned form, and so do semaphores (_multiprocessing)
            and not api.startswith(("socket.", "shutil.", "sqlite3.", "_posixshmem.", "_multip"))
            and self.judge.writable_directory(real.rpartition("/")[0] or "/")
        ):
            # In a writable directory a swap can redirect an unpinned change after this
            # check: only the pinned form (what the wrappers send) is accepted.
            self.enforcer.refuse_file(
                FileAccess(named, real, access, api), Verdict(False, None, fix=UNPINNED)
            )
            return real
        if verdict.allowed or (metadata and self.judge.leads_to_exposure(real)):
            # Cached only when the path went straight there: no link, no "..", nothing
            # writable or magic on the way that could later make it mean something else.
            if stable and real == absolute and not is_magic(real):
                if len(self._settled) >= 8192:
                    self.forget()
                self._settled[key] = real
                self._skip_later(named, absolute, relative, base, access, follow, metadata)
            if self.log is not None:
                self.log.file(real, access, self.judge.exposure)
            return real
        self.enforcer.refuse_file(FileAccess(named, real, access, api), verdict)
        return real

    def _learned_again(self, absolute: str, follow: bool, access: Access, api: str) -> str | None:
        """Learning: the real path of an access recorded already, if the name resolved to it
        since the program last changed anything (the wrappers then skip its repeats). A
        change through Python forgets that, so a swapped link is recorded anew; a swap
        by native code or another process is not seen (docs/learning.md)."""
        if access.modifies:
            self._resolved.clear()
            self.workdir.seen.names.clear()
            return None
        real = self._resolved.get((absolute, follow))
        if real is not None and (real, access, api) in self._learned:
            return real
        return None

    def _skip_later(
        self,
        named: str,
        absolute: str,
        relative: Seen | None,
        base: int | None,
        access: Access,
        follow: bool,
        metadata: bool,
    ) -> None:
        """Let the wrappers skip ``named``, judged in a stable area: a look (kind: ``follow``)
        or an open (kind: the access); only the forms they look up (no ``dir_fd``)."""
        if base is not None or not (follow or metadata) or not (access is _READ or not metadata):
            return
        kind = follow if metadata else access
        if named == absolute:
            self.workdir.seen.names.add((named, kind))
        elif relative is not None:
            relative.names.add((named, kind))

    def settled(self, path: str, access: Access) -> bool:
        """Whether ``path`` was judged in a stable area, where no re-check is needed."""
        if (path, access) in self.workdir.seen.names:
            return True
        absolute = self.resolver.absolute(path)
        return absolute is not None and (absolute, access, True, False) in self._settled

    def _resolve(self, absolute: str, follow: bool) -> tuple[str, bool]:
        """The real path of ``absolute``, and whether it lies in a stable area.

        In a stable area (see ``FileJudge.stable``) resolutions are cached; elsewhere the
        last component is looked at every time, since the sandbox may replace it.
        """
        resolver = self.resolver
        head, _, name = absolute.rstrip("/").rpartition("/") if absolute != "/" else ("", "", "")
        if name in ("", ".", ".."):
            real = resolver.self_proc(resolver.realpath(absolute))
        else:
            parent = resolver.real_dir(head or "/")
            real = f"{parent}/{name}" if parent != "/" else f"/{name}"
            if follow:
                rule = self.judge.exposure(real)
                cache = rule is not None and self.judge.stable(rule)
                if resolver.is_link(real, cache=cache):
                    real = resolver.realpath(real)
            real = resolver.self_proc(real)
        rule = self.judge.exposure(real)
        return real, rule is not None and self.judge.stable(rule)

    def check_fd(
        self, fd: int, access: Access, named: str, api: str, *, metadata: bool = False
    ) -> None:
        """Judge what an open file descriptor really is (after a possible race);
        ``metadata``: a handle (``O_PATH``), which may also lead to an exposure."""
        try:
            real = self.resolver.fd_path(fd)
        except Unjudgeable as error:
            self.unjudgeable(named, error, access, api)
            return
        if real is None or (self._learned and (real, access, api) in self._learned):
            return  # a pipe, socket or anonymous file: not a path; or learned already
        verdict = self.judge.judge(real, access)
        if not verdict.allowed and not (metadata and self.judge.leads_to_exposure(real)):
            self.enforcer.refuse_file(FileAccess(named, real, access, api), verdict)

    # -- audit events --------------------------------------------------------------------

    def forget(self) -> None:
        """The namespace may change: drop every cached resolution and verdict."""
        self.resolver.forget()
        self._settled.clear()
        self._resolved.clear()
        self.workdir.seen.names.clear()
        self.workdir.changed()

    def _keeps_workdir(self, directory: str) -> bool:
        """Whether the working directory may be kept: where no sandboxed process can
        rename it or a directory above it (see ``workdir``)."""
        if not directory.startswith("/") or is_magic(directory):
            return False  # "(unreachable)/...": outside the root
        rule = self.judge.exposure(directory)
        return rule is None or self.judge.stable(rule)

    def _opened_event(self, args: tuple[Any, ...]) -> None:
        """Judge what ``open`` really opened: the kernel's answer, after any race.

        ``(fd, name, writes[, handle_only])``: an ``O_PATH`` handle is judged like a
        ``stat``, as its ``open`` event was."""
        fd, named, writes = args[:3]
        name = exact_path(named)
        if type(fd) is not int or name is None:
            return
        if len(args) > 3 and args[3] is True:
            self.check_fd(fd, _READ, name, "open", metadata=True)
            return
        access = _WRITE if writes is True else _READ
        if not self.settled(name, access):
            self.check_fd(fd, access, name, "open")

    def _open_event(self, args: tuple[Any, ...]) -> None:
        path, mode, flags = args
        writes = (type(flags) is int and flags & _WRITE_FLAGS) or (
            type(mode) is str and ("w" in mode or "a" in mode or "x" in mode or "+" in mode)
        )
        if (
            type(path) is str
            and mode is not None  # os.open's event: a name may be relative to a dir_fd
            and self.log is None  # the decision log counts every access
            and (path, _WRITE if writes else _READ) in self.workdir.seen.names
        ):
            return  # judged in a stable part, against this working directory: the same
        if mode is None:
            # os.open's event carries no dir_fd: a relative name may be resolved from a
            # descriptor the guard cannot see. The wrapper passes absolute names only.
            named = exact_path(path)
            if type(named) is str and named is not UNKNOWABLE and not named.startswith("/"):
                access = _WRITE if writes else _READ
                report = FileAccess(named, named, access, "os.open")
                self.enforcer.refuse_file(report, Verdict(False, None, fix=UNSEEN_DIR_FD))
                return
        if type(flags) is int and flags & os.O_PATH:
            self.check(path, _READ, "open", metadata=True)  # a handle, not the contents
            return
        self.check(path, _WRITE if writes else _READ, "open")
