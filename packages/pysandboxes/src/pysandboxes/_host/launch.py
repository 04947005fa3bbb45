"""Complete mode, the trusted side: one pass from the command line to the program's end.

``run`` takes the steps in order, each in one place:

1. load the rules (``load_rules``: discovery, parser);
2. decide the plan (``build_spec``: provider, environment, start-up checks, the view
   the provider mounts, and whether the run learns: ``learning.plan``);
3. spawn the sandboxed interpreter (``spawn``, through ``command`` for bwrap/unshare);
4. wait, as the waiter that replaces this process (``waiter``);
5. conclude: end what the program left running, and, when learning, write the rules
   (``learning.conclude``).

This process keeps the host environment and the rule files; the sandboxed interpreter it
spawns gets exactly the variables the rules produce. Before spawning, it blanks its own
initial environment block, so ``/proc/<parent>/environ`` shows the sandbox nothing. It
forwards INT, TERM, HUP, QUIT, USR1 and USR2 to the program (those a terminal already
sent to the whole process group are not sent twice), and ends as the program ended: with
its exit status, or killed by the same signal.
"""

from __future__ import annotations

import os
import signal
import sys

from pysandboxes._host.command import command_for
from pysandboxes._host.learning.plan import LearnRun, learning_output
from pysandboxes._host.learning.plan import start as start_learning
from pysandboxes._host.select import select
from pysandboxes._host.startup import refuse_planted_code, startup_flags
from pysandboxes._host.waiter import finish, remove_tree
from pysandboxes._kernel.relay import WATCHED, wait
from pysandboxes._policy.discover import discover
from pysandboxes._policy.envres import resolve_env
from pysandboxes._policy.lines import display_name
from pysandboxes._policy.model import ExposeRule, Origin
from pysandboxes._policy.parser import parse_policy
from pysandboxes._record import record
from pysandboxes._wire.spec import (
    BOOT,
    PYCACHE_OPTION,
    WRAPPING,
    LaunchSpec,
    Program,
    deferred,
    encode,
)
from pysandboxes.errors import ConfigIssue, ConfigSyntaxError

#: The directory holding this package: the boot and waiter code put it on sys.path.
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from pysandboxes._policy.discover import Discovery
    from pysandboxes._policy.model import Policy

_DEVICES = Origin("<devices>", 0, "the standard devices")
_CERTIFICATES = Origin("<ca-certificates>", 0, "the system's CA certificates")
_TEMP = Origin("<tempdir>", 0, "the sandbox's private temporary directory")
_READ_DEVICES = ("/dev/zero", "/dev/urandom", "/dev/random")
_WRITE_DEVICES = ("/dev/null", "/dev/full")
_CA_STORES = (
    "/etc/ssl/certs",
    "/etc/ssl/cert.pem",
    "/etc/pki/tls/certs",
    "/etc/pki/ca-trust/extracted",
    "/etc/ca-certificates",
    "/usr/share/ca-certificates",
)


@record
class LaunchRequest:
    """A ``python-sb`` run, as the command line gave it.

    Attributes:
        program: what to run.
        python_flags: CPython options for the sandboxed interpreter (``-u``, ``-X dev``...).
        config: ``--pysandboxes-config``, or ``None``.
        extra_rules: ``--key=value`` rules, as ``key=value`` lines.
        learn: ``--learn[=FILE]``: ``None`` when absent, ``""`` for the rule file in use.
        summary: ``module:function`` that prints a learning run's summary (the front end's
            own rendering); plain text when empty. The waiter imports it by name.
        first_run: with no rule file and no rule given, learn (``python-sb``'s first run);
            when false (partial mode), refuse to start instead: nothing learns unasked.
    """

    program: Program
    python_flags: tuple[str, ...] = ()
    config: str | None = None
    extra_rules: tuple[str, ...] = ()
    learn: str | None = None
    summary: str = ""
    first_run: bool = True


