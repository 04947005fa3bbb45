"""From file events to the fewest ``expose-*`` rules that allow them.

A file read grants that file; a directory is granted only when the program listed it,
created in it or removed from it, and never a sensitive one (``/``, ``/etc``, ``~``,
``~/.ssh``, the parents of the working directory...), nor one holding a rule file for
writing: the files themselves then, whether they are still there or not (a log, a
database the next run makes again in a clean checkout).

Three things are learned beyond what the program named:

- **many files below one directory** (``GROUP_AT`` or more) are learned as that
  directory, with the count in the rule's comment, where the directory itself could be
  granted (not sensitive, not in the system's or the interpreter's trees, no rule file in
  it, no secret file among its entries);
- **companions** that C libraries make beside the file the program named, unseen by the
  Python layer: SQLite's ``-journal``, ``-wal`` and ``-shm`` beside a database, ``dbm``'s
  ``.dir``, ``.dat`` and ``.bak`` beside each other;
- **``/dev/shm``** when the program made a POSIX semaphore or shared memory there
  (``multiprocessing``'s locks, queues and pools): their names are made up per run, so
  the place is the rule.
"""

from __future__ import annotations

import os
import re

from pysandboxes._host.learning.places import (
    Context,
    home_hidden,
    secret_file,
    sensitive_directories,
    system_tree,
)
from pysandboxes._policy.expand import RUNTIME_VARIABLES
from pysandboxes._policy.judge import SHARED_MEMORY
from pysandboxes._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from pysandboxes._wire.events import Event

#: From this many files (or granted directories) directly in one directory, the
#: directory is learned instead of each of them.
GROUP_AT = 16
_VERBS = {
    "read": "read by",
    "write": "written by",
    "create": "created by",
    "delete": "removed by",
    "execute": "run by",
    "list": "listed by",
}
_UNSAFE_PATH = re.compile(r"[\x00-\x1f\x7f#$\"'\\]|(^|/)\s|\s($|/)")
_SQLITE = b"SQLite format 3\0"
_SQLITE_SUFFIXES = ("-journal", "-wal", "-shm")
_DBM_SUFFIXES = (".dir", ".dat", ".bak")


@record
class FileRule:
    """One learned ``expose-*`` line.

    Attributes:
        line: the rule line.
        note: how the program used it (``read by``), for its comment.
        where: the program's line that first did it.
        secret: whether the path holds keys or credentials (learned commented out).
        count: how many files below a learned directory the program used (0: one path).
    """

    line: str
    note: str
    where: str
    secret: bool = False
    count: int = 0


def unsafe_path(path: str) -> bool:
    """Whether a rule line cannot hold ``path`` as it reads: a comment or reference
    character, spaces a parser strips, or any character that is not printable (a line
    separator would make the writer refuse every rule; a bidi control shows another name)."""
    return _UNSAFE_PATH.search(path) is not None or not path.isprintable()


def display_path(path: str, context: Context) -> str:
    """``path`` as the rule file should name it: ``./x``, ``~/x``, ``${VAR}/x`` or as is."""
    base = context.rule_dir.rstrip("/")
    if path == base:
        return "."
    if path.startswith(base + "/"):
        return "./" + path[len(base) + 1 :]
    for name, value in context.variables:
        value = value.rstrip("/")
        if not value or value == "/" or not (path == value or path.startswith(value + "/")):
            continue
        if name in RUNTIME_VARIABLES:  # always defined, by the runtime itself
            return "${" + name + "}" + path[len(value) :]
        if "}" not in value:
            # With the value as default: an unset variable must not leave "/..." behind
            # ("${VIRTUAL_ENV}/bin" would grant /bin on a run without the venv).
            return "${" + name + ":-" + value + "}" + path[len(value) :]
    home = context.home.rstrip("/")
    if home and (path == home or path.startswith(home + "/")):
        return "~" + path[len(home) :]
    return path


