"""The sandboxed interpreter: read the spec, install the guards, run the program.

Started by the trusted side as ``python [flags] -c <boot> <fd>``; the spec arrives on file
descriptor ``fd``. The order matters: the audit hook goes in first, then the wrappers, and
only then does any code of the program run. The kernel layer (a later milestone) will be
applied here too, before the guards.
"""

from __future__ import annotations

import os
import sys

from pysandboxes import _mode, _runner
from pysandboxes._enforce import Enforcing, Messages
from pysandboxes._guards import filewraps
from pysandboxes._guards.audit import AuditHook
from pysandboxes._guards.dynamic import DynamicCodeGuard
from pysandboxes._guards.files import FileGuard
from pysandboxes._guards.paths import Resolver
from pysandboxes._policy.judge import ApiJudge, FileJudge
from pysandboxes._policy.model import ExposeRule, Origin
from pysandboxes._spec import LaunchSpec, decode

_PYTHON = Origin("<python>", 0, "the interpreter's own files")
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


def _exposures(spec: LaunchSpec, roots: list[str]) -> list[ExposeRule]:
    implicit = [ExposeRule(root, False, os.path.isdir(root), _PYTHON) for root in roots]
    executable = os.path.realpath(sys.executable)
    implicit.append(ExposeRule(executable, False, False, _PYTHON))
    # The rules come after the implicit grants: a rule on the same path decides.
    by_path = {rule.path: rule for rule in (*implicit, *spec.implicit, *spec.policy.expose)}
    return list(by_path.values())


def install_guards(spec: LaunchSpec) -> None:
    """Install the audit hook and the wrappers; nothing of the program has run yet."""
    roots = interpreter_roots()
    policy = spec.policy
    enforcer = Enforcing(Messages(spec.rule_file, spec.rule_dir))
    judge = FileJudge(_exposures(spec, roots), policy.ignore, spec.protected)
    files = FileGuard(judge, enforcer, Resolver())
    dynamic = DynamicCodeGuard(ApiJudge(policy), enforcer, roots, [_OWN_DIR], spec.rule_file)
    hook = AuditHook()
    hook.add(files.events)
    hook.add(dynamic.events)
    hook.install()
    filewraps.install(files)


def _use_private_tempdir(path: str) -> None:
    """Point ``tempfile`` at the sandbox's private directory, without importing it now.

    The variable ``TMPDIR`` is not set: the program sees exactly the variables its rules
    produce. Instead ``tempfile.tempdir`` is set when the program first imports it.
    """
    if "tempfile" in sys.modules:
        sys.modules["tempfile"].tempdir = path  # type: ignore[attr-defined]
        return

    class TempdirFinder:
        @staticmethod
        def find_spec(name: str, path_: object = None, target: object = None) -> object:
            if name != "tempfile":
                return None
            sys.meta_path.remove(TempdirFinder)  # type: ignore[arg-type]
            from importlib.machinery import PathFinder

            spec = PathFinder.find_spec(name)
            if spec is None or spec.loader is None:
                return spec
            loader = spec.loader
            original = loader.exec_module  # type: ignore[union-attr]

            def exec_module(module: object) -> None:
                original(module)  # type: ignore[arg-type]
                module.tempdir = path  # type: ignore[attr-defined]

            loader.exec_module = exec_module  # type: ignore[method-assign]
            return spec

    sys.meta_path.insert(0, TempdirFinder)  # type: ignore[arg-type]


def main() -> None:
    """Entry point of the sandboxed interpreter (see ``BOOT``)."""
    spec = _read_spec(int(sys.argv[1]))
    _mode.enter_sandbox()
    if spec.tempdir is not None:
        _use_private_tempdir(spec.tempdir)
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
    _runner.prepare(program)
    install_guards(spec)
    _runner.run(program, code)
