"""The sandboxed interpreter: read the spec, install the guards, run the program.

Started by the trusted side as ``python [flags] -c <boot> <fd>``; the spec arrives on file
descriptor ``fd``. The order matters: the kernel layer goes in first, while the
interpreter is single-threaded (Landlock binds the calling thread and what it starts),
then the audit hook, then the wrappers, and only then does any code of the program run.
"""

from __future__ import annotations

import builtins
import gc
import os
import sys

from pysandboxes import _mode
from pysandboxes._inside import runner as _runner
from pysandboxes._inside.enforce import Enforcing, Messages
from pysandboxes._inside.guards import dnspins, filewraps
from pysandboxes._inside.guards.audit import AuditHook
from pysandboxes._inside.guards.calls import FORK_EXEC_FAMILY, CallGuard
from pysandboxes._inside.guards.dynamic import DynamicCodeGuard
from pysandboxes._inside.guards.files import FileGuard
from pysandboxes._inside.guards.imports import ImportGuard
from pysandboxes._inside.guards.integrity import IntegrityGuard
from pysandboxes._inside.guards.network import NetworkGuard
from pysandboxes._inside.guards.paths import Resolver
from pysandboxes._inside.guards.sealedcalls import guard_unreported
from pysandboxes._inside.listings import (
    list_program_directory,
    prelisted_finder,
    show_only_exposed,
)
from pysandboxes._inside.walls import apply_kernel_layer, restore_terminal_signals
from pysandboxes._policy.judge import ApiJudge, FileJudge, ImportJudge, NetJudge
from pysandboxes._policy.view import exposures as _exposures
from pysandboxes._policy.view import interpreter_roots, module_files
from pysandboxes._wire.spec import LaunchSpec, decode
from pysandboxes.errors import OSLayerUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import CodeType
    from typing import Any

    from pysandboxes._inside.enforce import Enforcer
    from pysandboxes._policy.evaluation import EvalProfile
    from pysandboxes._policy.model import Policy
    from pysandboxes._wire.spec import Program


def _read_spec(fd: int) -> LaunchSpec:
    chunks: list[bytes] = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return decode(b"".join(chunks))