_NO_RULES = (
    "no rule file was found (a new one would be {0}): the sandbox would have no rules. Pass "
    "sandboxes_config='path/to/.py-sandboxes', rules as keywords (expose_ro='./data'), or "
    "learn='.py-sandboxes' to write the rules the calls need"
)


def _implicit(tempdir: str) -> tuple[ExposeRule, ...]:
    rules = [ExposeRule(tempdir, True, True, _TEMP)]
    rules += [ExposeRule(d, True, False, _DEVICES) for d in _WRITE_DEVICES if os.path.exists(d)]
    rules += [ExposeRule(d, False, False, _DEVICES) for d in _READ_DEVICES if os.path.exists(d)]
    for store in _CA_STORES:
        if os.path.exists(store):
            real = os.path.realpath(store)
            rules.append(ExposeRule(real, False, os.path.isdir(real), _CERTIFICATES))
    return tuple(rules)


def load_rules(
    request: LaunchRequest, cwd: str, env: Mapping[str, str]
) -> tuple[Policy, Discovery]:
    """Find and parse the rules of a run. Raises ``ConfigSyntaxError``."""
    program = request.program
    found = discover(
        request.config,
        script=program.target if program.kind == "script" else None,
        module=program.target if program.kind == "module" else None,
        cwd=cwd,
        search_path=[cwd],
    )
    policy = parse_policy(found.path, extra_rules=request.extra_rules, cwd=cwd, env=env)
    return policy, found


def build_spec(
    request: LaunchRequest, cwd: str, env: Mapping[str, str]
) -> tuple[LaunchSpec, dict[str, str], LearnRun | None]:
    """The child's spec and environment, and the learning run if the run learns. The
    caller owns ``spec.tempdir`` and the learning pipe, and removes them."""
    policy, found = load_rules(request, cwd, env)
    selection = select(policy, env)  # OSLayerUnavailable: never a silent downgrade
    for provider, why in selection.passed_over:
        print(
            f"python-sb: os-sandbox '{provider}' cannot run here ({why}); "
            f"'{selection.provider}', next in {selection.source}, is used instead.",
            file=sys.stderr,
        )
    child_env = resolve_env(policy, env)
    output = learning_output(request.learn, policy, found, cwd, given=bool(request.extra_rules))
    if (
        output is not None
        and found.path is None
        and request.learn is None
        and not request.first_run
    ):
        raise ConfigSyntaxError([ConfigIssue("<sandboxes()>", 0, _NO_RULES.format(found.default))])
    learning = None
    if output is not None:
        learning, child_env = start_learning(output, policy, env, child_env, selection.provider)
    if request.program.kind == "repl" and "TERM" in env and "TERM" not in child_env:
        # The interactive session draws on the terminal; TERM says how, nothing more.
        child_env["TERM"] = env["TERM"]
    rule_path = found.path or found.default
    protected = list(policy.rule_files)
    # The places the search looks at before the rule file: a file planted there, even
    # under a name given to --pysandboxes-config (the judge knows only .py-sandboxes),
    # would rule the next run.
    searched = list(found.searched)
    if rule_path in searched:
        searched = searched[: searched.index(rule_path) + 1]
    protected += [p for p in searched if os.path.basename(p) != "pyproject.toml"]
    if policy.learn is not None:
        protected.append(policy.learn.value)
    if output is not None:
        protected.append(output)
    tempdir = make_private_dir()
    try:
        refuse_planted_code(
            policy,
            child_env,
            tempdir,
            cwd,
            sandboxed=learning is None and selection.provider != "none",
        )
    except ConfigSyntaxError:
        remove_tree(tempdir)
        raise
    spec = LaunchSpec(
        policy=policy,
        program=request.program,
        rule_file=display_name(rule_path, cwd),
        rule_dir=os.path.dirname(rule_path),
        protected=tuple(protected),
        implicit=_implicit(tempdir),
        tempdir=tempdir,
        learning=learning.spec if learning is not None else None,
        # A learning run lets everything through: the kernel layer is relaxed for it alone.
        provider="subprocess" if learning is not None else selection.provider,
        deferred_env=tuple((k, child_env.pop(k)) for k in sorted(child_env) if deferred(k))
        + tuple((PYCACHE_OPTION, value) for value in _pycache_prefixes(request.python_flags)),
        startup_flags=startup_flags(request.python_flags, policy, child_env, tempdir),
    )
    return spec, child_env, learning


