"""Which rule file applies to a run, found without importing or running anything.

The order, first found wins:

1. ``--pysandboxes-config FILE`` (or the ``sandboxes_config`` argument): a path with a
   ``/`` is used as given (relative to the cwd); a bare name is searched for like the
   default name in the places below.
2. Next to the program: the directory of the script, or of the ``-m`` module (found
   through the import path without importing it or its parent packages).
3. The current directory.
4. ``pyproject.toml`` in the current directory, when it has a ``[tool.py-sandboxes]``
   table.

When nothing is found, the result says where a new file would go (next to the program,
else the cwd): learning writes it there.
"""

from __future__ import annotations

import os

from pysandboxes._policy.parser import DEFAULT_RULE_FILE
from pysandboxes._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


@record
class Discovery:
    """The outcome of the search.

    Attributes:
        path: the rule file (or ``pyproject.toml``) to read, ``None`` when none exists.
        default: where a rule file would be created for this run when ``path`` is ``None``.
        searched: the places looked at, in order, for messages.
    """

    path: str | None
    default: str
    searched: tuple[str, ...]


def module_directory(module: str, search_path: Sequence[str]) -> str | None:
    """The directory holding ``module`` (``pkg.mod``), found without importing anything."""
    from importlib.machinery import PathFinder

    locations: list[str] | None = list(search_path)
    spec = None
    for part in module.split("."):
        try:
            spec = PathFinder.find_spec(part, locations)
        except (ImportError, ValueError):
            return None
        if spec is None:
            return None
        locations = list(spec.submodule_search_locations or [])
    if spec is None:
        return None
    if spec.origin and spec.has_location:
        return os.path.dirname(spec.origin)
    return locations[0] if locations else None


def _has_tool_table(path: str) -> bool:
    from pysandboxes._policy.pyproject import pyproject_rule_lines

    try:
        with open(path, encoding="utf-8") as handle:
            return pyproject_rule_lines(handle.read()) is not None
    except (OSError, UnicodeDecodeError, ValueError):
        # A broken pyproject.toml is still "the file with the rules" only if it says so;
        # report it when the table is visibly there.
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                return "[tool.py-sandboxes" in handle.read()
        except OSError:
            return False


def discover(
    config: str | None = None,
    *,
    script: str | None = None,
    module: str | None = None,
    cwd: str | None = None,
    search_path: Sequence[str] = (),
) -> Discovery:
    """Find the rule file of a run (see the module docstring for the order)."""
    cwd = os.path.abspath(cwd or os.getcwd())
    if config is not None and "/" in config:
        path = os.path.join(cwd, os.path.expanduser(config))
        return Discovery(path if os.path.exists(path) else None, path, (path,))
    name = config or DEFAULT_RULE_FILE
    places: list[str] = []
    if script is not None and script != "-":
        places.append(os.path.dirname(os.path.abspath(os.path.join(cwd, script))))
    elif module is not None:
        found = module_directory(module, list(search_path) or [cwd])
        if found is not None:
            places.append(found)
    places.append(cwd)
    searched = tuple(os.path.join(place, name) for place in dict.fromkeys(places))
    for candidate in searched:
        if os.path.isfile(candidate):
            return Discovery(candidate, candidate, searched)
    pyproject = os.path.join(cwd, "pyproject.toml")
    if config is None and os.path.isfile(pyproject) and _has_tool_table(pyproject):
        return Discovery(pyproject, pyproject, (*searched, pyproject))
    return Discovery(None, searched[0], searched)