def install_guards(spec: LaunchSpec, roots: list[str], program: list[str]) -> FileJudge:
    """Install the audit hook and the wrappers; nothing of the program has run yet.

    Returns the file judge, for the listing taken before the walls.
    """
    policy = spec.policy
    if spec.serve is not None and spec.serve.modules:
        # The modules of the @sandbox functions are the program: importable without a
        # rule, as a script's own file is readable (what they import is judged).
        from pysandboxes._policy.model import ImportRule, Origin
        from pysandboxes._record import replace

        where = Origin("<sandbox functions>", 0, "the modules of the @sandbox functions")
        names = frozenset(name.partition(".")[0] for name in spec.serve.modules)
        policy = replace(policy, imports=(*policy.imports, ImportRule(names, False, where)))
    enforcer = _enforcer(spec)
    log = None
    api = ApiJudge(policy)
    if spec.audit is not None and spec.learning is None:
        from pysandboxes._inside.auditing import start_log

        enforcer, log = start_log(spec.audit, enforcer, api, policy, spec)
    asking = asker = None
    if spec.ask_fd >= 0 and spec.learning is None:
        # Prompting: a refusal is asked about first; a denial is today's (logged) one.
        from pysandboxes._inside.asking import Asking, Channel
        from pysandboxes._inside.capture import current_call

        asker = Channel(spec.ask_fd)
        enforcer = asking = Asking(asker, enforcer, os.getcwd(), current_call.get)
    seen = _exposures(policy, spec.implicit, roots, program)
    judge = FileJudge(seen, policy.ignore, spec.protected)
    # Landlock (also under unshare) lists only exposed directories: so does the guard.
    walkways = spec.provider not in ("landlock", "unshare")
    files = FileGuard(judge, enforcer, Resolver(), walkways=walkways)
    hook = AuditHook()
    hook.globals["__builtins__"] = {}
    evaluation = _evaluation_profiles(policy, api, getattr(enforcer, "eval_used", None))
    patch = vouching = None
    sealed: list[object] = []  # filled by patch.install: the list itself is handed on
    if evaluation:  # the evaluated code's machinery costs milliseconds: only when used
        # (and before the guards' modules are listed: these are the guards' too)
        from pysandboxes._inside.evaluation import patch, runner

        sealed, vouching = patch.SEALED, runner.vouching
    if spec.egress_fd >= 0:
        # (before the guards' modules are listed: the router reads the program's frames
        # for its line, ``recorder.program_site``, as the guards do)
        from pysandboxes._inside import routing  # noqa: F401  # pyright: ignore[reportUnusedImport]
    internal = _internal_modules()
    guards = {name: module for name, module in internal.items() if name not in _REACHABLE}
    # Globals of the sealed functions (the judged copies of unreported functions, the
    # wrappers): watched like the guards' own, with the real builtins (C code run under
    # such a frame looks __import__ up there).
    sealed_globals: dict[str, object] = {"__builtins__": builtins}
    own_globals = [vars(module) for module in guards.values()] + [hook.globals, sealed_globals]
    dynamic = DynamicCodeGuard(
        api,
        enforcer,
        os.path.dirname(os.__file__),
        [r for r in roots if "-packages" in r],
        own_globals,
        spec.rule_file,
        interactive=spec.program.kind == "repl" or bool(sys.flags.interactive),
        sealed=sealed,
        vouching=vouching,
        served_by=_server_call() if spec.serve is not None else None,
    )
    integrity = IntegrityGuard(
        own_globals[:-1],
        _classes(guards),
        hook.globals,
        [_runner.__dict__, _runner.user_traceback.__globals__],
        os.path.dirname(os.__file__),
        [r for r in roots if "-packages" in r],
        api,
        enforcer,
        spec.rule_file,
        sealed_globals,
    )
    hook.add(files.events)
    if log is not None:
        from pysandboxes._inside.decisions import SURFACED_EVENT

        hook.add({SURFACED_EVENT: log.surfaced})
    network = NetworkGuard(NetJudge(policy.net), policy, enforcer, spec.rule_file)
    allowed_log = log if log is not None and log.allowed_too else None
    files.log = network.log = allowed_log
    hook.add(network.events)
    if spec.egress_fd >= 0:  # the broker connects: this process has no route (routing)
        from pysandboxes._inside.asking import Channel
        from pysandboxes._inside.routing import Router

        channel = asker if spec.egress_fd == spec.ask_fd and asker else Channel(spec.egress_fd)
        network.router = Router(channel, NetJudge(policy.net), policy.pins, os.getcwd())
    calls = CallGuard(api, enforcer, spec.rule_file, allowed_log)
    if calls.stands_in:
        install_stand_in(os.path.dirname(os.__file__))
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
        realpath=Resolver().realpath,
        sealed_globals=sealed_globals,
    )
    if not import_judge.allows_any:  # python-import=* switches the guard off
        hook.add(imports.events)
        imports.install()
    # Before the hook: importing it afterwards is refused.
    guard_unreported(calls.family_allowed, FORK_EXEC_FAMILY, sealed_globals)
    # Before the hook, which guards the functions these build (and judges their making).
    dnspins.install(policy.pins, sealed_globals)
    filewraps.install(files.workdir, sealed_globals)
    if network.router is not None:
        from pysandboxes._inside.routing import install

        install(network.router, sealed_globals)
    if asking is not None:
        from pysandboxes._inside.grants import install_grants

        install_grants(asking, environment=spec.serve is not None)
    if patch is not None:
        installed = [r for r in roots if "-packages" in r]
        ambient = patch.ambient_files(os.path.dirname(os.__file__), installed)
        patch.install(evaluation, ambient, sealed_globals)
    hook.install()
    _hide(internal)
    return judge


def _server_call() -> CodeType:
    from pysandboxes._inside.server import SERVER_CALL

    return SERVER_CALL