def keep_only_standard_streams(keep: set[int]) -> None:
    """Let no descriptor python-sb inherited pass into the sandbox but standard input,
    output and error (and ``keep``): one open on a file outside the rules would be a way
    to it that no rule judged, and the kernel layer does not check descriptors already
    open. They stay usable here; the child and the waiter do not get them."""
    try:
        found = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return  # no /proc: descriptors cannot be listed; nothing better to do here
    for fd in found:
        if fd > 2 and fd not in keep:
            try:
                os.set_inheritable(fd, False)
            except OSError:
                continue  # closed meanwhile (the listing's own descriptor)


def make_private_dir() -> str:
    """A new mode-0700 directory for the sandbox's temporary files (``tempfile`` is slow
    to import and would be needed for this alone)."""
    base = os.environ.get("TMPDIR") or "/tmp"
    for _ in range(100):
        path = os.path.join(base, f"pysandboxes-{os.urandom(6).hex()}")
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return os.path.realpath(path)
    raise FileExistsError(f"cannot create a private directory in {base}")


def blank_environment_block() -> None:
    """Overwrite this process's initial environment, what ``/proc/<pid>/environ`` shows.

    ``os.environ`` is a copy and stays usable; only the block the kernel exposes to other
    processes of the same user is erased.
    """
    try:
        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rpartition(b")")[2].split()
        # Fields after "(comm)" start at field 3; env_start and env_end are fields 50, 51.
        start, end = int(fields[47]), int(fields[48])
        if end > start:
            with open("/proc/self/mem", "r+b", buffering=0) as memory:
                memory.seek(start)
                memory.write(b"\0" * (end - start))
    except (OSError, IndexError, ValueError):
        pass  # not Linux, or /proc is unavailable: the kernel layer must cover it


def _pycache_prefixes(flags: Sequence[str]) -> list[str]:
    """The values of ``-X pycache_prefix=`` among the interpreter options (the last wins)."""
    from itertools import pairwise

    pairs = pairwise(flags)
    return [v.partition("=")[2] for f, v in pairs if f == "-X" and _is_pycache_prefix(v)][-1:]


def _is_pycache_prefix(option: str) -> bool:
    return option.partition("=")[0] == "pycache_prefix"


def _without_pycache_prefix(flags: Sequence[str]) -> list[str]:
    """The options without ``-X pycache_prefix=``: a bytecode cache the sandbox may write
    would feed the next start-up, before the walls; the child sets it once they are up."""
    kept: list[str] = []
    for flag in flags:
        if kept and kept[-1] == "-X" and _is_pycache_prefix(flag):
            kept.pop()
            continue
        kept.append(flag)
    return kept


def spawn(
    spec: LaunchSpec,
    child_env: dict[str, str],
    flags: Sequence[str],
    cwd: str,
    *,
    file_actions: Sequence[tuple[Any, ...]] = (),
    detached: bool = False,
) -> int:
    """Start the sandboxed interpreter for ``spec``; return its pid (or its provider's).

    ``file_actions`` set its standard descriptors (partial mode: never the caller's own);
    ``detached`` puts it in a process group of its own, out of the terminal's reach
    (partial mode: the caller ends it, a ^C is the caller's; its group is killed as one).
    """
    flags = _without_pycache_prefix(flags)
    read_end, write_end = os.pipe()
    os.set_inheritable(read_end, True)  # bwrap and unshare keep inherited descriptors
    package_parent = _PACKAGE_PARENT
    first = spec.startup_flags
    argv = [sys.executable, *first, *flags, "-c", BOOT.format(path=package_parent), str(read_end)]
    executable, argv = command_for(spec, child_env, argv, cwd)
    # The provider's program stays in the terminal's process group: a ^C there must reach
    # the program (the waiter relays it), not end the provider. The child restores them.
    wrapped = spec.provider in WRAPPING and not detached
    saved = [signal.signal(s, signal.SIG_IGN) for s in _TERMINAL_SIGNALS] if wrapped else []
    try:
        if detached:
            # A group, not a session: a session of its own is a scheduling group of its
            # own (autogroup), whose CPU share then competes with the caller's: -30%
            # calls per second from 4 threads in partial mode.
            pid = os.posix_spawn(
                executable,
                argv,
                child_env,
                setsigmask=(),
                file_actions=file_actions or None,
                setpgroup=0,
            )
        else:
            pid = os.posix_spawn(
                executable, argv, child_env, setsigmask=(), file_actions=file_actions or None
            )
    finally:
        os.close(read_end)
        for number, handler in zip(_TERMINAL_SIGNALS, saved, strict=False):
            signal.signal(number, handler)
    with os.fdopen(write_end, "wb") as pipe:
        pipe.write(encode(spec))
    return pid


