"""Who asked for an import: the program, a library for itself, or the sandbox.

The frames under an import are walked outward from it; the first that decides says whose
the import is:

- a frame of the program decides: the program's;
- a frame of a library (the standard library, an installed package) decides when the
  import is its own: an ``import`` statement being run there, or a call to the very
  function doing the import, written in its code (``__import__(name)``,
  ``spec.loader.exec_module(module)``: the callee's name is among the names the code uses);
- a library frame that called something it was handed (a thread's target, a callback, a
  finder or hook the program installed: the import function that ran is not named in its
  code) decides nothing: it and every frame under it up to the program are looked through,
  as are the known resolvers (``importlib.import_module``, ``pkgutil.resolve_name``...,
  see ``resolvers``) and the library frames that called them;
- the import system's machinery and the sandbox's own files are looked through: they act
  for their caller and lend it no trust. The one exception is an ``import`` statement of
  the sandbox's own, run by its frames alone down to the interpreter's first frame (the
  runner starting the interactive session): nothing of the program is on that stack;
- a walk that finds no frame left, decided by nothing, is the program's: a function C
  calls with no Python frame (an ``atexit`` callback, a ``_thread`` started on a builtin)
  runs on the program's behalf.

Before the program starts (the runner says when: ``STARTED_EVENT``), no code of the
program has run and every import is the sandbox's own start (the interactive shell's
included), save code from outside the interpreter's trees: a module of the program's
(named by ``PYTHONWARNINGS``, say) would run program code before it starts.
"""

from __future__ import annotations

import os
from opcode import opmap

from pysandboxes._inside.guards.resolvers import LIBRARY_NAMES, RESOLVERS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from types import CodeType, FrameType

#: The sandbox's own package directory (and its real path): its frames lend no trust.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OWN_DIRS = tuple({_PACKAGE + "/", os.path.realpath(_PACKAGE) + "/"})

_MACHINERY = frozenset({"importlib._bootstrap", "importlib._bootstrap_external", "zipimport"})
PROGRAM, LIBRARY, MACHINE, OWN = 0, 1, 2, 3
_IMPORT_NAME = opmap["IMPORT_NAME"]
#: Operators whose C code may import a module for itself: from 3.12, ``X[T] | None`` of a
#: typing generic imports ``typing`` while the frame runs the ``|``.
_OPERATORS = frozenset(opmap[name] for name in ("BINARY_OP", "BINARY_SUBSCR") if name in opmap)
#: Raised by the runner as the program's code is about to run (by the session, as the
#: first line typed is): the imports before it are the sandbox's own start. The program
#: raising it early only ends that sooner.
STARTED_EVENT = "pysandboxes.started"
#: The import system's one generic trampoline: it calls what the machinery hands it (the
#: import function of a ``from`` list, a loader's method), so its caller is asked instead.
_TRAMPOLINE = "_call_with_frames_removed"


def is_own_file(filename: str) -> bool:
    """Whether code of ``filename`` is one of the sandbox's own files."""
    return filename.startswith(OWN_DIRS)


def bottom_code() -> CodeType:
    """The code of the outermost frame of this thread: called while the bootstrap runs,
    the interpreter's first frame (the boot code that runs the program)."""
    import sys

    frame = sys._getframe()  # before the hook: not yet judged
    while frame.f_back is not None:
        frame = frame.f_back
    return frame.f_code


def _chosen_outside(callee: str, name: str, module: str, code: CodeType) -> bool:
    """Whether a library's ``__import__(name)`` imports a name its code does not fix:
    neither a constant of the calling function, nor a module of the library's own
    package (``encodings.<codec>``, ``dbm.dumb``, ``pygments.lexers.python``), nor one it
    computes itself
    (``resolvers.LIBRARY_NAMES``). Such a name may come from the program
    (``dbm._names = ["csv"]``): the import is then judged as its caller's."""
    if callee != "__import__" or not name:
        return False
    if name in code.co_consts:
        return False
    package = module.partition(".")[0]
    if package and (name == package or name.startswith(package + ".")):
        return False
    return name not in LIBRARY_NAMES.get(module, ())


