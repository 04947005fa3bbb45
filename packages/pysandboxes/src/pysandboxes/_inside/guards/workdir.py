"""The working directory, known without a system call per access, and what was judged.

A relative path is judged as the kernel walks it: from the working directory. Asking the
kernel (``getcwd``) for every access costs as much as the access itself, so the directory
is kept between accesses, under two conditions that make a kept one never stale:

- **Every change is seen.** ``os.chdir`` and ``os.fchdir`` (the only Python routes; both
  raise the ``os.chdir`` audit event) go through wrappers that drop what is kept before
  the system call and again after it; while one is under way, every access asks the
  kernel, as without a cache. A ``chdir`` event with no wrapper call under way means
  the directory was changed some other way: nothing is kept again for the whole run.
  ``chdir(2)`` called by native code is not seen: native code can make any system call,
  and the Python layer does not claim to contain it (``docs/security.md``).
- **Its name cannot change under it.** Renaming the working directory or a directory
  above it changes the name ``getcwd`` gives without a ``chdir``, and another process of
  the sandbox (a child) may do so unseen. The directory is kept only where the rules let
  no sandboxed process rename anything on its way: in a read-only exposure with no
  read-write one above it, or where nothing is exposed (``FileJudge.stable``). Elsewhere
  it is asked for every access, as it was before.

Each change of what is kept makes a new ``Seen``: names judged earlier against another
directory are then never found, even when a late writer adds to the old one.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


class Seen:
    """Names whose verdict the wrappers may take as given, because nothing can change it:
    ``(path, follow)`` for a metadata look, ``(path, access)`` for an open. Absolute ones
    hold until the guard forgets; relative ones (never starting with "/") hold for one
    working directory: a change of directory makes a new ``Seen`` without them."""

    __slots__ = ("names",)

    def __init__(self, names: set[tuple[str, object]]) -> None:
        self.names = names


def _never(directory: str) -> bool:
    return False


class WorkingDirectory:
    """The working directory, kept where it cannot go stale (see the module docstring)."""

    def __init__(self, getcwd: Callable[[], str]) -> None:
        self._getcwd = getcwd
        #: Whether the directory may be kept there: set by the file guard from the rules.
        self.keep: Callable[[str], bool] = _never
        self._generation = 0
        self._known: tuple[int, str] | None = None
        self._moving = 0
        self._trusted = True
        #: What the wrappers may skip; a new one for every change of directory.
        self.seen = Seen(set())

    def current(self) -> tuple[str, Seen | None]:
        """The working directory, and the ``Seen`` that relative names judged against it
        go to (``None`` while it may not be kept: nothing relative is to be remembered)."""
        known = self._known
        seen = self.seen
        generation = self._generation
        if known is not None and known[0] == generation and not self._moving:
            return known[1], seen
        current = self._getcwd()
        if self._moving or not self._trusted or not self.keep(current):
            return current, None
        # Kept with the generation read before asking: a change that started meanwhile
        # has moved the generation on, and this stale pair is never used.
        self._known = (generation, current)
        return current, (seen if seen is self.seen else None)

    def changed(self) -> None:
        """The directory, or what a name in it means, may have changed: keep nothing."""
        self._generation += 1
        self._known = None
        # Only the absolute names stay (copied at once: another thread may be adding).
        names = self.seen.names.copy()
        self.seen = Seen({name for name in names if name[0][:1] == "/"})

    def notice(self, done: object) -> None:
        """A wrapped ``chdir`` is about to run, or (``done`` True) has returned or failed."""
        self._moving = max(0, self._moving - 1) if done is True else self._moving + 1
        self.changed()

    def chdir_event(self) -> None:
        """The ``os.chdir`` event: outside a wrapped call, the directory changed by a route
        this class cannot follow, and is asked for on every access from now on."""
        if not self._moving:
            self._trusted = False
        self.changed()


#: The wrappers' look-up and notices: sealed functions (``audit.sealed_function``) whose
#: working directory is a hidden default, so that no object the program can reach holds it.
KNOWN_SOURCE = """
def known(path, kind, *, _workdir=None):
    return (_workdir, (_workdir := None))[0].seen.names.__contains__((path, kind))
"""
NOTICE_SOURCE = """
def notice(done, *, _workdir=None):
    (_workdir, (_workdir := None))[0].notice(done)
"""
