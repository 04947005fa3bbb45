"""Code made from strings at run time: ``eval``, ``exec``, ``compile``, ``code.replace``.

Refused for the program's own code unless ``python-api`` grants ``dynamic-code``. The
interpreter's own use (the standard library's ``namedtuple`` and ``dataclasses``, the
import system, installed packages, and this framework) is "ambient" and never charged to
the program: the decision is made on the file of the code that asked, and the standard
library modules that merely compile what they are handed (``timeit``, ``doctest``...)
count as the program.
"""

from __future__ import annotations

import os
import types
from _io import open as _open

from pysandboxes._inside.enforce import call_refusal
from pysandboxes._inside.guards.askers import OWN_DIRS, bottom_code
from pysandboxes._inside.guards.audit import current_frame
from pysandboxes._inside.guards.codeshapes import (
    GENERATING,
    looks_like_a_type,
    source_text,
    written_in_a_file,
)
from pysandboxes._inside.guards.importcode import ImportSystemCode, file_name
from pysandboxes._inside.guards.prompt import PromptInput

# Bound now: a program may replace what the os.path module holds.
_normpath = os.path.normpath

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import CodeType, FrameType
    from typing import Any

    from pysandboxes._inside.enforce import Enforcer
    from pysandboxes._policy.judge import ApiJudge

_DYNAMIC = ("builtins.compile", "builtins.eval", "builtins.exec")
#: The names a package's code uses when it compiles, or builds code, itself.
_COMPILING = frozenset({"compile", "exec", "eval"})
#: The builtins themselves, as a package's own alias may name them (``mpmath``'s and
#: ``six``'s ``exec_``): bound now, before the program can replace them.
_COMPILERS = (compile, exec, eval)
_BUILDING = frozenset({"CodeType", "replace", "__replace__"})
#: The import system: it compiles module files, never strings (``<frozen importlib...>``
#: and these): ambient only when the file named is a real one.
_IMPORTING = frozenset({"importlib", "runpy", "zipimport", "pkgutil"})
#: Evaluate strings of annotations: ambient only for strings that cannot call.
_ANNOTATIONS = frozenset({"typing", "inspect"})
#: Compiling interactive input: ambient only in an interactive session, for the session
#: itself (3.13's prompt is _pyrepl, run by runpy).
_INTERACTIVE = frozenset({"code", "codeop", "_pyrepl"})
_SESSION = frozenset({*_INTERACTIVE, "runpy"})
#: The import lines of .pth files (site.addpackage): ambient when the line is one of a
#: .pth file of the interpreter's own trees, read again here.
_PTH = ("site", "addpackage")


def _names(frame: FrameType, names: frozenset[str], sealed: Sequence[object]) -> bool:
    """Whether the code of ``frame`` names one of ``names``, or (compiling) an alias of
    one (``exec_``, ``_eval``) that its module's globals bind to the builtin itself. Only
    such names: a global the program rebound to ``exec`` (``lib.log = exec``) would turn
    any call of the package with the program's text into the package's compiling.
    ``sealed``: the guarded builtins in place (``eval-*`` profiles), aliases too."""
    code_names = frame.f_code.co_names
    if not names.isdisjoint(code_names):
        return True
    found = frame.f_globals
    if names is not _COMPILING or type(found) is not dict:
        return False
    return any(
        type(name) is str
        and name.strip("_") in _COMPILING
        and any(found.get(name) is builtin for builtin in (*_COMPILERS, *sealed))
        for name in code_names
    )


def _never(frame: FrameType | None) -> bool:
    """No ``eval-*`` profile in force: no ``compile`` is a checked source's."""
    return False