class _Grants:
    """Path -> (writable, first event, files below it), built from the events."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.sensitive = sensitive_directories(context)
        # A directory holding a rule file is never granted writable: the kernel layer
        # cannot keep one file of a writable directory read-only, so a shell the program
        # may start would rewrite the rules of the next run.
        self.holders = {a for f in context.rule_files for a in ancestors(os.path.realpath(f))}
        self.paths: dict[str, tuple[bool, Event, int]] = {}
        self.looked: list[str] = []  # directories only looked at: they lead nowhere new
        self.skipped: list[str] = []
        self.beside: set[str] = set()  # files granted one by one beside a rule file
        self.made: set[str] = set()  # directories the program made: "./out/" (see below)
        self.links: dict[str, Event] = {}  # links the program named files by (see link)

    def grant(self, path: str, writable: bool, event: Event, count: int = 0) -> None:
        known = self.paths.get(path)
        if known is None:
            self.paths[path] = (writable, event, count)
        else:
            self.paths[path] = (writable or known[0], known[1], max(count, known[2]))

    def link(self, event: Event) -> None:
        """A symbolic link the program named a file by: read-only, by its own name (its
        directory resolved), so that the next run finds the file by that name too. The
        file itself is learned by its own event, and judged where it leads."""
        name = os.path.join(
            os.path.realpath(os.path.dirname(event.name)), os.path.basename(event.name)
        )
        if not os.path.islink(name):
            return
        if name not in self.paths:
            self.links[name] = event

    def closed(self, directory: str) -> bool:
        """Whether ``directory`` is never granted writable: its files are, one by one."""
        return directory in self.sensitive or directory in self.holders

    def add(self, event: Event) -> None:
        if event.access == "link":
            self.link(event)
            return
        # Judged and written as the kernel resolves it: a link the program planted
        # ("data" -> "/") must not make an innocent-looking rule grant its target.
        path = os.path.realpath(event.name)
        if "/__pycache__" in path:
            return  # the import system's cache, which may fail freely
        # A file of /sys read (pandas reads the cgroup's CPU quota) is the same file on
        # the next run, and granted alone; /proc names the learning run's processes.
        readable_sys = path.startswith("/sys/") and event.access == "read"
        if readable_sys and os.path.isfile(path):
            self.grant(path, False, event)
            return
        if path in self.context.rule_files or path.startswith(("/proc/", "/sys/")):
            self.skipped.append(f"{path}: {event.access} not learned (system or rule file)")
            return
        if path.startswith(SHARED_MEMORY + "/") and event.access in ("create", "write"):
            self.grant(SHARED_MEMORY, True, event)  # a semaphore, shared memory (see above)
            return
        exists, is_dir = os.path.lexists(path), os.path.isdir(path)
        parent = os.path.dirname(path)
        if event.access in ("read", "execute"):
            if not exists:
                return  # a probe for a missing file: it stays missing, as it was
            if is_dir:
                self.looked.append(path)
            else:
                self.grant(path, False, event)
        elif event.access == "list":
            if path in self.sensitive:
                self.skipped.append(f"{path}: listed, but a sensitive directory is never granted")
            elif is_dir:
                self.grant(path, False, event)
        elif path in self.sensitive or (is_dir and path in self.holders):
            # mkdir of an existing ~ or rmdir of /etc: neither it nor its parent is granted.
            self.skipped.append(f"{path}: {event.access} of a sensitive directory: not granted")
        elif event.access == "write" and exists and not is_dir:
            self.grant(path, True, event)  # an existing file written: that file
        elif event.access == "create" and is_dir:
            self.grant(path, True, event)  # a directory the program made: the place it writes
            self.made.add(path)
        elif not self.closed(parent) and os.path.isdir(parent):
            self.grant(parent, True, event)  # create or delete: the directory's entries change
        elif os.path.isdir(parent) and not is_dir and parent not in self.sensitive - self.holders:
            # Beside a rule file: that name only, made again by the next run if missing.
            self.grant(path, True, event)
            self.beside.add(path)
        else:
            why = "a directory holding a rule file" if parent in self.holders else "sensitive"
            self.skipped.append(f"{path}: {event.access} in {why} {parent}: not granted")


def ancestors(path: str) -> list[str]:
    """The directories above ``path``, nearest first (never ``path`` itself)."""
    found: list[str] = []
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return found
        found.append(parent)
        path = parent


def file_rules(events: Sequence[Event], context: Context) -> tuple[list[FileRule], list[str]]:
    """The rules for the file ``events``, and why some accesses gave none."""
    grants = _Grants(context)
    for event in events:
        if event.name.startswith("/") and not event.name.startswith("//"):
            grants.add(event)  # else not a real path ("//x" keeps two slashes in normpath)
    _companions(grants)
    _group(grants)
    if grants.beside:
        grants.skipped.append(
            f"{len(grants.beside)} file(s) made or removed beside a rule file are granted one "
            "by one: a directory where a rule file is read is never writable"
        )
    paths = grants.paths
    granted_below = {a for p in paths for a in ancestors(p)} | set(paths)
    for path in dict.fromkeys(grants.looked):
        if path not in granted_below:
            grants.skipped.append(f"{path}: a directory looked at, not listed: not granted")
    rules: list[FileRule] = []
    for path in sorted(paths):
        writable, event, count = paths[path]
        if _covered(path, writable, paths):
            continue
        wide = writable or count or _is_dir(path)
        if path != SHARED_MEMORY and system_tree(path, context) and wide:
            grants.skipped.append(
                f"{path}: {'writing' if writable else 'a directory'} in the system's or the "
                "interpreter's trees, the PATH or a home's hidden entries is never learned: "
                "add the rule yourself if you mean it"
            )
            if _is_dir(path) or home_hidden(path, context):
                continue
            writable = False  # a system file may still be read, as the program did
        if unsafe_path(path):
            grants.skipped.append(f"{path!r}: a name a rule line cannot hold safely: not granted")
            continue
        shown = display_path(path, context)
        if writable and path in grants.made:
            shown += "/"  # a directory the next run makes again, in a clean checkout
        line = f"{'expose-rw' if writable else 'expose-ro'}={shown}"
        note = _VERBS[event.access]
        if count:
            note = f"{count} files below it {'used' if writable else 'read'}, first {note}"
        rules.append(FileRule(line, note, event.where, secret_file(path, context), count))
    for link, event in sorted(grants.links.items()):
        if _covered(link, False, paths) or unsafe_path(link) or secret_file(link, context):
            continue
        line = f"expose-ro={display_path(link, context)}"
        rules.append(FileRule(line, "a link to a file read by", event.where))
    return rules, grants.skipped


def _is_dir(path: str) -> bool:
    return os.path.isdir(path)


def _covered(path: str, needs_write: bool, paths: dict[str, tuple[bool, Event, int]]) -> bool:
    """Whether a directory granted above ``path`` already gives what it needs."""
    for ancestor in ancestors(path):
        known = paths.get(ancestor)
        if known is not None and (known[0] or not needs_write) and os.path.isdir(ancestor):
            return True
    return False


def _companions(grants: _Grants) -> None:
    """Grant the files C libraries make beside a written file the program named."""
    for path, (writable, event, _) in list(grants.paths.items()):
        if not writable or os.path.isdir(path):
            continue
        names: tuple[str, ...] = ()
        if _sqlite_database(path):
            names = tuple(path + suffix for suffix in _SQLITE_SUFFIXES)
        stem, suffix = os.path.splitext(path)
        if suffix in _DBM_SUFFIXES and any(
            stem + other in grants.paths for other in _DBM_SUFFIXES if other != suffix
        ):
            names = tuple(stem + other for other in _DBM_SUFFIXES)
        for name in names:
            if not _covered(name, True, grants.paths):
                grants.grant(name, True, event)


def _sqlite_database(path: str) -> bool:
    """Whether ``path`` is an SQLite database (or the empty file a connection left)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(_SQLITE))
    except OSError:
        return False
    return head == _SQLITE or (not head and path.endswith((".db", ".sqlite", ".sqlite3")))


