"""The sweep at exit of the read-write exposures for rule files the run made or changed.

``rulewatch`` keeps the places this run's own rule search looks. Native code (or a
program the sandbox started) may also make or change a rule file where *another*
script's search looks: ``tools/.py-sandboxes`` rules the next ``python-sb
tools/report.py``. No kernel layer refuses one new name in a directory it lets the
sandbox write, so at exit the waiter walks each read-write exposure and sets aside every
rule file there whose inode changed during the run (its ``ctime``, which no program can
set back): a ``.py-sandboxes`` (or the name given to ``--pysandboxes-config``), a
``pyproject.toml`` that now holds a ``[tool.py-sandboxes]`` table, and a file such a
rule file includes (by a name written in it: one without ``${...}``, one level deep).

The walk is bounded (``LIMIT`` directories): a tree larger than that is said to be
checked only in part, never silently. It follows no symbolic link (one out of the
exposure leads where the sandbox could not write), and reads the entries' types from the
listing: only a rule file's name costs a ``stat``.
"""

from __future__ import annotations

import os
import re
import stat

from pysandboxes._policy.pathnames import within

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection

#: Most directories one sweep reads.
LIMIT = 50_000


def sweep(
    root: str,
    names: Collection[str],
    since_ns: int,
    known: Collection[str],
    set_aside: Callable[[str], str],
    has_table: Callable[[bytes | None], bool],
    read: Callable[[str], bytes | None],
) -> list[str]:
    """Set aside the rule files below ``root`` changed at or after ``since_ns`` (the
    coarse clock when the run began); ``known`` are the run's own rule files, which
    ``rulewatch`` keeps itself. One message for each, and one if the walk stopped."""
    messages: list[str] = []
    pending = [root]
    visited = 0
    while pending:
        directory = pending.pop()
        visited += 1
        if visited > LIMIT:
            messages.append(
                f"{_shown(root)} holds more than {LIMIT} directories: the check for rule "
                "files the program made there stopped; review the ones it may have made"
            )
            break
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue  # gone, or unreadable to the trusted side: nor can a search read it
        for entry in entries:
            name = entry.name
            if name != "pyproject.toml" and name not in names:
                try:
                    if entry.is_dir(follow_symlinks=False):  # the entry's type: no stat
                        pending.append(entry.path)
                except OSError:
                    pass
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if name != "pyproject.toml" and stat.S_ISREG(info.st_mode):
                # Its includes rule that later run too: made or changed, they go as well.
                for included in _includes(read(entry.path), directory):
                    if within(included, root) and included not in known:
                        messages += _set_aside_if_new(included, since_ns, set_aside, entry.path)
            if entry.path in known or info.st_ctime_ns < since_ns:
                continue
            if name == "pyproject.toml" and (
                not stat.S_ISREG(info.st_mode) or not has_table(read(entry.path))
            ):
                continue
            aside = set_aside(entry.path)
            done = {"?": "it could not be moved: remove it", "": "it was removed"}
            messages.append(
                f"{_shown(entry.path)} was made or changed while the program ran, in a "
                f"read-write exposure: {done.get(aside, f'moved to {_shown(aside)}')}; "
                "a later run there would have obeyed it"
            )
    return messages


#: An include line: ``include "p"``, ``include-optional "p"``, ``include-platform=P "p"``.
_INCLUDE = re.compile(rb'^[ \t]*include(?:-optional|-platform=\S+)?[ \t]+"([^"]+)"', re.M)


def _includes(text: bytes | None, directory: str) -> list[str]:
    """The files a rule file includes, by the names it writes (relative to its directory);
    a name with ``${...}`` or ``~`` depends on an environment the waiter does not have."""
    found: list[str] = []
    for match in _INCLUDE.finditer(text or b""):
        target = os.fsdecode(match.group(1))
        if "$" not in target and not target.startswith("~"):
            found.append(os.path.normpath(os.path.join(directory, target)))
    return found


def _set_aside_if_new(
    path: str, since_ns: int, set_aside: Callable[[str], str], holder: str
) -> list[str]:
    try:
        if os.lstat(path).st_ctime_ns < since_ns:
            return []
    except OSError:
        return []
    aside = set_aside(path)
    done = {"?": "it could not be moved: remove it", "": "it was removed"}
    return [
        f"{_shown(path)}, included by {_shown(holder)}, was made or changed while the program "
        f"ran: {done.get(aside, f'moved to {_shown(aside)}')}; a later run would have obeyed it"
    ]


def _shown(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except (OSError, ValueError):
        return path
    return path if relative.startswith("..") else relative
