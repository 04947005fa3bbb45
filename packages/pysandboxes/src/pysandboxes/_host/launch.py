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
import sys

from pysandboxes._host.auditlog import start_audit
from pysandboxes._host.command import command_for
from pysandboxes._host.learning.plan import LearnRun, learning_output
from pysandboxes._host.learning.plan import start as start_learning
from pysandboxes._host.preparing import (
    blank_environment_block,
    implicit_exposures,
    keep_only_standard_streams,
    make_private_dir,
    pycache_prefixes,
    watch_descriptor,
    without_pycache_prefix,
)
from pysandboxes._host.rulewatch import for_run
from pysandboxes._host.select import say_what_is_missing, select
from pysandboxes._host.startup import (
    refuse_planted_code,
    refuse_replaceable_rule_links,
    startup_flags,
)
from pysandboxes._host.waiter import RELAY, finish, remove_tree
from pysandboxes._kernel.relay import WATCHED, wait
from pysandboxes._policy.discover import discover
from pysandboxes._policy.envres import resolve_env
from pysandboxes._policy.lines import display_name
from pysandboxes._policy.links import links_on_the_way
from pysandboxes._policy.parser import parse_policy
from pysandboxes._record import record
from pysandboxes._wire.spec import (
    BOOT,
    KERNEL_LAYERED,
    PYCACHE_OPTION,
    WRAPPING,
    LaunchSpec,
    Program,
    deferred,
    encode,
    named_descriptors,
)
from pysandboxes.errors import ConfigIssue, ConfigRefusedError, ConfigSyntaxError

#: The directory holding this package: the boot and waiter code put it on sys.path.
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from collections.abc import Mapping, Sequence
    from typing import Any

    from pysandboxes._policy.discover import Discovery
    from pysandboxes._policy.model import Policy
