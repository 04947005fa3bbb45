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
import sys
from _io import open as _open

from pysandboxes._inside.enforce import call_refusal
from pysandboxes._inside.guards.audit import current_frame
from pysandboxes._inside.guards.codeshapes import GENERATING, looks_like_a_type, source_text
from pysandboxes._inside.guards.values import plain_bytes, plain_str

# Bound now: a program may replace what the os.path module holds.
_normpath = os.path.normpath

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import FrameType
    from typing import Any

    from pysandboxes._inside.enforce import Enforcer
    from pysandboxes._policy.judge import ApiJudge

_DYNAMIC = ("builtins.compile", "builtins.eval", "builtins.exec")
#: The import system: it compiles module files, never strings (``<frozen importlib...>``
#: and these): ambient only when the file named is a real one.
_IMPORTING = frozenset({"importlib", "runpy", "zipimport", "pkgutil"})
#: Evaluate strings of annotations: ambient only for strings that cannot call.
_ANNOTATIONS = frozenset({"typing", "inspect"})
#: Compiling interactive input: ambient only in an interactive session.
_INTERACTIVE = frozenset({"code", "codeop"})
#: The import lines of .pth files (site.addpackage): ambient when the line is one of a
#: .pth file of the interpreter's own trees, read again here.
_PTH = ("site", "addpackage")


def _file_name(name: object) -> str | None:
    """A file name argument as a plain ``str`` (``bytes`` decoded), else ``None``."""
    raw = plain_bytes(name)
    return raw.decode("utf-8", "surrogateescape") if raw is not None else plain_str(name)


#: What the import system calls on a file loader while it reads a module's bytecode
#: (get_code and source_to_code are checked by their frames' code instead).
_LOADER_METHODS = ("get_data", "path_stats", "get_filename")