def _evaluation_profiles(
    policy: Policy, api: ApiJudge, learning: Callable[[str, str], None] | None
) -> dict[str, EvalProfile]:
    """The ``eval-*`` profiles: guarded ``eval``/``exec``/``compile`` with a default one,
    unless ``python-api`` grants them raw (with ``eval-*`` lines, a config error). A
    learning run evaluates under a profile of every construct, and reports each used."""
    found: dict[str, EvalProfile] = {}
    if policy.eval:
        from pysandboxes._policy.evaluation import profiles

        found = profiles(policy.eval)
    if any(api.judge(f"builtins.{name}").allowed for name in ("eval", "exec", "compile")):
        found.pop("", None)
    elif learning is not None:
        from pysandboxes._inside.evaluation import learning as eval_learning

        found[""] = eval_learning.LEARNING_PROFILE
        eval_learning.learn_with(learning)
    return found


def _enforcer(spec: LaunchSpec) -> Enforcer:
    """Enforcing, or, while learning, the enforcer that records and lets through."""
    messages = Messages(spec.rule_file, spec.rule_dir)
    if spec.learning is None:
        return Enforcing(messages)
    from pysandboxes._inside.recorder import Learning, watched_environ

    session = spec.program.kind == "repl"
    learning = Learning(spec.learning.event_fd, messages, os.getcwd(), session=session)
    watched_environ(learning, spec.learning.forwarded)
    return learning


