"""The sandboxed interpreter: read the spec, install the guards, run the program.

Started by the trusted side as ``python [flags] -c <boot> <fd>``; the spec arrives on file
descriptor ``fd``. The order matters: the kernel layer goes in first, while the
interpreter is single-threaded (Landlock binds the calling thread and what it starts),
then the audit hook, then the wrappers, and only then does any code of the program run.
"""

from __future__ import annotations

import builtins
import os
import sys

from pysandboxes import _mode, _runner
from pysandboxes._enforce import Enforcing, Messages
from pysandboxes._guards import dnspins, filewraps
from pysandboxes._guards.audit import AuditHook
from pysandboxes._guards.calls import CallGuard, guard_unreported
from pysandboxes._guards.dynamic import DynamicCodeGuard
from pysandboxes._guards.files import FileGuard
from pysandboxes._guards.imports import ImportGuard
from pysandboxes._guards.integrity import IntegrityGuard
from pysandboxes._guards.network import NetworkGuard
from pysandboxes._guards.paths import Resolver
from pysandboxes._policy.judge import ApiJudge, FileJudge, ImportJudge, NetJudge
from pysandboxes._policy.model import ExposeRule, Origin
from pysandboxes._spec import LaunchSpec, decode
from pysandboxes.errors import OSLayerUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import CodeType

    from pysandboxes._os.plan import AppliedLayer
    from pysandboxes._spec import Program

_PYTHON = Origin("<python>", 0, "the interpreter's own files")
_PROGRAM = Origin("<program>", 0, "the module run with -m")
_OWN_DIR = os.path.dirname(os.path.abspath(__file__))


def _read_spec(fd: int) -> LaunchSpec:
    chunks: list[bytes] = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return decode(b"".join(chunks))


def interpreter_roots() -> list[str]:
    """The interpreter's own trees: stdlib, site-packages, installed paths; never the cwd.

    Entries that came from ``PYTHONPATH`` are left out: a variable forwarded by a rule
    must not widen what the sandbox may read.
    """
    from_env = set(os.environ.get("PYTHONPATH", "").split(os.pathsep)) - {""}
    roots: list[str] = []
    candidates = [os.path.dirname(os.__file__)]  # the standard library
    try:
        import site

        candidates += site.getsitepackages()
    except (ImportError, AttributeError):
        pass  # -S: no site module work, sys.path says what is used
    candidates += [p for p in sys.path if p and p not in from_env]
    candidates += [os.path.dirname(sys.executable), _OWN_DIR]
    for path in candidates:
        if not path or not os.path.isabs(path) or not os.path.exists(path):
            continue
        real = os.path.realpath(path)
        if real not in roots and real != "/":
            roots.append(real)
    return roots


def module_files(module: str) -> list[str]:
    """The files ``-m module`` runs: each package's ``__init__.py`` on the way and the
    module itself (or the package's ``__main__.py``), found without importing anything.

    They are the program, as a script's file is: readable without a rule. Their
    neighbours are not.
    """
    from importlib.machinery import PathFinder

    found: list[str] = []
    locations: list[str] | None = [p if p else os.getcwd() for p in sys.path]
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


def _exposures(spec: LaunchSpec, roots: list[str], program: list[str]) -> list[ExposeRule]:
    implicit = [ExposeRule(root, False, os.path.isdir(root), _PYTHON) for root in roots]
    implicit += [ExposeRule(path, False, False, _PROGRAM) for path in program]
    executable = os.path.realpath(sys.executable)
    implicit.append(ExposeRule(executable, False, False, _PYTHON))
    # The rules come after the implicit grants: a rule on the same path decides.
    by_path = {rule.path: rule for rule in (*implicit, *spec.implicit, *spec.policy.expose)}
    return list(by_path.values())


def apply_kernel_layer(spec: LaunchSpec, roots: list[str], program: list[str]) -> AppliedLayer:
    """Have the kernel enforce the rules on this process and all it starts: Landlock, and a
    network namespace of its own when no ``net=`` rule allows anything.

    Applied only where the kernel has Landlock; elsewhere nothing is applied and the
    returned layer says why. Call it while the interpreter is single-threaded.

    Raises:
        OSLayerUnavailable: the kernel has Landlock but refused the rules.
    """
    from pysandboxes._os import landlock
    from pysandboxes._os.plan import AppliedLayer
    from pysandboxes._policy.confinement import compile_plan

    try:
        reason = landlock.unavailable_reason()
        if reason is not None:
            return AppliedLayer("none", missing=(("landlock", reason),))
        exposures = _exposures(spec, roots, program)
        venv = [os.path.join(sys.prefix, "pyvenv.cfg")] if sys.prefix != sys.base_prefix else []
        plan = compile_plan(spec.policy, exposures, spec.tempdir, venv)
        from pysandboxes._os.netns import drop_all_capabilities, isolate_network

        if not plan.network:
            isolate_network()
        applied = landlock.apply(plan)
        drop_all_capabilities()
        return applied
    finally:
        # The binding's ctypes must not stay imported: a cached module skips the import
        # check that keeps ctypes from a program without a native grant.
        for name in [n for n in sys.modules if n.partition(".")[0] in ("ctypes", "_ctypes")]:
            del sys.modules[name]


