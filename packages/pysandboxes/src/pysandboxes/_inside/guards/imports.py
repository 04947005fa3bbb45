"""Imports: ``python-import=`` judged on the modules the program itself asks for.

An import is charged to the code that asks for it. The program's code (its script, its
own modules, ``-c`` text, the prompt) needs a rule for every top-level module it imports;
what an allowed module imports for itself (``json`` loading ``re``, ``requests`` loading
``urllib3``) is that module's business, so a rule file lists what the program uses, not
its dependency tree. Standard-library functions that import a name they are handed
(``importlib.import_module``, ``pkgutil.resolve_name``, ``pydoc.locate``, ``runpy``...)
are looked through: the import is charged to their caller.

Four doors are watched, all reporting through the sealed audit hook, so nothing the
program can reach holds a reference to the guard:

- a meta-path finder at the head of ``sys.meta_path`` sees every module about to be
  loaded, however it was asked for (statement, ``__import__``, ``importlib``);
- ``builtins.__import__`` and the import system's ``_gcd_import`` report every import
  statement and ``importlib.import_module`` call, so a module already in ``sys.modules``
  (loaded by the interpreter or by the sandbox before the program) is judged too;
- the ``exec`` of a module's code and the creation of an extension module put the finder
  back at the head if the program moved it, and judge the module themselves;
- a module executed by the import system (``spec_from_file_location`` and
  ``exec_module``) is judged by its name and by the file it comes from, so a standard
  module cannot be loaded under an allowed name.

A module that does not exist raises the ordinary ``ModuleNotFoundError``: it is not
refused. Reading ``sys.modules`` directly is not an import (``docs/security.md``).
"""

from __future__ import annotations

import builtins
import os
import sys
from types import CodeType

from pysandboxes._inside.guards.askers import OWN_DIRS, STARTED_EVENT, ImportAsker, bottom_code
from pysandboxes._inside.guards.audit import current_frame
from pysandboxes._inside.guards.importdoors import finder as make_finder
from pysandboxes._inside.guards.importdoors import gcd_wrapper, import_wrapper
from pysandboxes._inside.guards.paths import Unjudgeable
from pysandboxes._inside.guards.values import plain_str

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from types import FrameType
    from typing import Any

    from pysandboxes._inside.enforce import Enforcer
    from pysandboxes._policy.judge import ImportJudge

#: The event the finder and the wrappers raise; the program may raise it too, which
#: can only get its own imports refused.
EVENT = "pysandboxes.import"


#: The modules of the sandbox the program may import; the others are its own (_private).
_PUBLIC = frozenset(
    {"pysandboxes", "pysandboxes.errors", "pysandboxes.mcp", "pysandboxes.notebook"}
)
#: Modules CPython's prompt imports for itself, with no Python frame on the stack, once
#: loaded (3.13 registers every line typed with linecache).
_PROMPT_IMPORTS = frozenset({"linecache"})


def _private(module: str) -> bool:
    """Whether ``module`` is one of the sandbox's own, whatever the rules say."""
    return module.startswith("pysandboxes.") and module not in _PUBLIC