def _group(grants: _Grants) -> None:
    """Learn a directory for ``GROUP_AT`` or more files (or directories) used in it,
    deepest first, so that a tree of many folders becomes one rule (see the module).
    What was read is grouped apart from what was written: reading many files of a
    folder never makes it writable."""
    changed = True
    while changed:
        changed = False
        below: dict[str, list[str]] = {}
        for path in grants.paths:
            parent = os.path.dirname(path)
            if parent != path:
                below.setdefault(parent, []).append(path)
        for directory in sorted(below, key=lambda d: -d.count("/")):
            if any(a in grants.paths for a in (directory, *ancestors(directory))):
                continue  # granted above already, or the next pass judges it
            members = below[directory]
            written = [m for m in members if grants.paths[m][0]]
            if len(written) >= GROUP_AT and not grants.closed(directory):
                pass  # the directory, writable: every member is in it
            elif len(members) - len(written) >= GROUP_AT:
                members = [m for m in members if not grants.paths[m][0]]
            else:
                continue
            if not _groupable(directory, grants):
                continue
            first = grants.paths[members[0]][1]
            count = sum(max(grants.paths[m][2], 1) for m in members)
            writable = any(grants.paths[m][0] for m in members)
            for member in members:
                del grants.paths[member]
            grants.grant(directory, writable, first, count)
            changed = True


def _groupable(directory: str, grants: _Grants) -> bool:
    """Whether ``directory`` may be learned whole: not sensitive, not in the system's or
    the interpreter's trees, holding no rule file and no file of secrets."""
    context = grants.context
    if directory in grants.sensitive or directory in grants.holders:
        return False
    if system_tree(directory, context) or unsafe_path(directory):
        return False
    try:
        names = os.listdir(directory)
    except OSError:
        return False
    return not any(secret_file(os.path.join(directory, name), context) for name in names)
