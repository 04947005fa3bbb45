"""Symbolic links on the way to a file, found on disk (two questions, two answers).

``links_on_the_way`` finds every link a path goes through, the directories' too: each
is a name whose change changes what the path names (the rule files' protection).
``link_chain`` follows the last name only: the links a file is reached by, each a name of
that same file (what may be read as the file is: the interpreter's ``bin/python3``).
"""

from __future__ import annotations

import os


def links_on_the_way(path: str) -> list[str]:
    """Every symbolic link met on the way from ``path`` to the file it names, each as its
    directory's real path and its own name (as the guards judge a change of the link
    itself): ``.py-sandboxes -> conf/current/rules`` with ``conf/current -> v1`` gives
    both links. A change of any of them changes the rules of the next run, as a change
    of the file does; the directories above each are what holds them."""
    import stat

    pending = os.path.abspath(path).split("/")[::-1]
    resolved = ""
    found: list[str] = []
    while pending and len(found) <= 40:  # a loop: the kernel stops there too
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            resolved = resolved.rpartition("/")[0]
            continue
        candidate = f"{resolved}/{part}"
        target = ""
        try:
            is_link = stat.S_ISLNK(os.lstat(candidate).st_mode)
            target = os.readlink(candidate) if is_link else ""
        except OSError:
            is_link = False  # missing (a missing include): the rest is named as written
        if not is_link:
            resolved = candidate
            continue
        found.append(candidate)
        if target.startswith("/"):
            resolved = ""
        pending.extend(target.split("/")[::-1])
    return found


def link_chain(path: str) -> list[str]:
    """The symbolic links ``path`` goes through to its file, each spelled with its
    directory resolved (as the guards judge a link's own name), in order."""
    links: list[str] = []
    current = os.path.abspath(path) if path else ""
    while current and len(links) < 40:  # the kernel's own limit on a chain
        here = os.path.join(os.path.realpath(os.path.dirname(current)), os.path.basename(current))
        try:
            target = os.readlink(here)
        except OSError:
            break  # not a link (or gone): the chain ends at its file
        links.append(here)
        current = os.path.normpath(os.path.join(os.path.dirname(here), target))
    return links