class ImportGuard:
    """Judges imports against ``python-import=`` (see the module docstring)."""

    def __init__(
        self,
        judge: ImportJudge,
        enforcer: Enforcer,
        rule_file: str,
        stdlib: str,
        libraries: Iterable[str],
        own_globals: Iterable[dict[str, object]],
        program_code: Iterable[CodeType] = (),
        realpath: Callable[[str], str] | None = None,
        sealed_globals: dict[str, object] | None = None,
    ) -> None:
        self._judge = judge
        self._enforcer = enforcer
        self._learned = enforcer.learned_modules  # learning: recorded already, else empty
        self._rule_file = rule_file
        self._stdlib = stdlib.rstrip("/") + "/"
        self._libraries = tuple(r.rstrip("/") + "/" for r in libraries)
        # A file is judged where the kernel opens it ("//usr/lib/...", "/proc/self/root/...",
        # a symlink are the file they lead to), with functions captured before the guards.
        self._realpath = realpath or os.path.realpath
        roots = {self._stdlib, *self._libraries}
        roots |= {self._realpath(r).rstrip("/") + "/" for r in roots}
        # site-packages may sit inside the standard library's directory: deepest first.
        self._roots_deepest_first = sorted(roots, key=len, reverse=True)
        self._trees = tuple(self._roots_deepest_first)
        self._kept = tuple(own_globals)  # alive, so that their ids stay theirs
        self._own = {id(g) for g in self._kept}
        self._allowed: dict[str, bool] = {}
        self._refused_claims: dict[tuple[str | None, ...], str] = {}
        self._file_modules: dict[str, str | None] = {}
        bootstrap: Any = sys.modules["_frozen_importlib"]
        self._bootstrap = bootstrap
        self._bootstrap_globals: dict[str, Any] = vars(bootstrap)
        self._frames_removed = bootstrap._call_with_frames_removed.__code__
        audit = sys.audit
        tops, exact = judge.allowed_names()
        # The doors skip what the rules allow, but never the sandbox's own modules.
        tops, exact = tops - {"pysandboxes"}, exact | _PUBLIC
        sealed: dict[str, object] = {"__builtins__": {}}
        if sealed_globals is not None:
            sealed = sealed_globals
        self._kept += (sealed,)
        self.finder = make_finder(audit, tops, exact, sealed)
        self._wrappers = (
            import_wrapper(builtins.__import__, audit, tops | exact, sealed),
            gcd_wrapper(bootstrap._gcd_import, audit, sealed),
        )
        self._own.add(id(sealed))
        self._asker = ImportAsker(stdlib, libraries, self._own, program_code, bottom_code())

    @property
    def events(self) -> dict[str, Callable[[tuple[Any, ...]], None]]:
        """The audit events judged here."""
        # No handler for the C-level "import" event: what a moved finder would miss is
        # still judged when the module's code runs (exec) or is created (extension).
        return {
            EVENT: self._reported,
            "exec": self._exec,
            "pysandboxes.extension": self._extension,
            STARTED_EVENT: self._started,
        }

    def _started(self, args: tuple[Any, ...]) -> None:
        self._asker.started = True

    def install(self) -> None:
        """Put the finder first and the wrappers in place (before the hook is sealed)."""
        sys.meta_path.insert(0, self.finder)  # type: ignore[arg-type]
        builtins.__import__ = self._wrappers[0]
        self._bootstrap._gcd_import = self._wrappers[1]

    # -- verdicts ---------------------------------------------------------------------

    def _allows(self, module: str) -> bool:
        """The verdict for ``module`` (a dotted name is judged on its top level, except
        for the kept modules, whose submodules need a rule)."""
        known = self._allowed.get(module)
        if known is None:
            if len(self._allowed) > 8192:
                self._allowed.clear()
            allowed = module in _PUBLIC or (
                not _private(module) and self._judge.judge(module).allowed
            )
            known = self._allowed[module] = allowed
        return known

    def _refuse(self, top: str, module: str) -> None:
        if _private(module):
            self._enforcer.refuse_import(
                module,
                f"Importing {module} is refused by the import guard: it is the sandbox's "
                "own code, which no rule lets the program use (pysandboxes, its "
                "errors, mcp and notebook are its public modules).",
            )
            return
        shown = module if module == top else f"{module} (top-level module {top})"
        self._enforcer.refuse_import(
            top,
            f"Importing {shown} is refused by the import guard: no python-import rule "
            f"allows it. Add 'python-import={top}' to {self._rule_file} to allow it.",
        )

    # -- events -----------------------------------------------------------------------

    def _reported(self, args: tuple[Any, ...]) -> None:
        if len(args) != 4:
            return
        self._keep_finder_first()
        door, name, context, level = plain_str(args[0]), plain_str(args[1]), args[2], args[3]
        if name is None or door is None:
            return
        if type(level) is not int or level < 0:
            return  # the import itself raises
        if level:
            name = self._absolute(door, name, context, level)
            if name is None:
                return
        top = name.partition(".")[0]
        if top in self._learned:
            return  # learning: recorded already
        loaded = door != "find" and name in sys.modules
        frameless = loaded and name in _PROMPT_IMPORTS
        asked = self._asked_by_program(loaded=loaded, frameless=frameless, name=name)
        if not top or self._allows(name) or not asked:
            return
        if door == "find":
            if not self._exists(top, name, context):
                return  # the ordinary ModuleNotFoundError follows
        elif top not in sys.modules and not self._exists(top, top, None):
            return
        self._refuse(top, name)

    def _absolute(self, door: str, name: str, context: object, level: int) -> str | None:
        bootstrap = self._bootstrap
        try:
            package = context
            if door == "statement":
                package = bootstrap._calc___package__(context if isinstance(context, dict) else {})
            if not isinstance(package, str):
                return None
            return bootstrap._resolve_name(name, plain_str(package), level)
        except Exception:  # a bad relative import: the import system says why
            return None

    def _exists(self, top: str, name: str, path: object) -> bool:
        """Whether some other finder would find the module (no refusal for a typo)."""
        if top in sys.modules:
            return True
        for finder in list(sys.meta_path):
            if finder is self.finder:
                continue
            find_spec = getattr(finder, "find_spec", None)
            try:
                if find_spec is not None and find_spec(name, path) is not None:
                    return True
            except Exception:  # a broken finder finds nothing
                continue
        return False

    def _exec(self, args: tuple[Any, ...]) -> None:
        self._keep_finder_first()
        code = args[0] if args else None
        code_module = None
        if type(code) is CodeType:
            # The file the code says it comes from: reading it is not audited, and code
            # of a module file of an allowed module is that module, whatever it is named.
            code_module = self._module_of_file(plain_str(code.co_filename))  # type: ignore[union-attr]
            if code_module is not None and self._allows(code_module):
                return
        frame: FrameType | None = current_frame()
        own = self._own
        while frame is not None and id(frame.f_globals) in own:
            frame = frame.f_back
        if frame is None or frame.f_globals is not self._bootstrap_globals:
            return  # not the import system running a module's code (f_code is audited)
        if frame.f_code is not self._frames_removed:
            return
        call_args = frame.f_locals.get("args")
        if type(call_args) is not tuple or len(call_args) < 2 or type(call_args[1]) is not dict:  # type: ignore[arg-type]
            return
        namespace: dict[str, Any] = call_args[1]  # type: ignore[index]
        spec = namespace.get("__spec__")
        claims = (
            plain_str(namespace.get("__name__")),
            plain_str(getattr(spec, "name", None)),
            plain_str(getattr(spec, "origin", None)),
            plain_str(namespace.get("__file__")),
            code_module,
        )
        refused = self._refused_claims.get(claims)
        if refused is None:
            refused = self._refused_claims[claims] = self._judge_claims(*claims)
        # The code comes from outside the interpreter's trees (frozen modules are in them).
        filename = plain_str(code.co_filename) if type(code) is CodeType else None  # type: ignore[union-attr]
        program_file = code_module is None and not (filename or "").startswith("<frozen ")
        if refused and self._asked_by_program(
            frame.f_back, frame.f_code.co_name, program_file=program_file
        ):
            self._refuse(refused.partition(".")[0], refused)

    def _judge_claims(
        self,
        name: str | None,
        spec_name: str | None,
        origin: str | None,
        file: str | None,
        code_module: str | None,
    ) -> str:
        """The first module refused among what a module's code and namespace say it is."""
        names = {name, spec_name, self._module_of_file(origin), self._module_of_file(file)}
        names.add(code_module)
        return next((n for n in sorted(n for n in names if n) if not self._allows(n)), "")

    def _extension(self, args: tuple[Any, ...]) -> None:
        """An extension module created from a spec (see ``calls.guard_unreported``)."""
        self._keep_finder_first()
        spec = args[0] if args else None
        name = plain_str(getattr(spec, "name", None))
        claims = (name, self._module_of_file(plain_str(getattr(spec, "origin", None))))
        refused = next((n for n in claims if n and not self._allows(n)), None)
        if refused and self._asked_by_program():
            self._refuse(refused.partition(".")[0], refused)

    def _module_of_file(self, path: str | None) -> str | None:
        """The top-level module a file of the standard library or of a library belongs to."""
        if path is None:
            return None
        if path in self._file_modules:
            return self._file_modules[path]
        found = self._find_module_of_file(path)
        # Kept only for plain paths inside the interpreter's trees, which the sandbox may
        # not write: elsewhere a link swapped later would make a kept answer stale.
        plain = "//" not in path and "/./" not in path and "/../" not in path
        if plain and path.startswith(self._trees):
            if len(self._file_modules) > 8192:
                self._file_modules.clear()
            self._file_modules[path] = found
        return found

    def _find_module_of_file(self, path: str) -> str | None:
        # A path is judged as the kernel opens it: "<stdlib>/../../tmp/x.py" is /tmp/x.py,
        # and "//<stdlib>/x.py", "/proc/self/root/<stdlib>/x.py" or a link to it is x.
        if not path.startswith("/"):
            return self._module_under_root(path)
        try:
            real = self._realpath(path)
        except (OSError, ValueError, Unjudgeable):  # unreadable: C fails to open it too
            real = path
        found = self._module_under_root(real)
        return found if found is not None else self._module_under_root(os.path.normpath(path))

    def _module_under_root(self, path: str) -> str | None:
        for own in OWN_DIRS:
            if path.startswith(own):
                # The sandbox's own files are named in full: most are private.
                dotted = path[len(own) :].removesuffix(".py").removesuffix("/__init__")
                return ".".join(["pysandboxes", *dotted.split("/")]).removesuffix(".__init__")
        for root in self._roots_deepest_first:
            if path.startswith(root):
                first = path[len(root) :].split("/")[0]
                if first == "lib-dynload":
                    first = path.rsplit("/", 1)[-1]
                return first.split(".")[0] or None
        return None

    def _keep_finder_first(self) -> None:
        meta = sys.meta_path
        if type(meta) is list and meta and meta[0] is self.finder:  # type: ignore[comparison-overlap]
            return
        try:
            rest = [f for f in list(meta) if f is not self.finder]
        except Exception:  # not iterable: start again from the finder
            rest = []
        sys.meta_path = [self.finder, *rest]  # type: ignore[list-item]

    # -- who asked --------------------------------------------------------------------

    def _asked_by_program(
        self,
        frame: FrameType | None = None,
        callee: str = "",
        *,
        loaded: bool = False,
        program_file: bool = False,
        frameless: bool = False,
        name: str = "",
    ) -> bool:
        """Whether the program asked (``askers``); from here, or from ``frame``."""
        start = current_frame() if frame is None else frame
        asker = self._asker
        return asker.asked_by_program(
            start, callee, loaded=loaded, program_file=program_file, frameless=frameless, name=name
        )