def install_guards(spec: LaunchSpec, roots: list[str], program: list[str]) -> None:
    """Install the audit hook and the wrappers; nothing of the program has run yet."""
    policy = spec.policy
    enforcer = Enforcing(Messages(spec.rule_file, spec.rule_dir))
    judge = FileJudge(_exposures(spec, roots, program), policy.ignore, spec.protected)
    files = FileGuard(judge, enforcer, Resolver())
    api = ApiJudge(policy)
    hook = AuditHook()
    hook.globals["__builtins__"] = {}
    internal = _internal_modules()
    # Globals of the judged copies of unreported functions: watched like the guards' own,
    # with the real builtins (C code run under such a frame looks __import__ up there).
    sealed_globals: dict[str, object] = {"__builtins__": builtins}
    own_globals = [vars(module) for module in internal.values()] + [hook.globals, sealed_globals]
    dynamic = DynamicCodeGuard(
        api,
        enforcer,
        os.path.dirname(os.__file__),
        [r for r in roots if "-packages" in r],
        own_globals,
        spec.rule_file,
        interactive=spec.program.kind == "repl" or bool(sys.flags.interactive),
    )
    integrity = IntegrityGuard(
        own_globals[:-1],
        _classes(internal),
        hook.globals,
        [_runner.__dict__],
        os.path.dirname(os.__file__),
        [r for r in roots if "-packages" in r],
        api,
        enforcer,
        spec.rule_file,
        sealed_globals,
    )
    hook.add(files.events)
    network = NetworkGuard(NetJudge(policy.net), policy, enforcer, spec.rule_file)
    hook.add(network.events)
    calls = CallGuard(api, enforcer, spec.rule_file)
    hook.add(calls.events)
    hook.add(dynamic.events)
    hook.add(integrity.events)
    import_judge = ImportJudge(policy)
    imports = ImportGuard(
        import_judge,
        enforcer,
        spec.rule_file,
        os.path.dirname(os.__file__),
        roots,
        own_globals,
        program_code=[_runner.run.__code__],  # -m: the program asks for its module
    )
    if not import_judge.allows_any:  # python-import=* switches the guard off
        hook.add(imports.events)
        imports.install()
    guard_unreported(calls, sealed_globals)  # before the hook: importing it afterwards is refused
    dnspins.install(policy.pins)  # before the hook, which guards the functions it builds
    hook.install()
    filewraps.install(files.metadata_seen)
    _hide(internal)


#: Modules that stay importable as they are: the public surface, what program frames may
#: show (the runner sits under the program's first frame), and the wrappers, which hold
#: only the functions they wrap (help() and IPython read their signatures).
_PUBLIC = frozenset(
    {
        "pysandboxes",
        "pysandboxes.errors",
        "pysandboxes._mode",
        "pysandboxes._record",
        "pysandboxes._runner",
        "pysandboxes._version",
        "pysandboxes._guards.filewraps",
        "pysandboxes._guards.pinned",
    }
)


def _internal_modules() -> dict[str, object]:
    return {
        name: module
        for name, module in list(sys.modules.items())
        if name.startswith("pysandboxes.") and name not in _PUBLIC
    }


def _classes(modules: dict[str, object]) -> list[type]:
    found: list[type] = []
    for name, module in modules.items():
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == name:
                found.append(value)
    return found


def _hide(modules: dict[str, object]) -> None:
    """Take the guards' modules out of reach: importing them again gives fresh copies.

    The objects in force live on only behind the sealed audit hook.
    """
    for name in modules:
        del sys.modules[name]
        parent, _, child = name.rpartition(".")
        holder = sys.modules.get(parent) or modules.get(parent)
        if holder is not None and hasattr(holder, child):  # pyright: ignore[reportUnnecessaryComparison]
            delattr(holder, child)


def main() -> tuple[Program, CodeType | None]:
    """Prepare the sandboxed interpreter; return what the boot code then runs.

    The boot code calls ``_runner.run`` itself, so that no frame of this module stays
    under the program's frames.
    """
    spec = _read_spec(int(sys.argv[1]))
    _mode.enter_sandbox()
    _runner.adjust_on_import(spec.tempdir)
    _runner.session.update(rule_file=spec.rule_file, tempdir=spec.tempdir, provider=spec.provider)
    program = spec.program
    code = None
    if program.kind == "script":
        try:
            code = _runner.read_script(program.target)
        except OSError as exc:
            print(
                f"{sys.executable}: can't open file {program.target!r}: "
                f"[Errno {exc.errno}] {exc.strerror}",
                file=sys.stderr,
            )
            sys.exit(2)
        except SyntaxError as exc:
            _runner.report(exc)
    elif program.kind in ("command", "stdin"):
        try:
            code = _runner.compile_program(program)
        except SyntaxError as exc:
            _runner.report(exc)
    # Before prepare() puts the program's directory first on sys.path: that directory is
    # the program's, not the interpreter's, and needs a rule like any other.
    roots = interpreter_roots()
    _runner.prepare(program)
    files = module_files(program.target) if program.kind == "module" else []
    try:
        if spec.provider == "landlock":
            apply_kernel_layer(spec, roots, files)
    except OSLayerUnavailable as exc:
        print(f"python-sb: the kernel layer cannot be applied: {exc}", file=sys.stderr)
        sys.exit(255)
    if spec.provider != "none":  # 'none' asks for no sandbox at all; the banner says so
        install_guards(spec, roots, files)
    return program, code