def _has_own_methods(loader: object) -> bool:
    """Whether the loader object shadows a method of its class with its own attribute."""
    try:
        own: dict[str, object] = object.__getattribute__(loader, "__dict__")
    except AttributeError:
        return False
    return type(own) is not dict or not own.keys().isdisjoint(_LOADER_METHODS)


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
    ) -> None:
        self._api = api
        self._allowed = any(api.judge(name).allowed for name in _DYNAMIC)
        self._marshal_allowed = api.judge("marshal.loads").allowed
        self._stdlib = stdlib.rstrip("/") + "/"
        self._third_party = tuple(third_party)
        self._kept = tuple(own_globals)  # alive, so that their ids stay theirs
        self._own = frozenset(id(g) for g in self._kept)
        self._rule_file = rule_file
        self._enforcer = enforcer
        external: Any = sys.modules["_frozen_importlib_external"]
        self._external_globals: dict[str, Any] = vars(external)
        self._source_loader = external.SourceFileLoader
        self._sourceless_loader = external.SourcelessFileLoader
        self._source_get_code = external.SourceLoader.get_code.__code__
        self._sourceless_get_code = external.SourcelessFileLoader.get_code.__code__
        self._methods = tuple(
            (holder, name, getattr(holder, name))
            for holder in (external.SourceFileLoader, external.SourcelessFileLoader)
            for name in _LOADER_METHODS
            if hasattr(holder, name)
        ) + ((external, "cache_from_source", external.cache_from_source),)
        self._roots = (self._stdlib, *self._third_party)
        self._source_to_code = external.SourceLoader.source_to_code.__code__
        self._bootstrap_globals: dict[str, Any] = vars(sys.modules["_frozen_importlib"])
        zipimport: Any = sys.modules.get("zipimport")
        self._zip_globals: dict[str, Any] | None = vars(zipimport) if zipimport else None
        self._zip_compile_source = zipimport._compile_source.__code__ if zipimport else None
        self._zip_get_module_code = zipimport._get_module_code.__code__ if zipimport else None
        zipimporter: Any = zipimport.zipimporter if zipimport else None
        self._zip_get_code = zipimporter.get_code.__code__ if zipimporter else None
        # get_filename compiles too (3.11, 3.12), and returns only the file's name.
        self._zip_get_filename = zipimporter.get_filename.__code__ if zipimporter else None
        self._exec_module = external._LoaderBasics.exec_module.__code__
        runpy: Any = sys.modules.get("runpy")
        self._runpy_details = runpy._get_module_details.__code__ if runpy else None
        self._interactive: frozenset[str] = _INTERACTIVE if interactive else frozenset[str]()

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
        # code (which the integrity guard watches).
        frame: FrameType | None = current_frame()
        own = self._own
        while frame is not None and id(frame.f_globals) in own:
            frame = frame.f_back
        return frame

    def _user_code(
        self, source: object = None, compiled: object = None, *, any_stdlib: bool = False
    ) -> bool:
        """Whether the code asking is the program's (see the module docstring).

        ``source`` and ``compiled`` are the ``compile`` event's arguments: the text and
        the file name it is compiled as.
        """
        frame = self._caller()
        if frame is None:
            return False  # C code: the interpreter itself (the interactive prompt)
        code = frame.f_code
        filename = code.co_filename
        if filename.startswith("/") and _normpath(filename) != filename:
            return True  # "<library>/../elsewhere" claims a place it is not in
        if filename.startswith(self._third_party):
            return False  # an installed package (see docs/security.md)
        if filename.startswith("<frozen "):
            module = filename[len("<frozen ") :].split(".")[0].rstrip(">")
        elif filename.startswith(self._stdlib):
            module = filename[len(self._stdlib) :].split("/")[0].removesuffix(".py")
        else:
            return True
        if any_stdlib:
            return False
        if module in _IMPORTING:
            return not self._genuine_compile(compiled)
        if module in _ANNOTATIONS:
            return not looks_like_a_type(source)
        if module in self._interactive:
            return False
        check = GENERATING.get((module, code.co_name))
        if check is not None:
            return not check(source, frame)
        if (module, code.co_name) == _PTH:
            return not self._installed_pth_line(source, frame)
        return True

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
        if not self._user_code(source, compiled):
            return
        if not self._allowed:
            self._refuse("eval(), exec() and compile()", "builtins.compile")
        self._refuse_disguise(compiled, "Compiling")

    def _code_new(self, args: tuple[Any, ...]) -> None:
        # The standard library only rebuilds code it holds (types.coroutine flips a flag).
        if not self._user_code(any_stdlib=True):
            return
        if not self._allowed:
            # Reported as the registered function whose grant would allow it.
            what = "Building a code object (types.CodeType, code.replace)"
            self._refuse(what, "builtins.compile")
        self._refuse_disguise(args[1] if len(args) > 1 else None, "Building")

    def _refuse_disguise(self, filename: object, verb: str) -> None:
        """Refuse program code named after a file of the interpreter's trees."""
        name = _file_name(filename)
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

    def _genuine_compile(self, compiled: object) -> bool:
        """Whether the import system compiles the source of a module file it read itself:
        ``SourceLoader.get_code`` of a genuine loader, or ``zipimport``'s own reading. A
        string handed to ``source_to_code`` under a real file's name is the program's."""
        name = _file_name(compiled)
        if name is None:
            return False
        frame: FrameType | None = current_frame()
        own = self._own
        while frame is not None and id(frame.f_globals) in own:
            frame = frame.f_back
        if frame is None:
            return False
        if frame.f_globals is self._zip_globals:
            back = frame.f_back
            getter = back.f_back if back is not None else None
            return (
                frame.f_code is self._zip_compile_source
                and back is not None
                and back.f_code is self._zip_get_module_code
                and getter is not None
                and (
                    getter.f_code is self._zip_get_filename
                    or (
                        getter.f_code is self._zip_get_code
                        and self._run_by_import_system(getter.f_back)
                    )
                )
            )
        if frame.f_globals is self._bootstrap_globals:
            frame = frame.f_back  # _call_with_frames_removed, as source_to_code calls it
        if frame is None or frame.f_globals is not self._external_globals:
            return False
        if frame.f_code is not self._source_to_code:
            return False
        frame = frame.f_back
        if frame is None or frame.f_code is not self._source_get_code:
            return False
        if not self._run_by_import_system(frame.f_back):
            return False
        names = frame.f_locals
        loader: object = names.get("self")
        if type(loader) is not self._source_loader:
            return False
        if not self._loaders_intact or _has_own_methods(loader):
            return False
        source = names.get("source_path")
        return type(source) is str and source == name

    def _marshal(self, args: tuple[Any, ...]) -> None:
        if not self._module_bytecode():
            message = call_refusal(self._api, "marshal.loads", "deserialization", self._rule_file)
            self._enforcer.refuse_call("marshal.loads", "deserialization", message)

    def _module_bytecode(self) -> bool:
        """Whether the bytes are the cache of a module's source, read by the import system.

        Only then is ``marshal`` the interpreter's: the import system then names the code
        after its source file, which is what the other judgements trust. Bytes handed in
        any other way (a ``.pyc`` without source outside the interpreter's directories, a
        loader with its own ``get_data``, a cache moved by ``sys.pycache_prefix``,
        ``pkgutil.read_code``) could claim any file name, so they are the program's.
        """
        frame: FrameType | None = current_frame()
        external = self._external_globals
        for _ in range(64):
            if frame is None:
                return False
            # Reading f_code is itself an audited event: only frames of the import
            # system (known by their globals, which reading does not report) are read.
            if frame.f_globals is external:
                # The first such frame is _compile_bytecode; get_code called it.
                frame = frame.f_back
                if frame is None:
                    return False
                code = frame.f_code
                if (
                    code is self._source_get_code or code is self._sourceless_get_code
                ) and self._run_by_import_system(frame.f_back):
                    break
                return False
            frame = frame.f_back
        else:
            return False
        names = frame.f_locals
        loader: object = names.get("self")
        kind: type = type(loader)
        if kind is not self._source_loader and kind is not self._sourceless_loader:
            return False
        for holder, name, original in self._methods:  # inline: this runs per import
            if getattr(holder, name, None) is not original:
                return False
        if _has_own_methods(loader):
            return False
        if code is self._sourceless_get_code:
            path = names.get("path")
            return type(path) is str and path.startswith(self._roots)  # type: ignore[union-attr]
        source, cached = names.get("source_path"), names.get("bytecode_path")
        if type(source) is not str or type(cached) is not str:
            return False
        folder = source.rpartition("/")[0] + "/__pycache__/"  # type: ignore[union-attr]
        return cached.startswith(folder)  # type: ignore[union-attr]

    def _run_by_import_system(self, frame: FrameType | None) -> bool:
        """Whether ``frame``, the caller of a loader's ``get_code``, is the import system
        about to run the code as a module: a loader's ``exec_module`` (the file loaders'
        and ``zipimport``'s, whose ``exec`` the import guard judges as an import) or
        ``runpy`` finding a module by name; an installed package, whose own compiling
        is ambient anyway.
        A program calling ``get_code`` (or ``zipimporter.load_module``) itself gets the
        code of a file it may have written, to run as it likes: that is its compile."""
        if frame is None:
            return False
        if frame.f_globals is self._external_globals:
            return frame.f_code is self._exec_module
        code = frame.f_code
        if self._runpy_details is not None and code is self._runpy_details:
            return True
        # An installed package's own use of a loader, as its compiling is (security.md).
        filename = code.co_filename
        return filename.startswith(self._third_party) and _normpath(filename) == filename

    @property
    def _loaders_intact(self) -> bool:
        for holder, name, original in self._methods:  # a plain loop: this runs per import
            if getattr(holder, name, None) is not original:
                return False
        return True

    def _refuse(self, what: str, qualname: str) -> None:
        self._enforcer.refuse_call(
            qualname,
            "dynamic-code",
            f"{what} of source code by the program is refused by the API guard (category: "
            f"dynamic-code). Add 'python-api=ALLOW:dynamic-code' to {self._rule_file} to "
            "allow it.",
        )
