"""The import system's own compiling, told apart from a program's.

The import system compiles module files and unmarshals their cached bytecode; both are
ambient only when the genuine machinery does it for a module it reads itself, on its way
to run it as a module. Everything else (a program calling ``source_to_code``,
``get_code`` or ``marshal.loads``, a loader with methods of its own) is the program's:
the code could then claim any file name, which the other guards trust.
"""

from __future__ import annotations

import sys

from pysandboxes._inside.guards.audit import current_frame
from pysandboxes._inside.guards.values import plain_bytes, plain_str

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType
    from typing import Any


def file_name(name: object) -> str | None:
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


class ImportSystemCode:
    """Recognises the import system compiling or unmarshalling a module's own code."""

    def __init__(
        self, own: frozenset[int], installed: Callable[[str], bool], roots: tuple[str, ...]
    ) -> None:
        self._own = own  # ids of the guards' globals
        self._installed = installed
        self._roots = roots
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

    def genuine_compile(self, compiled: object) -> bool:
        """Whether the import system compiles the source of a module file it read itself:
        ``SourceLoader.get_code`` of a genuine loader, or ``zipimport``'s own reading. A
        string handed to ``source_to_code`` under a real file's name is the program's."""
        name = file_name(compiled)
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

    def module_bytecode(self) -> bool:
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
        return self._installed(code.co_filename)

    @property
    def _loaders_intact(self) -> bool:
        for holder, name, original in self._methods:  # a plain loop: this runs per import
            if getattr(holder, name, None) is not original:
                return False
        return True
