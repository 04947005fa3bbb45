"""The file guard's judgement of looks at the namespace: a listing, a ``stat``-like look,
a change of working directory.

A directory above an exposure may be listed and looked at: the listing then shows only
the way to the exposures, which the rules say exist. A listing by descriptor is judged
on what the kernel says the descriptor is; one it cannot say is refused (fail closed).
"""

from __future__ import annotations

import os

from pysandboxes._inside.guards.listings import LISTED
from pysandboxes._inside.guards.paths import Unjudgeable
from pysandboxes._policy.model import Access

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pysandboxes._inside.enforce import Enforcer
    from pysandboxes._inside.guards.paths import Resolver
    from pysandboxes._inside.guards.workdir import WorkingDirectory
    from pysandboxes._policy.judge import FileJudge

_READ = Access.READ


class LookEvents:
    """The handlers of the events that look at the namespace (a base of ``FileGuard``)."""

    judge: FileJudge
    enforcer: Enforcer
    resolver: Resolver
    workdir: WorkingDirectory
    _walkways: bool
    _exposed_dirs: set[str]

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

    def unjudgeable(self, named: str, error: Unjudgeable, access: Access, api: str) -> str:
        raise NotImplementedError

    def _chdir_event(self, args: tuple[Any, ...]) -> None:
        self.workdir.chdir_event()
        self.check(args[0], _READ, "os.chdir")

    def _list(self, path: object, api: str) -> None:
        self.check(path, _READ, api, metadata=self._walkways)

    def _metadata_event(self, args: tuple[Any, ...]) -> None:
        api, path, dir_fd, follow = args
        self.check(path, _READ, api, dir_fd, follow=follow is True, metadata=True)

    def _listing_event(self, args: tuple[Any, ...]) -> None:
        """Remove the hidden entries from a listing, in place (the list is the wrapper's)."""
        path, names = args
        if type(names) is not list or not self.enforcer.hides_entries:
            return
        if type(path) is int:
            try:
                base = self.resolver.fd_path(path)
            except Unjudgeable as error:
                self.unjudgeable(f"<descriptor {path}>", error, _READ, "os.listdir")
                return
        else:
            # Judged already by the listing's own event: a cached answer, usually.
            base = self.check("." if path is None else path, _READ, "os.listdir", metadata=True)
        if base is None:
            return
        judge = self.judge
        if base in self._exposed_dirs or (
            not judge.has_ignores and judge.judge(base, _READ).allowed
        ):
            # Every entry of an exposed directory is exposed by the same rule. The rules
            # alone decide this, and they do not change: kept for good, by real path.
            if len(self._exposed_dirs) >= 4096:
                self._exposed_dirs.clear()
            self._exposed_dirs.add(base)
            seen = self.workdir.seen
            if type(path) is str and (path, True) in seen.names:
                # The name was judged in a stable part: it will lead here again, and the
                # wrapper may skip this look (in the same Seen: a chdir makes a new one).
                seen.names.add((path, LISTED))
            return
        prefix = base.rstrip("/")
        entries: list[object] = names  # type: ignore[assignment]
        kept: list[object] = []
        for name in entries:
            if type(name) is str or type(name) is bytes:
                real = f"{prefix}/{os.fsdecode(name)}"  # type: ignore[arg-type]
                if judge.judge(real, _READ).allowed or judge.leads_to_exposure(real):
                    kept.append(name)
        entries[:] = kept