#: Modules that stay in sys.modules: the public surface and what it is made of. The
#: others are taken out (_hide), and the import guard refuses them to the program.
_PUBLIC = frozenset(
    {
        "pysandboxes",
        "pysandboxes.errors",
        "pysandboxes.mcp",  # the integrations: public names only
        "pysandboxes.notebook",
        "pysandboxes._mode",
        "pysandboxes._record",
        "pysandboxes._version",
    }
)
#: Hidden modules the program reaches all the same: the runner sits under its first frame
#: (and holds the traceback cutter and the session), the import adjuster is on
#: sys.meta_path. Their frames act for their caller; they are not the guards' own.
_REACHABLE = frozenset(
    {
        "pysandboxes._inside.runner",
        "pysandboxes._inside.repl",
        "pysandboxes._inside.tracebacks",
        "pysandboxes._inside.adjust",
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


def main(
    path: list[str] | None = None,
) -> tuple[Program, CodeType | None, Callable[[], None] | None]:
    """Prepare the sandboxed interpreter; return what the boot code then runs: the
    program and its code, or in partial mode the server's loop.

    ``path`` is the ``sys.path`` CPython made; the boot code took the working directory
    and ``PYTHONPATH`` off it until the walls are up. The boot code calls ``_inside.runner.run``
    itself, so that no frame of this module stays under the program's frames.
    """
    spec = _read_spec(int(sys.argv[1]))
    _mode.enter_sandbox()
    from pysandboxes._inside.adjust import adjust_on_import

    # No Python layer under 'none' (no sandbox at all: the banner says so) nor with
    # py-sandbox=false (the kernel's own refusals show). A learning run still watches
    # through the hooks, which refuse nothing: it learns by them.
    python_layer = spec.provider != "none" and (
        spec.policy.python_layer or spec.learning is not None
    )
    adjust_on_import(spec.tempdir, spec.rule_file, python_layer=python_layer)
    _runner.session.update(
        rule_file=spec.rule_file,
        tempdir=spec.tempdir,
        provider=spec.provider,
        learning="yes" if spec.learning is not None else None,
        python_layer="yes" if python_layer else None,
    )
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
    if program.kind == "module" or (program.kind == "script" and code is None):
        _runner.load_runpy()
    if sys.version_info >= (3, 13):
        # 3.13 reads its frozen modules with marshal.loads, which the guards would charge
        # to the program: the frozen ones the start-up loads no other way load now
        # (ntpath: pathlib's, which the sandbox no longer imports itself).
        import importlib.util  # noqa: F401  # pyright: ignore[reportUnusedImport]
        import ntpath  # noqa: F401  # pyright: ignore[reportUnusedImport]

        _runner.load_runpy()
    # Before prepare() puts the program's directory first on sys.path: that directory is
    # the program's, not the interpreter's, and needs a rule like any other.
    roots = interpreter_roots()
    full_path = list(sys.path) if path is None else path
    files = module_files(program.target, full_path) if program.kind == "module" else []
    if code is not None and program.kind == "script":
        # The script's own file is the program, as a -m module's files are: readable
        # without a rule, for tracebacks (linecache) and the children multiprocessing
        # starts with spawn or forkserver, which run it again by its path.
        files.append(os.path.realpath(program.target))
    if spec.learning is not None:
        # The pipe is the child's alone: programs it starts must not write events.
        os.set_inheritable(spec.learning.event_fd, False)
    # Directories a .pth file adds (editable projects) are exposed by their importable
    # entries only: listed now, like the program's, for the import system.
    from pysandboxes._policy.view import added_roots

    listings = [list_program_directory(program), *map(prelisted_finder, added_roots())]
    serving = spec.serve
    if serving is not None:
        # The modules of the @sandbox functions are the program: their files, and the
        # directories the import system lists to find them (only those files shown).
        files += serving.files
        places = {*serving.path, *(os.path.dirname(f) for f in serving.files)}
        listings += [prelisted_finder(place) for place in sorted(places)]
    try:
        if spec.provider in ("landlock", "bwrap", "unshare"):
            apply_kernel_layer(spec, roots, files)
    except OSLayerUnavailable as exc:
        print(f"python-sb: the kernel layer cannot be applied: {exc}", file=sys.stderr)
        sys.exit(255)
    if spec.provider in ("bwrap", "unshare"):
        restore_terminal_signals()
    if program.kind == "repl" or sys.flags.inspect:
        from pysandboxes._inside.repl import preload_line_editing

        preload_line_editing()
    serve = None
    if serving is not None:
        from pysandboxes._inside.server import start

        serve = start(serving)  # its threads exist before the guards
    judge = None
    if python_layer:
        judge = install_guards(spec, roots, files)
    elif spec.provider in ("landlock", "bwrap", "unshare"):  # the walls still hide the rest
        seen = _exposures(spec.policy, spec.implicit, roots, files)
        judge = FileJudge(seen, spec.policy.ignore, spec.protected)
    if judge is not None and spec.learning is None:  # learning sees all, as unsandboxed
        for listing in listings:
            show_only_exposed(listing, judge)
    # Only now may the program's directory, the working directory and PYTHONPATH lead
    # imports, and the site module's work run: what they load is judged like the program.
    os.environ.update(dict(spec.deferred_env))
    _runner.prepare(program, full_path)
    if serving is not None:
        sys.path[1:1] = [p for p in serving.path if p not in sys.path]
    _runner.apply_warning_filters()
    # The boot code held the collector off (see BOOT): what exists now is the interpreter's
    # and the sandbox's, alive until the end. Frozen, no collection walks it again (nor
    # does gc.get_objects() list it); the program's own objects are collected as usual.
    gc.freeze()
    gc.enable()
    return program, code, serve


def install_stand_in(stdlib: str) -> None:
    """Make ``import ctypes`` give the stand-in (``_inside/datactypes``), its submodules
    (``ctypes.util``, ``ctypes.wintypes``) still found in the real package's directory.
    Called before the hook: the program deleting it from ``sys.modules`` then meets the
    real ``ctypes``, whose ``_ctypes`` import is refused."""
    # importlib.util's two functions, from the import system's own modules: importlib.util
    # would load contextlib and more at every start.
    from _frozen_importlib import module_from_spec  # type: ignore[import-not-found]
    from _frozen_importlib_external import (  # type: ignore[import-not-found]
        spec_from_file_location,
    )

    here = os.path.dirname(os.path.abspath(__file__))
    for name, file in (("ctypes._cdata", "_cdata.py"), ("ctypes", "datactypes.py")):
        search = [os.path.join(stdlib, "ctypes")] if name == "ctypes" else None
        where = os.path.join(here, file)
        spec: Any = spec_from_file_location(name, where, submodule_search_locations=search)
        if spec is None or spec.loader is None:  # pragma: no cover - a file of this package
            raise ImportError(f"the stand-in ctypes is missing: {where}")
        module: Any = module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
