"""Check, rewrite and compile a source once per profile; run it under a fresh ``Run``.

The compiled code is cached by (profile, mode, source): the second evaluation of a
source costs the namespace and the run only. The runner's own parsing and compiling
are vouched for to the dynamic-code guard (``vouching``): by the frame that asks, which
runs no code of the program.
"""

from __future__ import annotations

import ast
import builtins

from pysandboxes._inside.evaluation.budgets import Run
from pysandboxes._inside.evaluation.checker import check
from pysandboxes._inside.evaluation.rewriter import rewrite
from pysandboxes._policy.evaluation import FORMATTERS, FRAME_ATTRIBUTES, HIERARCHY_WALKS
from pysandboxes.errors import RuleEvalPermissionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import CodeType, FrameType
    from typing import Any

    from pysandboxes._policy.evaluation import EvalProfile

_raw_compile = builtins.compile
_raw_eval = builtins.eval
_MISSING = object()
_CACHE_SIZE = 512
#: By the profile's id (a record's hash walks its fields): the profile itself, kept alive
#: so that its id stays its own, its compiled sources and its namespace's builtins.
_by_profile: dict[int, tuple[EvalProfile, dict[tuple[str, str], CodeType], dict[str, object]]] = {}


def _caches(profile: EvalProfile) -> tuple[dict[tuple[str, str], CodeType], dict[str, object]]:
    entry = _by_profile.get(id(profile))
    if entry is None or entry[0] is not profile:
        entry = _by_profile[id(profile)] = (profile, {}, _namespace_builtins(profile))
    return entry[1], entry[2]


_ONLY_AST = ast.PyCF_ONLY_AST
#: Called with (profile, tree) for every source checked: learning records the constructs.
observers: list[Callable[[EvalProfile, ast.AST], None]] = []


def vouching(own: frozenset[int]) -> Callable[[FrameType | None], bool]:
    """The dynamic-code guard's test of a ``compile`` audit event: whether, seen from
    ``frame`` (the guards' frames, whose globals' ids are ``own``, skipped), it is
    ``compiled`` parsing or compiling a checked tree. ``compiled`` runs no code of the
    program (it takes exact strings only). The code objects are bound now, in the test
    the guard holds, out of the program's reach."""
    mine = _COMPILED

    def vouches(frame: FrameType | None) -> bool:
        while frame is not None and id(frame.f_globals) in own and frame.f_code is not mine:
            frame = frame.f_back
        return frame is not None and frame.f_code is mine

    return vouches


def compiled(profile: EvalProfile, source: object, mode: str) -> CodeType:
    """The checked, rewritten code of ``source`` (``EvalSyntaxRejected`` otherwise)."""
    if type(source) is bytes or type(source) is bytearray:
        text = bytes.decode(bytes(source))  # pyright: ignore[reportArgumentType]
    elif type(source) is str:
        text = source
    else:
        raise TypeError("evaluated source must be a str or bytes, not a subclass")
    cache = _caches(profile)[0]
    key = (mode, text)
    code = cache.get(key)
    if code is not None:
        return code
    label = "".join(("<eval:", profile.name or "default", ">"))  # a fresh object
    tree: ast.AST = _raw_compile(text, label, mode, _ONLY_AST)  # ast.parse, unpatched
    for observe in observers:
        observe(profile, tree)
    check(profile, tree, text)
    tree = rewrite(tree)
    code = _raw_compile(tree, label, mode)  # pyright: ignore[reportArgumentType]
    if len(cache) >= _CACHE_SIZE:
        cache.clear()
    cache[key] = code
    return code


_COMPILED = compiled.__code__  # bound now: the integrity guard refuses reading it later


def attribute_check(profile: EvalProfile) -> Callable[[str], bool]:
    """Whether an attribute name reached at run time (``getattr``) is allowed."""

    def allowed(name: str) -> bool:
        if name in FRAME_ATTRIBUTES or name in HIERARCHY_WALKS or "__sb_" in name:
            return False
        if name.startswith("__") and name.endswith("__"):
            return profile.magic.allows(name)
        if name in FORMATTERS:
            return name in profile.attribute.names and profile.attribute.allows(name)
        return profile.attribute.allows(name)

    return allowed


def _namespace_builtins(profile: EvalProfile) -> dict[str, object]:
    """The ``__builtins__`` of evaluated code: the ``eval-call`` builtins only."""
    found = {n: getattr(builtins, n) for n in dir(builtins) if profile.call.allows(n)}
    found.pop("__import__", None)
    if "Import" in profile.syntax or "ImportFrom" in profile.syntax:
        found["__import__"] = _importer(profile)
    return found


def _importer(profile: EvalProfile) -> Callable[..., object]:
    importer = builtins.__import__

    def evaluated_import(name: str, *args: Any, **kwargs: Any) -> object:
        if not profile.imports.allows(name):
            raise RuleEvalPermissionError(
                f"import of {name!r} is refused by the eval guard ({profile.label}): "
                f"add '{profile.key('import')}={name}' to allow it"
            )
        return importer(name, *args, **kwargs)

    return evaluated_import


def run(
    profile: EvalProfile,
    code: CodeType,
    globals_: dict[str, Any] | None,
    locals_: Mapping[str, object] | None,
    names: Mapping[str, object] | None = None,
) -> Any:
    """Run checked code: in ``globals_`` when given (its ``__builtins__`` replaced for the
    run, never CPython's automatic injection), else in a fresh namespace holding
    ``names``. A spent budget raises ``EvalInterrupted``, even if the code caught it."""
    budget = Run(profile, attribute_check(profile))
    namespace_b = dict(_caches(profile)[1])
    namespace_b.update(budget.helpers())
    if globals_ is None:
        globals_ = dict(names) if names else {}
        globals_["__builtins__"] = namespace_b  # never the caller's, never CPython's
        previous = _MISSING
    else:
        previous = globals_.get("__builtins__", _MISSING)
        globals_["__builtins__"] = namespace_b
    if any(type(k) is str and "__sb_" in k for k in globals_):
        raise ValueError("names containing '__sb_' are reserved for the sandbox")
    try:
        result = _raw_eval(code, globals_, locals_)
    finally:
        if previous is _MISSING:
            if globals_.get("__builtins__") is namespace_b:
                del globals_["__builtins__"]
        else:
            globals_["__builtins__"] = previous
    if budget.spent is not None:
        raise budget.interrupted()
    return result


def evaluate(
    profile: EvalProfile, source: str, mode: str, names: Mapping[str, object] | None
) -> object:
    """``guarded_eval``'s work: check and compile ``source``, run it in a fresh namespace
    holding ``names``; the value in ``eval`` mode, ``None`` in ``exec`` mode."""
    result = run(profile, compiled(profile, source, mode), None, None, names)
    return result if mode == "eval" else None