else:
    # The C module: signal's enums import enum, functools and collections, milliseconds
    # of every start of python-sb. The numbers and functions are the same.
    import _signal as signal


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
        first_run: with no rule file and no rule given, learn (``python-sb``'s first run,
            once the user said yes); when false, refuse to start instead, saying how to
            learn: nothing learns unasked.
        learn_start: what a new rule file starts with (``template`` or ``rules``); by
            default the template, or the rules alone for ``--learn=FILE``.
    """

    program: Program
    python_flags: tuple[str, ...] = ()
    config: str | None = None
    extra_rules: tuple[str, ...] = ()
    learn: str | None = None
    summary: str = ""
    first_run: bool = True
    learn_start: str = ""


_NO_RULES_CLI = (
    "no rule file was found (a new one would be {0}), and no terminal is here to ask whether "
    "to learn the rules: nothing was run. To learn them, run the program once with "
    "python-sb --learn (nothing is refused while learning; review the file it writes). To "
    "write them, start from python-sb --template > .py-sandboxes"
)
_NO_RULES = (
    "no rule file was found (a new one would be {0}): the sandbox would have no rules. Pass "
    "sandboxes_config='path/to/.py-sandboxes', rules as keywords (expose_ro='./data'), or "
    "learn='.py-sandboxes' to write the rules the calls need"
)


def learns_unasked(request: LaunchRequest, cwd: str, env: Mapping[str, str]) -> str | None:
    """The rule file a run of ``request`` would learn into because there is none yet and
    nothing asked to learn; ``None`` when the run enforces rules or was asked to learn.

    Raises:
        ConfigSyntaxError: the rules cannot be used.
    """
    if request.learn is not None:
        return None
    policy, found = load_rules(request, cwd, env)
    if found.path is not None or policy.learn is not None:
        return None
    return learning_output(None, policy, found, cwd, given=bool(request.extra_rules))


def without_rule_file(request: LaunchRequest, cwd: str, env: Mapping[str, str]) -> bool:
    """Whether a run of ``request`` finds no rule file and is not asked to learn (rules
    given on the command line may be there: they are not a file).

    Raises:
        ConfigSyntaxError: the rules cannot be used.
    """
    if request.learn is not None:
        return False
    policy, found = load_rules(request, cwd, env)
    return found.path is None and policy.learn is None


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
) -> tuple[LaunchSpec, dict[str, str], LearnRun | None, bytes]:
    """The child's spec and environment, the learning run if the run learns, and what the
    waiter checks at exit (``rulewatch``). The caller owns ``spec.tempdir`` and the
    learning pipe, and removes them."""
    policy, found = load_rules(request, cwd, env)
    for warning in policy.warnings:  # problems that do not stop the run: shown at start
        print(f"python-sb: warning: {warning}", file=sys.stderr)
    selection = select(policy, env)  # OSLayerUnavailable: never a silent downgrade
    for provider, why in selection.passed_over:
        print(
            f"python-sb: os-sandbox '{provider}' cannot run here ({why}); "
            f"'{selection.provider}', next in {selection.source}, is used instead.",
            file=sys.stderr,
        )
    if selection.provider in ("landlock", "unshare", "bwrap"):
        refuse_replaceable_rule_links(policy)
    child_env = resolve_env(policy, env)
    output = learning_output(request.learn, policy, found, cwd, given=bool(request.extra_rules))
    unasked = output is not None and found.path is None and request.learn is None
    if unasked and not request.first_run:
        partial = request.program.kind == "serve"
        where, text = ("<sandboxes()>", _NO_RULES) if partial else ("<python-sb>", _NO_RULES_CLI)
        raise ConfigRefusedError([ConfigIssue(where, 0, text.format(found.default))])
    learning = None
    if output is not None:
        start = request.learn_start or ("rules" if request.learn else "template")
        learning, child_env = start_learning(
            output, policy, env, child_env, selection.provider, start
        )
    if request.program.kind == "repl" and "TERM" in env and "TERM" not in child_env:
        # The interactive session draws on the terminal; TERM says how, nothing more.
        child_env["TERM"] = env["TERM"]
    rule_path = found.path or found.default
    protected = list(policy.rule_files)
    # Every link on the way to a rule file is part of it: retargeting one (a "current"
    # link of a release directory) would change the next run's rules.
    protected += [link for path in policy.rule_files for link in links_on_the_way(path)]
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
    if policy.audit_log is not None and policy.python_layer:
        protected.append(policy.audit_log.value)  # the decision log: the trusted side's
    # The walls: a kernel layer, or the Python layer unless py-sandbox=false turns it off.
    layers = selection.provider in KERNEL_LAYERED or (
        policy.python_layer and selection.provider != "none"
    )
    walls = learning is None and layers
    tempdir = make_private_dir()
    try:
        refuse_planted_code(
            policy,
            child_env,
            tempdir,
            cwd,
            sandboxed=walls,
            partial=request.program.kind == "serve",
            # Only the Python layer keeps a rule file read-only inside a writable exposure.
            rule_files=protected if not policy.python_layer else (),
        )
    except ConfigSyntaxError:
        remove_tree(tempdir)
        raise
    provider = "subprocess" if learning is not None else selection.provider
    watch = b"" if provider == "none" else for_run(policy, found, provider, output, request.config)
    if learning is None:  # once the run is sure to start
        say_what_is_missing(policy, selection.provider, selection.source, layers)
    spec = LaunchSpec(
        policy=policy,
        program=request.program,
        rule_file=display_name(rule_path, cwd),
        rule_dir=os.path.dirname(rule_path),
        protected=tuple(protected),
        implicit=implicit_exposures(tempdir),
        tempdir=tempdir,
        learning=learning.spec if learning is not None else None,
        # A learning run lets everything through: the kernel layer is relaxed for it alone.
        provider=provider,
        deferred_env=tuple((k, child_env.pop(k)) for k in sorted(child_env) if deferred(k))
        + tuple((PYCACHE_OPTION, value) for value in pycache_prefixes(request.python_flags)),
        startup_flags=startup_flags(request.python_flags, policy, child_env, tempdir),
    )
    return spec, child_env, learning, watch


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
    the child closes every other one it inherits but those the spec names and a
    partial-mode child's lifeline (``lifeline.lent``), before anything else runs;
    ``detached`` puts it in a process group of its own, out of the terminal's reach
    (partial mode: the caller ends it, a ^C is the caller's; its group is killed as one).
    """
    flags = without_pycache_prefix(flags)
    read_end, write_end = os.pipe()
    os.set_inheritable(read_end, True)  # bwrap and unshare keep inherited descriptors
    package_parent = _PACKAGE_PARENT
    first = spec.startup_flags
    boot = BOOT.format(path=package_parent)
    mode = f"{spec.provider}:detached" if detached else spec.provider  # see _kernel.lifetime
    kept = {read_end, *named_descriptors(spec)}
    if detached:  # partial mode: the child's lifeline too
        from pysandboxes._host.lifeline import lent

        kept |= lent()
    argv = [sys.executable, *first, *flags, "-c", boot, str(read_end), mode]
    argv.append(",".join(map(str, sorted(kept))))
    executable, argv, inherited = command_for(spec, child_env, argv, cwd)
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
        for fd in (read_end, *inherited):
            os.close(fd)
        for number, handler in zip(_TERMINAL_SIGNALS, saved, strict=False):
            signal.signal(number, handler)
    with os.fdopen(write_end, "wb") as pipe:
        pipe.write(encode(spec))
    return pid


