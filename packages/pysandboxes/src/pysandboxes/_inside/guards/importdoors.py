"""The doors the import guard watches: objects the program can reach, holding no guard.

The finder and the two wrappers only raise the ``pysandboxes.import`` audit event (the
sealed hook judges it) and call the import system; their globals are their own, so
nothing leads from them to the guard or its rules.
"""

from __future__ import annotations

from pysandboxes._inside.guards.audit import detached

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FunctionType
    from typing import Any


def import_wrapper(
    original: Callable[..., Any], audit: Callable[..., None], allowed: frozenset[str]
) -> FunctionType:
    # Names the rules allow skip the event: a program that swaps this closure's set gains
    # only modules already loaded, which sys.modules hands out anyway; the finder still
    # judges every module that would be loaded.
    def __import__(name, globals=None, locals=None, fromlist=(), level=0):  # type: ignore[no-untyped-def]
        if level or name not in allowed:
            audit("pysandboxes.import", "statement", name, globals, level)
        return original(name, globals, locals, fromlist, level)

    return detached(__import__, "__import__", original.__doc__)  # type: ignore[arg-type]


def gcd_wrapper(original: Callable[..., Any], audit: Callable[..., None]) -> FunctionType:
    def _gcd_import(name, package=None, level=0):  # type: ignore[no-untyped-def]
        audit("pysandboxes.import", "call", name, package, level)
        return original(name, package, level)

    return detached(_gcd_import, "_gcd_import", original.__doc__)  # type: ignore[arg-type]


def finder(audit: Callable[..., None], allowed: frozenset[str], exact: frozenset[str]) -> object:
    # As in the wrapper, names the rules allow skip the event. A program that swaps the
    # set in this closure gets past the finder, not past the check of the module's code
    # when it runs (below); only an extension module would load unjudged (security.md).
    def find_spec(fullname: Any, path: Any = None, target: Any = None) -> None:
        if fullname not in exact and fullname.partition(".")[0] not in allowed:
            audit("pysandboxes.import", "find", fullname, path, 0)

    judged = detached(find_spec, "find_spec", None)
    kind = type("ImportRulesFinder", (), {"__slots__": (), "find_spec": staticmethod(judged)})
    kind.__module__ = "pysandboxes"
    return kind()
