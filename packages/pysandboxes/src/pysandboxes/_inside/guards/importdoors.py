"""The doors the import guard watches: objects the program can reach, holding no guard.

The finder and the two wrappers only raise the ``pysandboxes.import`` audit event (the
sealed hook judges it) and call the import system. They are sealed functions (see
``audit.sealed_function``): the original ``__import__`` and ``_gcd_import`` are hidden
defaults, cleared from the frame before anything runs, and the sets of allowed names are
frozen defaults the program can neither read nor swap (a closure's cell could be).
"""

from __future__ import annotations

import operator
import os

from pysandboxes._inside.guards.audit import sealed_function

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FunctionType
    from typing import Any

#: The file name of the doors' code: the sandbox's, so tracebacks leave their frames out.
_DOOR_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "<import door>")

# Names the rules allow skip the event ("@0" is sys.audit, "@1" operator.index): only
# modules already loaded could pass unjudged, which sys.modules hands out anyway; the
# finder still judges every module that would be loaded. The level is read once, as C
# reads it.
_IMPORT_SOURCE = """
def __import__(name, globals=None, locals=None, fromlist=(), level=0, *, _original=None,
               _allowed=None):
    return (
        _original,
        (_original := None),
        (level := "@1"(level)),
        "@0"("pysandboxes.import", "statement", name, globals, level)
        if level or not _allowed.__contains__(name)
        else None,
    )[0](name, globals, locals, fromlist, level)
"""
_GCD_SOURCE = """
def _gcd_import(name, package=None, level=0, *, _original=None):
    return (
        _original,
        (_original := None),
        "@0"("pysandboxes.import", "call", name, package, level),
    )[0](name, package, level)
"""
# As in the wrapper, names the rules allow skip the event; the check of the module's code
# when it runs (the exec door) stays.
_FIND_SOURCE = """
def find_spec(fullname, path=None, target=None, *, _allowed=None, _exact=None):
    if not (_exact.__contains__(fullname) or _allowed.__contains__(fullname.partition(".")[0])):
        "@0"("pysandboxes.import", "find", fullname, path, 0)
"""


def import_wrapper(
    original: Callable[..., Any],
    audit: Callable[..., None],
    allowed: frozenset[str],
    sealed_globals: dict[str, object],
) -> FunctionType:
    """The ``builtins.__import__`` that reports every import statement."""
    hidden: dict[str, object] = {"_original": original, "_allowed": allowed}
    objects = (audit, operator.index)
    defaults = (None, None, (), 0)
    made = sealed_function(
        _IMPORT_SOURCE, objects, sealed_globals, _DOOR_FILE, hidden, None, defaults
    )
    made.__doc__ = original.__doc__
    made.__text_signature__ = "(name, globals=None, locals=None, fromlist=(), level=0)"  # type: ignore[attr-defined]
    return made


def gcd_wrapper(
    original: Callable[..., Any], audit: Callable[..., None], sealed_globals: dict[str, object]
) -> FunctionType:
    """The import system's ``_gcd_import``, reporting ``importlib.import_module`` calls."""
    hidden: dict[str, object] = {"_original": original}
    defaults = (None, 0)
    made = sealed_function(
        _GCD_SOURCE, (audit,), sealed_globals, _DOOR_FILE, hidden, None, defaults
    )
    made.__doc__ = original.__doc__
    return made


class ImportRulesFinder:
    """The meta-path finder: its one method is set by ``finder`` (a class of the guards,
    so the integrity guard refuses replacing it)."""

    __slots__ = ()

    @staticmethod
    def find_spec(fullname: Any, path: Any = None, target: Any = None) -> None:
        raise RuntimeError("the finder is used before it is made")


def finder(
    audit: Callable[..., None],
    allowed: frozenset[str],
    exact: frozenset[str],
    sealed_globals: dict[str, object],
) -> object:
    """The meta-path finder that reports every module about to be loaded."""
    hidden: dict[str, object] = {"_allowed": frozenset(allowed), "_exact": frozenset(exact)}
    judged = sealed_function(
        _FIND_SOURCE, (audit,), sealed_globals, _DOOR_FILE, hidden, None, (None, None)
    )
    ImportRulesFinder.find_spec = staticmethod(judged)  # type: ignore[method-assign, assignment]
    ImportRulesFinder.__module__ = "pysandboxes"
    return ImportRulesFinder()
