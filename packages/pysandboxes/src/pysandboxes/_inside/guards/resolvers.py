"""The standard library's functions that import a module their caller names.

An import made by one of them is charged to the code that called it (``importlib.
import_module("x")`` is the program importing ``x``): the import guard looks through
their frames. Each entry is ``(module, function name)``.
"""

from __future__ import annotations

import sys

#: Standard-library functions that import a module named by their caller.
RESOLVERS = frozenset(
    {
        ("importlib", "import_module"),
        ("importlib", "reload"),
        ("importlib.util", "find_spec"),
        ("pkgutil", "resolve_name"),
        ("pkgutil", "get_loader"),
        ("pkgutil", "find_loader"),
        ("pydoc", "locate"),
        ("pydoc", "safeimport"),
        ("runpy", "run_module"),
        ("runpy", "_run_module_as_main"),
        ("runpy", "_get_module_details"),
        ("runpy", "_get_main_module_details"),
        ("logging.config", "_resolve"),
        ("logging.config", "resolve"),
        ("unittest.mock", "_importer"),
        ("unittest.mock", "_dot_lookup"),
        ("importlib.metadata", "load"),  # EntryPoint.load
        ("importlib.resources._common", "resolve"),
        ("importlib.resources._common", "files"),
        ("importlib.resources._common", "get_package"),
        ("importlib.util", "find_spec"),
        ("pkgutil", "walk_packages"),
        ("pkgutil", "iter_importers"),
        ("xml.sax", "_create_parser"),
        ("xml.dom.domreg", "getDOMImplementation"),
        ("warnings", "_getcategory"),
        # importlib.util.LazyLoader: creates and runs the module of the spec it wraps, the
        # second on the first attribute read.
        ("importlib.util", "create_module"),
        ("importlib.util", "exec_module"),
        ("importlib.util", "__getattribute__"),
        ("importlib.util", "__delattr__"),
        # importlib.abc.Loader.load_module: loads with the methods of the loader it is
        # given, which may all be the import system's own.
        ("importlib._abc", "load_module"),
        ("pkgutil", "load_module"),  # pkgutil.ImpLoader, through imp.load_module
        # imp (deprecated, still in 3.11): loaders by name or file, extensions included.
        ("imp", "load_dynamic"),
        ("imp", "load_source"),
        ("imp", "load_compiled"),
        ("imp", "load_package"),
        ("imp", "load_module"),
        ("imp", "init_builtin"),
        ("imp", "init_frozen"),
        ("pydoc", "importfile"),
        # unittest imports the test names and discovered files it is handed.
        ("unittest.loader", "loadTestsFromName"),
        ("unittest.loader", "loadTestsFromNames"),
        ("unittest.loader", "_get_module_from_name"),
        ("unittest.loader", "_find_test_path"),
        ("unittest.loader", "_find_tests"),
        ("unittest.loader", "discover"),
        ("unittest.main", "__init__"),
        ("unittest.main", "parseArgs"),
        ("unittest.main", "createTests"),
        ("unittest.main", "_do_discovery"),
        ("lib2to3.refactor", "get_fixers"),
        ("lib2to3.refactor", "__init__"),
        # The pure-Python pickler imports the module an object (or the data) names.
        ("pickle", "save_global"),
        ("pickle", "find_class"),
        # Modules named by the caller's text: options, doctest targets, command lines.
        ("optparse", "read_module"),
        ("doctest", "_normalize_module"),
        ("doctest", "_test"),
        ("inspect", "_main"),
        ("distutils.dist", "get_command_class"),
        ("smtpd", "parseargs"),
        ("multiprocessing.forkserver", "main"),
        # pydoc.apropos imports every module it finds on the search path.
        ("pydoc", "run"),
    }
)


def _sysconfigdata() -> str:
    """The module sysconfig imports for the build's variables, as it names it when the
    environment does not (``_PYTHON_SYSCONFIGDATA_NAME``, which the program may set)."""
    multiarch = getattr(sys.implementation, "_multiarch", "")
    return f"_sysconfigdata_{sys.abiflags}_{sys.platform}_{multiarch}"


#: Modules a standard-library module imports with ``__import__`` by a name it computes
#: itself (not a constant of its code, not of its own package): its own import when the
#: name is this one, the caller's otherwise.
LIBRARY_NAMES: dict[str, frozenset[str]] = {"sysconfig": frozenset({_sysconfigdata()})}
