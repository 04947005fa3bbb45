"""The result of a sandboxed call, as the rules let the caller accept it.

``remote-result-mode=values`` (the default; also spelled ``data-only``): values only, the
classes of ``_wire.values``. ``remote-result-mode=objects``: also instances of an
allowlist of classes, rebuilt as data (``_wire.objects``: no code of theirs runs):

- the application's own classes: defined (``__module__``) in a module the application
  has imported already, whose file lies in the application's directories (the main
  script's, and those its ``@sandbox`` modules are imported from) and not in the
  standard library or the installed packages, even when a virtual environment sits in
  the project;
- the classes ``remote-result-class=`` lines name.

Nothing is imported to find a class, and a class is looked up through ``__dict__``
entries, never attributes: a module that imported ``subprocess.Popen`` does not make it
its own.
"""

from __future__ import annotations

import os
import sys
import sysconfig

from pysandboxes._wire.codec import RefusedValue, decode_value
from pysandboxes.errors import RuleResultRefusedError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pysandboxes._host.partial import Child
    from pysandboxes._policy.model import Policy


def decode_result(
    data: bytes, policy: Policy | None, child: Child | None = None, function: str = ""
) -> Any:
    """Decode a result of ``function``; raise ``RuleResultRefusedError`` naming what was
    refused and the rule. In a learning run, an object is rebuilt (as data) whatever its
    class, and its class is recorded for the rules."""
    setting = policy.remote_result_mode if policy is not None else None
    objects = setting is not None and setting.value == "objects"
    allowed: Any = Allowlist(policy) if objects and policy is not None else None
    if child is not None and child.results_seen is not None and policy is not None:
        allowed = Learner(policy, child.results_seen, function)
    limit = child.result_limit if child is not None else None
    try:
        if limit is None:
            return decode_value(data, objects=allowed)
        return decode_value(data, objects=allowed, max_bytes=limit)
    except RefusedValue as exc:
        raise _refusal(str(exc), objects) from None


def _refusal(what: str, objects: bool) -> RuleResultRefusedError:
    named = "." in what and " " not in what and ":" not in what
    if not named:
        return RuleResultRefusedError(f"the sandboxed function's result was refused: {what}")
    if objects:
        return RuleResultRefusedError(
            f"the sandboxed function returned a {what}, which remote-result-mode=objects does "
            "not rebuild: it is neither a class defined in the application's own modules "
            "(already imported) nor one a remote-result-class= line names"
        )
    return RuleResultRefusedError(
        f"the sandboxed function returned a {what}, which is not a value "
        "(remote-result-mode=values): return plain data, or add "
        "remote-result-mode=objects to the rules to rebuild the application's own classes"
    )


class Allowlist:
    """``objects`` for ``decode_value``: the class a description may be rebuilt as."""

    def __init__(self, policy: Policy) -> None:
        self._named = frozenset(n for rule in policy.result_classes for n in rule.names)
        self._places: tuple[tuple[str, ...], tuple[str, ...]] | None = None

    def __call__(self, module: str, qualname: str) -> type | None:
        named = f"{module}.{qualname}" in self._named or f"{module}:{qualname}" in self._named
        loaded = sys.modules.get(module)
        if loaded is None:
            return None  # never imported on the child's say
        if not named and not self._own(loaded):
            return None
        found = _lookup(loaded, qualname)
        if found is None or found.__module__ != module or found.__qualname__ != qualname:
            return None  # not defined there: imported into it, or renamed
        return found

    def _own(self, module: object) -> bool:
        source = getattr(module, "__file__", None)
        if not isinstance(source, str):
            return False
        if self._places is None:
            self._places = (_application_dirs(), _library_trees())
        path = os.path.realpath(source)
        own, libraries = self._places
        return path.startswith(own) and not path.startswith(libraries) and not _installed(path)


class Learner(Allowlist):
    """A learning run's ``objects``: any class already imported and defined where it is
    named is rebuilt (as data: nothing of it runs); each is recorded, as the
    application's own or as one a ``remote-result-class=`` line must name."""

    def __init__(self, policy: Policy, seen: dict[str, tuple[bool, str]], function: str) -> None:
        super().__init__(policy)
        self._seen = seen
        self._function = function

    def __call__(self, module: str, qualname: str) -> type | None:
        loaded = sys.modules.get(module)
        found = _lookup(loaded, qualname) if loaded is not None else None
        if found is None or found.__module__ != module or found.__qualname__ != qualname:
            return None
        own = self._own(loaded)
        self._seen.setdefault(f"{module}.{qualname}", (own, self._function))
        return found


def _lookup(module: object, qualname: str) -> type | None:
    """The class ``qualname`` names in ``module``, through ``__dict__`` entries only."""
    from pysandboxes._wire.objects import plain_lookup
    from pysandboxes._wire.values import RefusedValue

    found: object = module
    for part in qualname.split("."):
        found = vars(found).get(part)
        if not issubclass(type(found), type):  # never isinstance: it asks for __class__
            return None
        made: Any = found
        if not plain_lookup(made):  # its names are read next (vars too)
            raise RefusedValue(
                f"{vars(module).get('__name__')}.{qualname}: its metaclass defines __hash__, "
                "__eq__ or attribute lookup, "
                "which the caller would run; return its data instead"
            )
    made = found
    return made


def _application_dirs() -> tuple[str, ...]:
    """Where the application's own modules are: the main script's directory, and the
    search-path directories its ``@sandbox`` modules were imported from."""
    from pysandboxes._api.registry import module_roots

    main = getattr(sys.modules.get("__main__"), "__file__", None)
    places = [os.path.dirname(os.path.realpath(main))] if isinstance(main, str) else []
    places += module_roots()
    return tuple(p.rstrip(os.sep) + os.sep for p in places if p)


def _library_trees() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    trees = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    trees |= {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    own = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return tuple(os.path.realpath(t).rstrip(os.sep) + os.sep for t in (*trees, own) if t)


def _installed(path: str) -> bool:
    parts = path.split(os.sep)
    return "site-packages" in parts or "dist-packages" in parts
