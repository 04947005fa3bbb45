"""What the sandboxed interpreter may see: its own trees, the program's files, the rules.

Both sides compute it. The sandboxed interpreter does so to give the file guard its
exposures and to apply Landlock on itself; the trusted side does so before starting a
namespace provider (bwrap, unshare), whose mount view must hold everything the
interpreter will need, since nothing else exists inside it. Both run the same
interpreter, so the same functions give the same answer, given the search path the child
will have (``search``) rather than the launcher's own. It belongs to the policy: it
reads the filesystem (the interpreter's trees, the program's files) and writes nothing.
"""

from __future__ import annotations

import os
import sys

from pysandboxes._policy.links import link_chain
from pysandboxes._policy.model import ExposeRule, Origin
from pysandboxes._policy.pathnames import within

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from pysandboxes._policy.model import Policy
    from pysandboxes._policy.plan import ConfinementPlan

_PYTHON = Origin("<python>", 0, "the interpreter's own files")
_PROGRAM = Origin("<program>", 0, "the script, or the module run with -m")
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package


def interpreter_roots(search: Sequence[str] | None = None) -> list[str]:
    """The interpreter's own trees: stdlib, site-packages, installed paths; never the cwd.

    ``search`` is the module search path to read (``sys.path`` by default). Entries that
    came from ``PYTHONPATH`` are left out: a variable forwarded by a rule must not widen
    what the sandbox may read. A directory a ``.pth`` file adds (a project installed in
    editable mode) gives only what can be imported from it (see ``importable_entries``):
    the project's ``.env`` or data are not the interpreter's.
    """
    trees, added = _search_roots(search)
    roots = list(trees)
    for root in added:
        roots += [entry for entry in importable_entries(root) if entry not in roots]
    return roots


def added_roots(search: Sequence[str] | None = None) -> list[str]:
    """The directories of the search path outside the interpreter's trees (see above)."""
    return _search_roots(search)[1]


def _search_roots(search: Sequence[str] | None) -> tuple[list[str], list[str]]:
    from_env = set(os.environ.get("PYTHONPATH", "").split(os.pathsep)) - {""}
    candidates = [os.path.dirname(os.__file__)]  # the standard library
    try:
        import site

        candidates += site.getsitepackages()
    except (ImportError, AttributeError):
        pass  # -S: no site module work, sys.path says what is used
    candidates += [os.path.dirname(sys.executable), _OWN_DIR]
    trees: list[str] = []
    for path in candidates:
        if path and os.path.isabs(path) and os.path.exists(path):
            real = os.path.realpath(path)
            if real not in trees and real != "/":
                trees.append(real)
    added: list[str] = []
    for path in sys.path if search is None else search:
        if not path or path in from_env or not os.path.isabs(path) or not os.path.exists(path):
            continue
        real = os.path.realpath(path)
        if real == "/" or real in added or any(within(real, tree) for tree in trees):
            continue
        added.append(real)
    return trees, added


def importable_entries(root: str) -> list[str]:
    """What can be imported from ``root``: modules, packages (a directory holding an
    ``__init__.py`` or, as a namespace package, any module), distribution metadata and
    ``.pth`` files; never a hidden entry or other files."""
    from importlib.machinery import all_suffixes

    suffixes = (*all_suffixes(), ".pth")
    if not os.path.isdir(root):
        return [root]  # a zip archive on the path: the archive itself
    found: list[str] = []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return found
    for name in names:
        path = os.path.join(root, name)
        if name.startswith("."):
            continue
        if os.path.isdir(path):
            if name.endswith((".dist-info", ".egg-info")) or (
                name.isidentifier() and _holds_modules(path, suffixes)
            ):
                found.append(path)
        elif name.endswith(suffixes):
            found.append(path)
    return found


def _holds_modules(directory: str, suffixes: tuple[str, ...]) -> bool:
    try:
        return any(name.endswith(suffixes) for name in os.listdir(directory))
    except OSError:
        return False


def launcher_search_path() -> list[str]:
    """``sys.path`` as the child started with ``-c`` will have it, read in the launcher.

    The launcher's first entry is its own (the console script's directory, or the cwd
    under ``python -m``); the child's first entry is ``""``, which names no tree.
    """
    return list(sys.path if sys.flags.safe_path else sys.path[1:])