_TERMINAL_SIGNALS = (signal.SIGINT, signal.SIGQUIT)
#: How the waiter relays signals, per provider (see ``_host.waiter.wait``).
_RELAY = {"bwrap": "session", "unshare": "init"}

#: What the trusted side becomes once the child runs (see ``_host.waiter``).
WAITER = (
    "import sys;sys.path.insert(0,{path!r});"
    "from pysandboxes._host.waiter import main;del sys.path[0];main()"
)


def run(request: LaunchRequest, *, cwd: str | None = None) -> int:
    """Run the program under its rules; return its exit status, or die by its signal.

    After spawning the program this process replaces itself with the waiter, started
    with an empty environment; the waiter ends with the program's status. Only if that
    fails does this function wait itself (and return).

    Raises:
        ConfigSyntaxError: the rules cannot be used; nothing was started.
        OSLayerUnavailable: the kernel provider the rules ask for cannot run here.
    """
    cwd = os.path.abspath(cwd or os.getcwd())
    spec, child_env, learning = build_spec(request, cwd, os.environ)
    keep: set[int] = {spec.learning.event_fd} if spec.learning is not None else set()
    keep_only_standard_streams(keep)
    if learning is not None or spec.provider != "none":
        from pysandboxes._host.waiter import adopt_orphans

        # The waiter ends what the program leaves running (a double fork, setsid): under
        # landlock nothing else would, and a sandboxed process would outlive the run.
        adopt_orphans()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    tempdir = spec.tempdir or ""
    try:
        pid = spawn(spec, child_env, request.python_flags, cwd)
    except BaseException:
        if tempdir:
            remove_tree(tempdir)
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        raise
    finally:
        if learning is not None:
            learning.close_child_end()
    package_parent = _PACKAGE_PARENT
    relay = _RELAY.get(spec.provider, "")
    argv = [sys.executable, "-I", "-S", "-c", WAITER.format(path=package_parent), str(pid), tempdir]
    argv.append(relay)
    if learning is not None:
        # The waiter learns too: it gets the pipe and the plan, still no environment.
        from pysandboxes._host.learning.plan import plan_argument

        os.set_inheritable(learning.read_fd, True)
        plan = learning.plan(cwd, os.environ, spec.policy, spec.protected, request.summary)
        argv.append(plan_argument(plan))
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    try:
        os.execve(sys.executable, argv, {})
    except OSError:
        blank_environment_block()  # the host environment stays here: hide what we can
    if learning is None:
        from pysandboxes._host.waiter import end_leftovers

        status = wait(pid, relay)
        end_leftovers()
        return finish(status, tempdir)
    from pysandboxes._host.learning.conclude import Collector, conclude, show
    from pysandboxes._host.waiter import end_leftovers

    collector = Collector(learning.read_fd)
    status = wait(pid, relay)
    end_leftovers()
    plan = learning.plan(cwd, os.environ, spec.policy, spec.protected, request.summary)
    summary = conclude(plan, collector.finish())
    if summary is not None:
        show(summary, request.summary)
    return finish(status, tempdir)
