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
from pysandboxes._policy.judge import ApiJudge, FileJudge, ImportJudge, NetJudge
from pysandboxes._policy.model import Access
from pysandboxes._policy.view import exposures as _exposures
from pysandboxes._policy.view import interpreter_roots, module_files, plan_for
from pysandboxes._wire.spec import LaunchSpec, decode
from pysandboxes.errors import OSLayerUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import CodeType
    from typing import Any

    from pysandboxes._inside.enforce import Enforcer
    from pysandboxes._policy.plan import AppliedLayer
    from pysandboxes._wire.spec import Program


def _read_spec(fd: int) -> LaunchSpec:
    chunks: list[bytes] = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return decode(b"".join(chunks))


def apply_kernel_layer(spec: LaunchSpec, roots: list[str], program: list[str]) -> AppliedLayer:
    """Have the kernel enforce the rules on this process and all it starts.

    Under ``landlock``: Landlock, and a network namespace of its own when no ``net=``
    rule allows anything. Under ``bwrap`` and ``unshare``, the namespaces are made
    already (by the provider's program, from the trusted side's plan): this drops the
    capabilities an ``unshare`` user namespace grants, then applies Landlock inside the
    namespaces too, with the namespace's own ``/proc`` readable. Under all three, a
    seccomp filter last (see ``_kernel.seccomp``). Where the kernel lacks a part, the
    returned layer says why. Call it while single-threaded.

    Raises:
        OSLayerUnavailable: the kernel refused the rules or the capability drop.
    """
    from pysandboxes._kernel import landlock
    from pysandboxes._policy.plan import AppliedLayer, in_namespaces
    from pysandboxes._wire.spec import WRAPPING

    namespaced = spec.provider in WRAPPING
    try:
        if spec.provider == "unshare":
            from pysandboxes._kernel.unshare import drop_capabilities

            try:
                drop_capabilities()
            except OSError as exc:
                raise OSLayerUnavailable(str(exc.strerror), provider="unshare") from exc
        from pysandboxes._kernel.keyring import leave_session_keyring

        leave_session_keyring(spec.provider)  # the launching session's keys stay outside
        also = ("/proc",) if namespaced else ()
        plan = plan_for(spec.policy, spec.implicit, spec.tempdir, roots, program, also)
        reason = landlock.unavailable_reason()
        if reason is not None:
            layer = AppliedLayer("none", missing=(("landlock", reason),))
        else:
            from pysandboxes._kernel.netns import isolate_network

            if not plan.network and not namespaced:
                isolate_network()  # and IPC (the seccomp filter refuses System V IPC too)
            layer = landlock.apply(plan)
        # As root the process would keep root's capabilities, which Landlock does not
        # mediate (host name, clock, BPF...): give them all up, under every provider.
        from pysandboxes._kernel.netns import drop_all_capabilities

        drop_all_capabilities()
        # What Landlock does not mediate (the inherited terminal, the keyrings...).
        from pysandboxes._kernel.seccomp import add_to

        layer = add_to(layer, plan)
        return in_namespaces(spec.provider, plan, layer) if namespaced else layer
    finally:
        # The binding's ctypes must not stay imported: a cached module skips the import
        # check that keeps ctypes from a program without a native grant.
        for name in [n for n in sys.modules if n.partition(".")[0] in ("ctypes", "_ctypes")]:
            del sys.modules[name]


def restore_terminal_signals() -> None:
    """Undo what the trusted side did for a provider's program: ^C and ^\\ ignored.

    The program in front (bwrap, unshare) shares the terminal's process group and must
    not die of a ^C meant for the program; ignored signals stay ignored across ``exec``,
    so this interpreter gets them back as CPython would have set them.
    """
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def list_program_directory(program: Program) -> object | None:
    """The import system's finder for the program's directory, its listing taken now.

    The directory joins ``sys.path`` after the kernel layer, which may refuse to list it
    (only some files in it are exposed); the finder lists it once, before, and the
    guards then keep in its listing only the entries the rules show.
    """
    if sys.flags.safe_path:
        return None
    return prelisted_finder(_runner.program_directory(program))


