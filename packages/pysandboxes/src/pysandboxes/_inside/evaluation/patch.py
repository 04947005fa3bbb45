"""Guarded ``eval``, ``exec`` and ``compile`` for the program's own code.

With at least one un-suffixed ``eval-*`` line, ``builtins`` gets these three in place of
the originals. Code of the standard library and of installed packages calls through to
the original (``namedtuple``, ``dataclasses``), and the dynamic-code guard judges that
call as it always has: ``timeit``, ``doctest``, ``code``, ``runpy`` and ``pdb``, which
compile what the program hands them, stay refused. The program's own calls are checked
against the default profile and run under its budgets; ``compile`` returns the checked,
rewritten code, which the guarded ``eval``/``exec`` then run under a fresh budget.

The three are sealed (``audit.sealed_function``): what does the work is a hidden default,
never in a closure or a global the program can read, and what they raise leaves with no
traceback through the sandbox's frames. Who calls is decided on file names alone (no
guard is reachable from here).
"""

from __future__ import annotations

import builtins
import os
import sys
import weakref
from types import CodeType

from pysandboxes._inside.evaluation import inforce, runner
from pysandboxes._inside.guards.askers import OWN_DIRS
from pysandboxes._inside.guards.audit import sealed_function

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from pysandboxes._policy.evaluation import EvalProfile

_raw: dict[str, Callable[..., Any]] = {
    "eval": builtins.eval,
    "exec": builtins.exec,
    "compile": builtins.compile,
}
_getframe = sys._getframe  # pyright: ignore[reportPrivateUsage]
_normpath = os.path.normpath
#: The code objects the guarded ``compile`` returned, with the profile that checked them.
_ours: weakref.WeakKeyDictionary[CodeType, EvalProfile] = weakref.WeakKeyDictionary()
#: The sealed builtins put in place: a package's alias of one (mpmath's ``exec_``) is an
#: alias of the builtin for the dynamic-code guard.
SEALED: list[object] = []
# "@0" is BaseException; the work is ``_impl``'s, taken onto the stack and cleared first.
_SEALED = """
def {name}({parameters}, _impl=None):
    try:
        return (_impl, (_impl := None))[0]({arguments})
    except "@0" as error:
        raise error.with_traceback(None)
"""
_SIGNATURES = {
    "eval": ("source, globals=None, locals=None, /, *", "source, globals, locals"),
    "exec": ("source, globals=None, locals=None, /, *", "source, globals, locals"),
    "compile": (
        "source, filename, mode, flags=0, dont_inherit=False, optimize=-1, *, _feature_version=-1",
        "source, filename, mode, flags, dont_inherit, optimize, _feature_version",
    ),
}
_SEALED_FILE = "<pysandboxes sealed call>"
_NAMED = "profile, source, mode, names, /, *"


def ambient_files(stdlib: str, installed: Sequence[str]) -> Callable[[str], bool]:
    """Whether code of a file is the interpreter's, an installed package's or the
    sandbox's: its eval/exec/compile go to the originals, which the dynamic-code guard
    judges as ever ("<library>/../elsewhere" is not the library's)."""
    roots = (stdlib.rstrip("/") + "/", *installed)

    def ambient(filename: str) -> bool:
        if filename.startswith((*OWN_DIRS, "<frozen ")):
            return True
        return filename.startswith(roots) and _normpath(filename) == filename

    return ambient


def _named(profiles: Mapping[str, EvalProfile]) -> Callable[..., object]:
    """``guarded_eval`` in the sandbox: the profile by name, from a copy of the rules'."""
    by_name = dict(profiles)

    def evaluate(
        profile: str, source: str, mode: str, names: Mapping[str, object] | None
    ) -> object:
        chosen = by_name.get(profile)
        if chosen is None:
            raise ValueError(f"unknown eval profile {profile!r}, configured: {sorted(by_name)}")
        return runner.evaluate(chosen, source, mode, names)

    return evaluate


def install(
    profiles: Mapping[str, EvalProfile],
    ambient: Callable[[str], bool],
    sealed_globals: dict[str, object],
) -> None:
    """Put ``guarded_eval``'s evaluator in force over ``profiles``; with a default
    profile, the guarded builtins in place (``sealed_globals``: the sealed functions'
    watched globals). Both are sealed: the program holds them, never the profiles."""
    if profiles:
        source = _SEALED.format(name="evaluate", parameters=_NAMED, arguments=_NAMED[:-6])
        evaluate = sealed_function(
            source, (BaseException,), sealed_globals, _SEALED_FILE, {"_impl": _named(profiles)}
        )
        inforce.put_in_force(evaluate)
    default = profiles.get("")
    if default is None:
        return
    impls = {
        "eval": _guarded("eval", default, ambient),
        "exec": _guarded("exec", default, ambient),
        "compile": _compiler(default, ambient),
    }
    for name, impl in impls.items():
        parameters, arguments = _SIGNATURES[name]
        source = _SEALED.format(name=name, parameters=parameters, arguments=arguments)
        hidden: dict[str, object] = {"_impl": impl}
        if name == "compile":
            hidden["_feature_version"] = -1
        defaults = (0, False, -1) if name == "compile" else (None, None)
        sealed = sealed_function(
            source, (BaseException,), sealed_globals, _SEALED_FILE, hidden, name, defaults
        )
        sealed.__doc__ = _raw[name].__doc__
        sealed.__module__ = "builtins"
        setattr(builtins, name, sealed)
        SEALED.append(sealed)


def _caller_mode(profile: EvalProfile, globals_: Any, locals_: Any) -> tuple[Any, Any]:
    if profile.namespace == "closed":
        return None, None
    if profile.namespace == "caller" and globals_ is None:
        frame = _getframe(3)  # this, the guarded function, the sealed one, the caller
        return frame.f_globals, frame.f_locals if locals_ is None else locals_
    return globals_, locals_


def _guarded(kind: str, profile: EvalProfile, ambient: Callable[[str], bool]) -> Any:
    raw = _raw[kind]
    mode = "eval" if kind == "eval" else "exec"

    def guarded(source: Any, globals: Any = None, locals: Any = None, /) -> Any:
        caller = _getframe(2)  # past the sealed function
        if ambient(caller.f_code.co_filename):
            if globals is None:  # the caller's namespace, as the builtin would take it
                globals = caller.f_globals
                locals = caller.f_locals if locals is None else locals
            return raw(source, globals, locals)
        if type(source) is CodeType:
            checked = _ours.get(source)
            if checked is None:
                return raw(source, globals, locals)  # a code object of the program's own
            code: CodeType = source
        else:
            checked = None
            code = runner.compiled(profile, source, mode)
        globals_, locals_ = _caller_mode(checked or profile, globals, locals)
        result = runner.run(checked or profile, code, globals_, locals_)
        return result if kind == "eval" else None

    return guarded


def _compiler(profile: EvalProfile, ambient: Callable[[str], bool]) -> Any:
    raw = _raw["compile"]

    def compile(
        source: Any,
        filename: Any,
        mode: str,
        flags: int,
        dont_inherit: bool,
        optimize: int,
        feature_version: int,
    ) -> Any:
        if ambient(_getframe(2).f_code.co_filename):
            options = {"_feature_version": feature_version} if feature_version != -1 else {}
            return raw(source, filename, mode, flags, dont_inherit, optimize, **options)
        code = runner.compiled(profile, source, "eval" if mode == "eval" else "exec")
        _ours[code] = profile
        return code

    return compile
