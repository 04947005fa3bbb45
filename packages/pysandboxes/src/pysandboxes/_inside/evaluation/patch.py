"""Guarded ``eval``, ``exec`` and ``compile`` for the program's own code.

With at least one un-suffixed ``eval-*`` line, ``builtins`` gets these three in place of
the originals. Code of the standard library and of installed packages calls through to
the original (``namedtuple``, ``dataclasses``), and the dynamic-code guard judges that
call as it always has: ``timeit``, ``doctest``, ``code``, ``runpy`` and ``pdb``, which
compile what the program hands them, stay refused. The program's own calls are checked
against the default profile and run under its budgets; ``compile`` returns the checked,
rewritten code, which the guarded ``eval``/``exec`` then run under a fresh budget.
"""

from __future__ import annotations

import builtins
import sys
import weakref
from types import CodeType

from pysandboxes._inside.evaluation import runner

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from pysandboxes._policy.evaluation import EvalProfile

_raw: dict[str, Callable[..., Any]] = {
    "eval": builtins.eval,
    "exec": builtins.exec,
    "compile": builtins.compile,
}
_getframe = sys._getframe  # pyright: ignore[reportPrivateUsage]
#: The code objects the guarded ``compile`` returned, with the profile that checked them.
_ours: weakref.WeakKeyDictionary[CodeType, EvalProfile] = weakref.WeakKeyDictionary()
_profiles: dict[str, EvalProfile] = {}


def active_profiles() -> Mapping[str, EvalProfile]:
    """The profiles of the rules in force in this sandboxed process (empty outside)."""
    return _profiles


def install(profiles: Mapping[str, EvalProfile], ambient: Callable[[str], bool]) -> None:
    """Keep ``profiles`` for ``guarded_eval``; with a default profile, put the guarded
    builtins in place. ``ambient(filename)`` says whether code of that file is the
    interpreter's or a package's (it calls the originals)."""
    _profiles.update(profiles)
    default = profiles.get("")
    if default is None:
        return
    builtins.eval = _guarded("eval", default, ambient)  # type: ignore[assignment]
    builtins.exec = _guarded("exec", default, ambient)  # type: ignore[assignment]
    builtins.compile = _compiler(default, ambient)  # type: ignore[assignment]


def _caller_mode(profile: EvalProfile, globals_: Any, locals_: Any) -> tuple[Any, Any]:
    if profile.namespace == "closed":
        return None, None
    if profile.namespace == "caller" and globals_ is None:
        frame = _getframe(2)
        return frame.f_globals, frame.f_locals if locals_ is None else locals_
    return globals_, locals_


def _guarded(kind: str, profile: EvalProfile, ambient: Callable[[str], bool]) -> Any:
    raw = _raw[kind]
    mode = "eval" if kind == "eval" else "exec"

    def guarded(source: Any, globals: Any = None, locals: Any = None, /) -> Any:
        if ambient(_getframe(1).f_code.co_filename):
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

    guarded.__name__ = guarded.__qualname__ = kind
    guarded.__doc__ = raw.__doc__
    return guarded


def _compiler(profile: EvalProfile, ambient: Callable[[str], bool]) -> Any:
    raw = _raw["compile"]

    def compile(source: Any, filename: Any, mode: str, *args: Any, **kwargs: Any) -> Any:
        if ambient(_getframe(1).f_code.co_filename):
            return raw(source, filename, mode, *args, **kwargs)
        code = runner.compiled(profile, source, "eval" if mode == "eval" else "exec")
        _ours[code] = profile
        return code

    compile.__doc__ = raw.__doc__
    return compile