_TERMINAL_SIGNALS = (signal.SIGINT, signal.SIGQUIT)

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
    spec, child_env, learning, watch = build_spec(request, cwd, os.environ)
    try:
        spec, audit = start_audit(spec)
    except BaseException:
        remove_tree(spec.tempdir or "")
        raise
    from pysandboxes._host.brokering import broker_argument, start_broker

    spec, broker = start_broker(spec)
    keep: set[int] = {spec.learning.event_fd} if spec.learning is not None else set()
    if audit is not None:
        keep |= {audit.read_fd, audit.child_fd, audit.log_fd} - {-1}
        os.set_inheritable(audit.child_fd, True)  # the child's alone: closed once it runs
    if broker is not None:
        keep |= {broker.ours, broker.theirs}
        os.set_inheritable(broker.theirs, True)
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
        if audit is not None:
            audit.close_child_end()
        if broker is not None:
            broker.close_child_end()
    package_parent = _PACKAGE_PARENT
    relay = RELAY.get(spec.provider, "")
    # Made once the child runs, so that it never holds it: the waiter's copy of the rules.
    watch_fd = watch_descriptor(watch)
    argv = [sys.executable, "-I", "-S", "-c", WAITER.format(path=package_parent), str(pid), tempdir]
    argv += [spec.provider, str(watch_fd), audit.argument() if audit is not None else "-"]
    argv.append(broker_argument(broker, spec) if broker is not None else "-")
    if audit is not None:  # the waiter writes the log: it gets the pipe and the log
        for fd in (audit.read_fd, audit.log_fd):
            if fd >= 0:
                os.set_inheritable(fd, True)
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
    from pysandboxes._host.waiter import conclude_run

    collector = None
    if learning is not None:
        from pysandboxes._host.learning.conclude import Collector

        collector = Collector(learning.read_fd)
    writer = audit.writer("complete") if audit is not None else None
    if broker is not None:
        broker.serve(spec, pid)
    status = wait(pid, relay)
    refusal = conclude_run(watch)
    if audit is not None and writer is not None:
        audit.conclude(writer)
    if learning is None or collector is None:
        return finish(status, tempdir)
    from pysandboxes._host.learning.conclude import conclude, show

    plan = learning.plan(cwd, os.environ, spec.policy, spec.protected, request.summary)
    summary = conclude(plan, collector.finish(), refusal=refusal)
    if summary is not None:
        show(summary, request.summary)
    return finish(status, tempdir)