def module_files(module: str, search: Sequence[str] | None = None) -> list[str]:
    """The files ``-m module`` runs: each package's ``__init__.py`` on the way and the
    module itself (or the package's ``__main__.py``), found without importing anything.

    They are the program, as a script's file is: readable without a rule. Their
    neighbours are not.
    """
    from importlib.machinery import PathFinder

    found: list[str] = []
    path = sys.path if search is None else search
    locations: list[str] | None = [p if p else os.getcwd() for p in path]
    for part in [*module.split("."), "__main__"]:
        spec = PathFinder.find_spec(part, locations)
        if spec is None:
            break
        if spec.origin and spec.has_location:
            found.append(os.path.realpath(spec.origin))
        if spec.submodule_search_locations is None:
            break
        locations = list(spec.submodule_search_locations)
    return found


def exposures(
    policy: Policy, implicit_rules: Sequence[ExposeRule], roots: list[str], program: list[str]
) -> list[ExposeRule]:
    """Every path the file guard exposes: the interpreter's trees and the program's
    files, then ``implicit_rules`` (devices, the private temporary directory...), then
    the rules."""
    implicit = [ExposeRule(root, False, os.path.isdir(root), _PYTHON) for root in roots]
    implicit += [ExposeRule(path, False, False, _PROGRAM) for path in program]
    executable = os.path.realpath(sys.executable)
    implicit.append(ExposeRule(executable, False, False, _PYTHON))
    # Each link on the way to it (a venv's bin/python -> python3 -> python3.11) is its
    # name too: os.path.realpath(sys.executable), platform and sysconfig read them.
    names = {*link_chain(sys.executable), *link_chain(getattr(sys, "_base_executable", ""))}
    implicit += [ExposeRule(name, False, False, _PYTHON) for name in sorted(names)]
    if sys.prefix != sys.base_prefix:  # a venv: the file that makes it one, read at start
        implicit.append(ExposeRule(venv_config(), False, False, _PYTHON))
    # A shared build: programs the sandbox may start (sys.executable again) load it too.
    implicit += [ExposeRule(path, False, False, _PYTHON) for path in interpreter_libraries()]
    # The rules come after the implicit grants: a rule on the same path decides.
    by_path = {rule.path: rule for rule in (*implicit, *implicit_rules, *policy.expose)}
    return list(by_path.values())


def venv_config() -> str:
    """The ``pyvenv.cfg`` of the running venv, by its real path."""
    return os.path.join(os.path.realpath(sys.prefix), "pyvenv.cfg")


def plan_for(
    policy: Policy,
    implicit_rules: Sequence[ExposeRule],
    tempdir: str | None,
    roots: list[str],
    program: list[str],
    also_read: Sequence[str] = (),
) -> ConfinementPlan:
    """The kernel's plan for this run: the exposures, compiled with the rules.

    ``also_read`` adds what a provider makes safe to read (a pid namespace's own
    ``/proc``).
    """
    from pysandboxes._policy.confinement import compile_plan

    venv = [venv_config()] if sys.prefix != sys.base_prefix else []
    files = [*venv, *also_read]
    seen = exposures(policy, implicit_rules, roots, program)
    return compile_plan(policy, seen, tempdir, files)


def interpreter_libraries() -> list[str]:
    """The interpreter's own shared library (``libpython``), when it is not built in: the
    file mapped in this process, and the name the dynamic loader opens for it under the
    interpreter's ``lib`` directory when that is a link to it.

    A shared build's interpreter cannot start without it: a fresh mount view must show
    it, and Landlock (applied after this process loaded it) must let the interpreters the
    program starts read it, under every provider. Without it the loader may find another
    build of the same version in the system's directories, or none.
    """
    if not _libraries:
        _libraries.append(_mapped_libraries())
    return list(_libraries[0])


_libraries: list[list[str]] = []  # found once: both sides ask several times


def _mapped_libraries() -> list[str]:
    try:
        with open("/proc/self/maps", "rb") as maps:
            text = maps.read()
    except OSError:
        return []  # no /proc: a static build, or the interpreter is looked for where it runs
    found: list[str] = []
    start = text.find(b"/libpython")
    while start != -1:
        begin = text.rfind(b" ", 0, start) + 1
        end = text.find(b"\n", start)
        path = os.fsdecode(text[begin : end if end != -1 else len(text)])
        real = os.path.realpath(path)
        if path.startswith("/") and real not in found:
            found.append(real)
            named = os.path.join(sys.base_prefix, "lib", os.path.basename(real))
            version = f"libpython{sys.version_info[0]}.{sys.version_info[1]}{sys.abiflags}.so.1.0"
            for link in (named, os.path.join(sys.base_prefix, "lib", version)):
                if link not in found and link != real and os.path.realpath(link) == real:
                    found.append(link)
        start = text.find(b"/libpython", end if end != -1 else len(text))
    return found
