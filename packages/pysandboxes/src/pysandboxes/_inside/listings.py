"""The program's directories, listed before the walls go up, shown through the rules.

A directory of the search path only some of whose entries are exposed (the program's
own, an editable project's, the modules of ``@sandbox`` functions) is listed once, before
the kernel layer may refuse to list it; the import system keeps that listing, and the
guards then keep in it only what the rules show.
"""

from __future__ import annotations

import os
import sys

from pysandboxes._inside import runner as _runner
from pysandboxes._inside.guards.listings import PRELISTED
from pysandboxes._policy.model import Access

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pysandboxes._policy.judge import FileJudge
    from pysandboxes._wire.spec import Program


def list_program_directory(program: Program) -> object | None:
    """The import system's finder for the program's directory, its listing taken now.

    The directory joins ``sys.path`` after the kernel layer, which may refuse to list it
    (only some files in it are exposed); the finder lists it once, before, and the
    guards then keep in its listing only the entries the rules show.
    """
    if sys.flags.safe_path:
        return None
    return prelisted_finder(_runner.program_directory(program))


def prelisted_finder(directory: str) -> object | None:
    """The import system's finder for ``directory``, listed now and kept for it (a
    directory of the search path only some of whose entries are exposed: see above)."""
    for hook in sys.path_hooks:
        try:
            finder: Any = hook(directory)
        except ImportError:
            continue
        fill = getattr(finder, "_fill_cache", None)
        if fill is None:
            return None
        try:
            finder._path_mtime = os.stat(directory).st_mtime  # else the first import refills
        except OSError:
            return None
        fill()
        sys.path_importer_cache[directory] = finder
        return finder
    return None


def show_only_exposed(finder: object | None, judge: FileJudge) -> None:
    """Keep in the prefilled listing only what the rules show (see above)."""
    if finder is None:
        return
    listed: Any = finder
    base = str(listed.path).rstrip("/")
    shown = {
        name
        for name in listed._path_cache
        if judge.judge(f"{base}/{name}", Access.READ).allowed
        or judge.leads_to_exposure(f"{base}/{name}")
    }
    listed._path_cache = shown
    listed._relaxed_path_cache = {name.lower() for name in shown}

    def refill() -> None:
        # The directory changed (the program made ./out): the import system would list
        # it again, which the rules refuse. What it may show is known without listing:
        # the entries kept, and the exposed ones made since.
        made = {name for name in judge.exposed_entries(base) if os.path.lexists(f"{base}/{name}")}
        listed._path_cache = shown | made
        listed._relaxed_path_cache = {name.lower() for name in listed._path_cache}

    listed._fill_cache = refill

    def names() -> list[str]:
        refill()
        return sorted(listed._path_cache)

    PRELISTED[base] = names