class ImportAsker:
    """Says whether an import was asked by the program (see the module docstring)."""

    def __init__(
        self,
        stdlib: str,
        libraries: Iterable[str],
        own: set[int],
        program_code: Iterable[CodeType],
        boot_code: CodeType | None = None,
    ) -> None:
        self._stdlib = stdlib.rstrip("/") + "/"
        self._libraries = tuple(r.rstrip("/") + "/" for r in libraries)
        self._own = own  # ids of the guards' globals (the hook, the sealed functions)
        self._program_code = frozenset(program_code)
        self._boot_code = boot_code
        self._kinds: dict[str, tuple[int, str]] = {}
        #: Whether the program has started (STARTED_EVENT): one way, never back.
        self.started = False

    def asked_by_program(
        self,
        frame: FrameType | None,
        callee: str = "",
        *,
        loaded: bool = False,
        program_file: bool = False,
        frameless: bool = False,
        name: str = "",
    ) -> bool:
        """Whether the import under way at ``frame`` (the innermost frame to consider;
        ``callee`` is the name of the function it called) of module ``name`` (when known)
        is the program's.

        ``loaded``: the module is in ``sys.modules`` already and nothing is loaded. A
        library that called C code importing such a module for itself (``re.sub`` with a
        template, ``str.encode``) is then taken at its word: nothing would be gained.
        ``program_file``: the code about to run comes from outside the interpreter's trees
        (the program's own files), which is never the sandbox's start.
        ``frameless``: the interpreter itself may ask for it with no Python frame at all."""
        if not self.started and not program_file:
            return False  # the sandbox starting: no code of the program has run yet
        looking_through = False
        only_own = True  # no frame but the guards' and the sandbox's so far
        innermost = True
        for _ in range(256):
            if frame is None:
                # No frame decided: C called in for the program; but with no Python frame
                # at all, the interpreter itself (3.13's prompt registers each line typed
                # with linecache) wants a module loaded already: nothing runs.
                return not (only_own and frameless)
            code = frame.f_code
            if id(frame.f_globals) in self._own:
                # The guards' frames; one at its own import statement is the sandbox's.
                if not looking_through and self._at_import(frame, code):
                    return False
            elif code in self._program_code:
                return True
            else:
                kind, module = self._kind(code.co_filename)
                only_own = only_own and kind == OWN
                if innermost and loaded and kind != OWN and self._at_operator(frame, code):
                    return False  # an operator's C code, for itself: nothing is handed out
                innermost = innermost and kind == OWN
                if kind == PROGRAM:
                    return True
                at_import = self._at_import(frame, code)
                named = (
                    at_import
                    or callee in code.co_names
                    or (kind == MACHINE and code.co_name == _TRAMPOLINE)
                )
                if kind == OWN:
                    # Acts for its caller, which is then asked about what it called.
                    if at_import and not looking_through and self._own_stack(frame.f_back):
                        return False  # the sandbox starting its session (see above)
                    frame = frame.f_back
                    continue
                if kind == LIBRARY and (module, code.co_name) in RESOLVERS and not at_import:
                    looking_through = True
                elif named and not looking_through:
                    if at_import:
                        return False  # its own import
                    if kind == LIBRARY:
                        package = module or self._installed_package(code.co_filename)
                        if loaded or not _chosen_outside(callee, name, package, code):
                            return False  # its own import (or nothing loaded: see above)
                        looking_through = True  # a name its caller may have chosen
                elif not named:
                    if loaded and kind == LIBRARY and not looking_through:
                        return False  # C it called wants a module loaded already
                    looking_through = True  # it called what it was handed
            callee = code.co_name
            frame = frame.f_back
        return True

    def _at_operator(self, frame: FrameType, code: CodeType) -> bool:
        """Whether ``frame`` is running an operator (never a call: ``__import__(name)``
        and ``importlib.import_module`` stay the caller's)."""
        lasti = frame.f_lasti
        return lasti >= 0 and code.co_code[lasti] in _OPERATORS

    def _at_import(self, frame: FrameType, code: CodeType) -> bool:
        """Whether ``frame`` is running an ``import`` statement of its own code."""
        lasti = frame.f_lasti
        return lasti >= 0 and code.co_code[lasti] == _IMPORT_NAME

    def _own_stack(self, frame: FrameType | None) -> bool:
        """Whether ``frame`` and every frame under it are the sandbox's own, down to the
        boot code: the runner's, with nothing of the program between."""
        for _ in range(64):
            if frame is None:
                return False
            if frame.f_code is self._boot_code:
                return frame.f_back is None
            if self.kind(frame.f_code.co_filename) != OWN:
                return False
            frame = frame.f_back
        return False

    def _installed_package(self, filename: str) -> str:
        """The top-level package of an installed package's file, by where it lies (its
        ``__name__`` is the program's to change)."""
        root = next((r for r in self._libraries if filename.startswith(r)), None)
        if root is None:
            return ""
        return filename[len(root) :].partition("/")[0].removesuffix(".py")

    def kind(self, filename: str) -> int:
        """``PROGRAM``, ``LIBRARY``, ``MACHINE`` or ``OWN``."""
        return self._kind(filename)[0]

    def _kind(self, filename: str) -> tuple[int, str]:
        known = self._kinds.get(filename)
        if known is None:
            if len(self._kinds) > 8192:
                self._kinds.clear()
            known = self._kinds[filename] = self._classify(filename)
        return known

    def _classify(self, filename: str) -> tuple[int, str]:
        if filename.startswith("/") and os.path.normpath(filename) != filename:
            return PROGRAM, ""  # "<stdlib>/../elsewhere": not where it claims to be
        if filename.startswith(OWN_DIRS):
            return OWN, ""
        if filename.startswith("<frozen "):
            module = filename[len("<frozen ") :].rstrip(">")
            return (MACHINE if module in _MACHINERY else LIBRARY), module
        if filename.startswith(self._stdlib):
            relative = filename[len(self._stdlib) :].removesuffix(".py")
            module = relative.removesuffix("/__init__").replace("/", ".")
            return (MACHINE if module in _MACHINERY else LIBRARY), module
        if filename.startswith(self._libraries):
            return LIBRARY, ""
        return PROGRAM, ""
