"""The ``@sandbox`` functions an application registered, and where their modules are.

``@sandbox`` registers each function's module here; ``sandboxes()`` hands the child the
modules' files and search-path directories (they are the program there, readable and
importable without a rule), and objects mode takes those directories for the
application's own.
"""

from __future__ import annotations

import os
import sys

#: Module name -> qualified names of its ``@sandbox`` functions.
REGISTERED: dict[str, set[str]] = {}


def registered_roots() -> list[tuple[str, str]]:
    """``(module, search-path directory it was imported from)`` per registered module."""
    found: list[tuple[str, str]] = []
    for name in sorted(REGISTERED):
        source = getattr(sys.modules.get(name), "__file__", None)
        if not isinstance(source, str):
            continue
        root = os.path.realpath(source)
        for _ in name.split("."):
            root = os.path.dirname(root)
        if os.path.basename(source) == "__init__.py":
            root = os.path.dirname(root)
        found.append((name, root))
    return found


def module_roots() -> list[str]:
    """The search-path directories the ``@sandbox`` modules were imported from."""
    return sorted({root for _, root in registered_roots()})


def module_files() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The files of the modules defining ``@sandbox`` functions (and of their packages),
    the directories of the search path they are found in, and their names."""
    from pysandboxes._policy.view import module_files as files_of

    registered = registered_roots()
    files: list[str] = []
    roots: list[str] = []
    for name, root in registered:
        found = [f for f in files_of(name, [root]) if not f.endswith("__main__.py")]
        files += [f for f in found if f not in files]
        if root not in roots:
            roots.append(root)
    return tuple(files), tuple(roots), tuple(name for name, _ in registered)