class DynamicCodeGuard:
    """Judges the ``compile`` and ``code.__new__`` audit events by who asked."""

    def __init__(
        self,
        api: ApiJudge,
        enforcer: Enforcer,
        stdlib: str,
        third_party: Sequence[str],
        own_globals: Sequence[dict[str, object]],
        rule_file: str,
        *,
        interactive: bool = False,
        sealed: Sequence[object] = (),
        vouching: Callable[[frozenset[int]], Callable[[FrameType | None], bool]] | None = None,
        served_by: CodeType | None = None,
    ) -> None:
        """``sealed`` and ``vouching`` come from the evaluated code's machinery when
        ``eval-*`` profiles are in force: the guarded builtins, and the test of a
        ``compile`` made for a checked source (``_inside/evaluation``). ``served_by``, in
        partial mode: the server's code that calls ``@sandbox`` functions."""
        self._api = api
        self._allowed = any(api.judge(name).allowed for name in _DYNAMIC)
        self._marshal_allowed = api.judge("marshal.loads").allowed
        self._stdlib = stdlib.rstrip("/") + "/"
        self._third_party = tuple(third_party)
        self._kept = tuple(own_globals)  # alive, so that their ids stay theirs
        self._own = frozenset(id(g) for g in self._kept)
        self._rule_file = rule_file
        self._enforcer = enforcer
        self._roots = (self._stdlib, *self._third_party)
        self._import_code = ImportSystemCode(self._own, self._installed, self._roots)
        self._interactive: frozenset[str] = _INTERACTIVE if interactive else frozenset[str]()
        self._coroutine = types.coroutine.__code__
        self._boot = bottom_code()  # the boot code, at the bottom of a session's stack
        self._sealed = sealed
        self._served_by = served_by
        self._vouches = vouching(self._own) if vouching is not None else _never
        self._prompt = PromptInput()  # what fd 0 is now, before any code of the program

    @property
    def events(self) -> dict[str, Callable[[tuple[Any, ...]], None]]:
        """The audit events judged here."""
        # Always watched, even with dynamic-code granted: code named after a library file
        # would pass for the library with the import and integrity guards.
        handlers: dict[str, Callable[[tuple[Any, ...]], None]] = {
            "compile": self._compile,
            "code.__new__": self._code_new,
        }
        if not self._marshal_allowed:
            # marshal turns bytes into code objects (category deserialization); the import
            # system's own use, reading .pyc files, is ambient.
            handlers["marshal.loads"] = self._marshal
            handlers["marshal.load"] = self._marshal
        return handlers

    def _caller(self) -> FrameType | None:
        # The guards' own frames are recognised by their globals, never by reading their
        # code (which the integrity guard watches); the sandbox's other files act for
        # their caller and lend it no trust (the runner compiles what it is handed).
        frame: FrameType | None = current_frame()
        own = self._own
        while frame is not None and (
            id(frame.f_globals) in own or frame.f_code.co_filename.startswith(OWN_DIRS)
        ):
            frame = frame.f_back
        return frame

    def _user_code(self, source: object = None, compiled: object = None) -> bool:
        """Whether the code asking is the program's (see the module docstring).

        ``source`` and ``compiled`` are the ``compile`` event's arguments: the text and
        the file name it is compiled as.
        """
        frame = self._asking(_COMPILING)
        if frame is None:
            # No frame: C called in, for the program (an atexit callback, a thread started
            # on exec). Only the interpreter's own prompt (-i) compiles with no source
            # object to hand: it parses what is typed itself, on the original fd 0.
            if source is None and self._prompt.fed():
                if not self._allowed:
                    self._prompt.refuse(self._enforcer, self._rule_file)
                return True
            return source is not None
        code = frame.f_code
        filename = code.co_filename
        if self._installed(filename):
            return False  # an installed package's own compiling (see docs/security.md)
        module = self._module(filename)
        if module is None:
            return True
        if module in _IMPORTING:
            return not self._import_code.genuine_compile(compiled)
        if module in _ANNOTATIONS:
            return not (
                looks_like_a_type(source)
                or (self._package_asked(frame) and written_in_a_file(source, frame))
            )
        if module in self._interactive:
            return not self._session(frame)
        check = GENERATING.get((module, code.co_name))
        if check is not None:
            return not check(source, frame)
        if (module, code.co_name) == _PTH:
            return not self._installed_pth_line(source, frame)
        return True

    def _package_asked(self, frame: FrameType | None) -> bool:
        """Whether the first frame under ``frame`` that is not the standard library's
        (nor the sandbox's) is an installed package's: pydantic or FastAPI reading the
        annotations of a model as they build it, not the program calling ``typing``."""
        for _ in range(256):
            if frame is None:
                return False
            filename = frame.f_code.co_filename
            if not filename.startswith(OWN_DIRS) and self._module(filename) is None:
                return self._installed(filename)
            frame = frame.f_back
        return False

    def _session(self, frame: FrameType | None) -> bool:
        """Whether the interactive session compiles for itself: the console's frames
        called by the sandbox's runner, by an installed shell (IPython) or by C (-i),
        with no frame of the program's under them. Called by the program, or by the
        standard library (a thread pool's worker compiles for whoever submitted the
        work), the console compiles for the program."""
        for _ in range(256):
            if frame is None:
                return True
            code = frame.f_code
            if code is self._boot:
                return frame.f_back is None
            filename = code.co_filename
            if not filename.startswith(OWN_DIRS) and self._module(filename) not in _SESSION:
                return self._installed(filename)
            frame = frame.f_back
        return False

    def _module(self, filename: str) -> str | None:
        """The top-level standard module of ``filename``, if it is one."""
        if filename.startswith("<frozen "):
            return filename[len("<frozen ") :].split(".")[0].rstrip(">")
        if filename.startswith(self._stdlib) and _normpath(filename) == filename:
            return filename[len(self._stdlib) :].split("/")[0].removesuffix(".py")
        return None

    def _installed_pth_line(self, source: object, frame: FrameType) -> bool:
        """Whether ``source`` is a line of the .pth file ``site.addpackage`` is reading,
        and that file one of the interpreter's trees: the file is read again here, since
        the program may have changed what ``site`` reads it with."""
        text = source_text(source)
        fullname = frame.f_locals.get("fullname")
        if text is None or type(fullname) is not str:
            return False
        path = _normpath(fullname)
        if not path.startswith(self._roots):
            return False
        try:
            with _open(path, "rb") as pth:
                lines = pth.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return False
        return text.rstrip("\r\n") in lines

    def _compile(self, args: tuple[Any, ...]) -> None:
        source = args[0] if args else None
        compiled = args[1] if len(args) > 1 else None
        if self._vouches(current_frame()):  # a checked eval-* source (_inside/evaluation)
            return
        if self._served_by is not None and self._trusted_sides_text(current_frame()):
            return
        if not self._user_code(source, compiled):
            return
        if not self._allowed:
            self._refuse("eval(), exec() and compile()", "builtins.compile")
        self._refuse_disguise(compiled, "Compiling")

    def _trusted_sides_text(self, frame: FrameType | None) -> bool:
        """Whether this ``compile`` is made by code of this package's public modules
        (``pysandboxes.notebook``'s ``%%sandbox`` cell runner) that the server called for
        the trusted side, with nothing of the program's between them: the text is then
        what the trusted side sent, the program's own text, as a script is. Code the cell
        runs compiles under the program's frames, judged as ever."""
        while frame is not None and id(frame.f_globals) in self._own:
            frame = frame.f_back  # the hook's and the guards' frames
        if frame is None or not frame.f_code.co_filename.startswith(OWN_DIRS):
            return False
        caller = frame.f_back  # the @sandbox wrapper, then the server
        while caller is not None and caller.f_code is not self._served_by:
            if id(caller.f_globals) not in self._own:
                return False
            caller = caller.f_back
        return caller is not None

    def _asking(self, names: frozenset[str]) -> FrameType | None:
        """The frame that asked: past the guards' and the sandbox's frames, and past an
        installed package that called what it was handed (its code names none of
        ``names``: a thread's target, a callback), with every frame under it that is not
        the program's or the standard library's."""
        frame = self._caller()
        handed = False
        while frame is not None:
            code = frame.f_code
            filename = code.co_filename
            if filename.startswith(OWN_DIRS):
                pass  # acts for its caller
            elif not self._installed(filename) or (
                not handed and _names(frame, names, self._sealed)
            ):
                return frame
            else:
                handed = True
            frame = frame.f_back
        return None

    def _installed(self, filename: str) -> bool:
        """Whether ``filename`` is a file of an installed package (not this sandbox's,
        not "<library>/../elsewhere", which claims a place it is not in)."""
        return (
            filename.startswith(self._third_party)
            and not filename.startswith(OWN_DIRS)
            and _normpath(filename) == filename
        )

    def _code_new(self, args: tuple[Any, ...]) -> None:
        # Code objects are built only through this judged route, whoever calls it: the one
        # rebuild of the standard library's own is types.coroutine flipping a flag of a
        # function's code (name, file and bytecode unchanged); copy.replace, modulefinder
        # and the rest build what their caller hands them, for the program.
        frame = self._asking(_BUILDING)
        if frame is not None and (
            frame.f_code is self._coroutine or self._installed(frame.f_code.co_filename)
        ):
            return
        if not self._allowed:
            # Reported as the registered function whose grant would allow it.
            what = "Building a code object (types.CodeType, code.replace)"
            self._refuse(what, "builtins.compile")
        self._refuse_disguise(args[1] if len(args) > 1 else None, "Building")

    def _refuse_disguise(self, filename: object, verb: str) -> None:
        """Refuse program code named after a file of the interpreter's trees."""
        name = file_name(filename)
        if name is None:
            return
        # "<frozen json>" is what the frozen modules' code is named: the import, dynamic
        # and integrity guards take it for the interpreter's, like a file of its trees.
        if name.startswith("<frozen") or (
            name.startswith("/") and _normpath(name).startswith(self._roots)
        ):
            self._enforcer.refuse_call(
                "builtins.compile",
                "dynamic-code",
                f"{verb} code named after the library file {name!r} is refused: the sandbox "
                "trusts code by the file it names, and no rule can allow a program's code "
                "to pass for the library's.",
            )

    def _marshal(self, args: tuple[Any, ...]) -> None:
        if not self._import_code.module_bytecode():
            message = call_refusal(self._api, "marshal.loads", "deserialization", self._rule_file)
            self._enforcer.refuse_call("marshal.loads", "deserialization", message)

    def _refuse(self, what: str, qualname: str) -> None:
        self._enforcer.refuse_call(
            qualname,
            "dynamic-code",
            f"{what} of source code by the program is refused by the API guard (category: "
            f"dynamic-code).{self._library_context()} Add 'python-api=ALLOW:dynamic-code' to "
            f"{self._rule_file} to allow it.",
        )

    def _library_context(self) -> str:
        """Where a library compiled for the program: its frame, and the program's line
        that led there (a traceback may show neither)."""
        frame = self._caller()
        if frame is None or not self._library(frame.f_code.co_filename):
            return ""
        asked = f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_qualname})"
        program = frame.f_back
        for _ in range(256):
            if program is None or not self._library(program.f_code.co_filename):
                break
            program = program.f_back
        if program is None:
            return f" It was compiled by {asked}."
        line = f"{program.f_code.co_filename}:{program.f_lineno}"
        return f" It was compiled by {asked}, for the program's line {line}."

    def _library(self, filename: str) -> bool:
        """Whether ``filename`` is the standard library's, an installed package's or the
        sandbox's: not the program's."""
        return (
            filename.startswith(OWN_DIRS)
            or self._module(filename) is not None
            or self._installed(filename)
        )