def prelisted_finder(directory: str) -> object | None:
    """The import system's finder for ``directory``, listed now and kept for it (a
    directory of the search path only some of whose entries are exposed: see above)."""
    for hook in sys.path_hooks:
        try:
            finder: Any = hook(directory)
        except ImportError:
            continue
        fill = getattr(finder, "_fill_cache", None)
        if fill is None:
            return None
        try:
            finder._path_mtime = os.stat(directory).st_mtime  # else the first import refills
        except OSError:
            return None
        fill()
        sys.path_importer_cache[directory] = finder
        return finder
    return None


def show_only_exposed(finder: object | None, judge: FileJudge) -> None:
    """Keep in the prefilled listing only what the rules show (see above)."""
    if finder is None:
        return
    listed: Any = finder
    base = str(listed.path).rstrip("/")
    shown = {
        name
        for name in listed._path_cache
        if judge.judge(f"{base}/{name}", Access.READ).allowed
        or judge.leads_to_exposure(f"{base}/{name}")
    }
    listed._path_cache = shown
    listed._relaxed_path_cache = {name.lower() for name in shown}


def install_guards(spec: LaunchSpec, roots: list[str], program: list[str]) -> FileJudge:
    """Install the audit hook and the wrappers; nothing of the program has run yet.

    Returns the file judge, for the listing taken before the walls.
    """
    policy = spec.policy
    enforcer = _enforcer(spec)
    seen = _exposures(policy, spec.implicit, roots, program)
    judge = FileJudge(seen, policy.ignore, spec.protected)
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
        realpath=Resolver().realpath,
    )
    if not import_judge.allows_any:  # python-import=* switches the guard off
        hook.add(imports.events)
        imports.install()
    # Before the hook: importing it afterwards is refused.
    guard_unreported(calls.family_allowed, FORK_EXEC_FAMILY, sealed_globals)
    dnspins.install(policy.pins)  # before the hook, which guards the functions it builds
    hook.install()
    filewraps.install(files.metadata_seen)
    _hide(internal)
    return judge


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


#: Modules that stay importable as they are: the public surface, what program frames may
#: show (the runner sits under the program's first frame), and the wrappers, which hold
#: only the functions they wrap (help() and IPython read their signatures).
_PUBLIC = frozenset(
    {
        "pysandboxes",
        "pysandboxes.errors",
        "pysandboxes._mode",
        "pysandboxes._record",
        "pysandboxes._inside.runner",
        "pysandboxes._inside.repl",
        "pysandboxes._inside.tracebacks",
        "pysandboxes._inside.adjust",
        "pysandboxes._version",
        "pysandboxes._inside.guards.filewraps",
        "pysandboxes._inside.guards.pinned",
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

    adjust_on_import(spec.tempdir, spec.rule_file)
    _runner.session.update(
        rule_file=spec.rule_file,
        tempdir=spec.tempdir,
        provider=spec.provider,
        learning="yes" if spec.learning is not None else None,
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
    if spec.provider == "unshare":
        from pysandboxes._kernel.unshare import become_init

        become_init()  # pid 1 ignores unhandled signals: the program runs as pid 2
    serve = None
    if serving is not None:
        from pysandboxes._inside.server import start

        serve = start(serving)  # its threads exist before the guards
    if spec.provider != "none":  # 'none' asks for no sandbox at all; the banner says so
        judge = install_guards(spec, roots, files)
        if spec.learning is None:  # a learning run sees everything, as unsandboxed
            for listing in listings:
                show_only_exposed(listing, judge)
    # Only now may the program's directory, the working directory and PYTHONPATH lead
    # imports, and the site module's work run: what they load is judged like the program.
    os.environ.update(dict(spec.deferred_env))
    _runner.prepare(program, full_path)
    if serving is not None:
        sys.path[1:1] = [p for p in serving.path if p not in sys.path]
    _runner.apply_warning_filters()
    return program, code, serve
