"""Complete and partial mode, the trusted side: start the plan, then wait as the waiter.

``launchplan.build_spec`` makes the plan of a run, once; this module starts it:

1. ``spawn`` starts the sandboxed interpreter with the plan's environment and command
   (through ``command`` for bwrap and unshare), and sends it the spec over a pipe;
2. ``run`` (complete mode) then replaces this process with the waiter (``waiter``), which
   forwards signals, adopts the sandbox's pid 1 (``_kernel.handoff``), and concludes:
   ends what the program left running and, when learning, writes the rules
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
from pysandboxes._host.launchplan import LaunchRequest, build_spec
from pysandboxes._host.preparing import (
    blank_environment_block,
    keep_only_standard_streams,
    watch_descriptor,
    without_pycache_prefix,
)
from pysandboxes._host.waiter import RELAY, finish, remove_tree
from pysandboxes._kernel.relay import WATCHED, wait
from pysandboxes._wire.spec import BOOT, WRAPPING, LaunchSpec, encode, named_descriptors

#: The directory holding this package: the boot and waiter code put it on sys.path.
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from collections.abc import Sequence
    from typing import Any

    from pysandboxes._host.launchplan import Rules
else:
    # The C module: signal's enums import enum, functools and collections, milliseconds
    # of every start of python-sb. The numbers and functions are the same.
    import _signal as signal


def spawn(
    spec: LaunchSpec,
    child_env: dict[str, str],
    flags: Sequence[str],
    cwd: str,
    *,
    file_actions: Sequence[tuple[Any, ...]] = (),
    detached: bool = False,
    handoff: tuple[int, int] | None = None,
) -> int:
    """Start the sandboxed interpreter for ``spec``; return its pid (or its provider's).

    ``file_actions`` set its standard descriptors (partial mode: never the caller's own);
    the child closes every other one it inherits but those the spec names and a
    partial-mode child's lifeline (``lifeline.lent``), before anything else runs;
    ``detached`` puts it in a process group of its own, out of the terminal's reach
    (partial mode: the caller ends it, a ^C is the caller's; its group is killed as one).
    ``handoff``: the sandbox's ends of ``_kernel.handoff`` (complete mode, under
    ``landlock`` and ``subprocess``): its pid 1 then becomes the caller's child. They are
    closed here once the child has them.
    """
    flags = without_pycache_prefix(flags)
    read_end, write_end = os.pipe()
    os.set_inheritable(read_end, True)  # bwrap and unshare keep inherited descriptors
    package_parent = _PACKAGE_PARENT
    first = spec.startup_flags
    boot = BOOT.format(path=package_parent)
    mode = f"{spec.provider}:detached" if detached else spec.provider  # see _kernel.lifetime
    kept = {read_end, *named_descriptors(spec)}
    if handoff is not None:
        from pysandboxes._kernel.handoff import argument

        mode = f"{spec.provider}:handoff={argument(handoff)}"
        kept |= set(handoff)
        for fd in handoff:
            os.set_inheritable(fd, True)
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
        for fd in (read_end, *inherited, *(handoff or ())):
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


def run(request: LaunchRequest, *, cwd: str | None = None, rules: Rules | None = None) -> int:
    """Run the program under its rules; return its exit status, or die by its signal.

    After spawning the program this process replaces itself with the waiter, started
    with an empty environment; the waiter ends with the program's status. Only if that
    fails does this function wait itself (and return).

    Raises:
        ConfigSyntaxError: the rules cannot be used; nothing was started.
        OSLayerUnavailable: the kernel provider the rules ask for cannot run here.
    """
    cwd = os.path.abspath(cwd or os.getcwd())
    spec, child_env, learning, watch = build_spec(request, cwd, os.environ, rules)
    try:
        spec, audit = start_audit(spec)
    except BaseException:
        remove_tree(spec.tempdir or "")
        raise
    from pysandboxes._host.brokering import broker_argument, start_broker

    spec, broker = start_broker(spec)
    from pysandboxes._host.promptrun import start_prompts

    spec, prompts = start_prompts(spec)
    keep: set[int] = {spec.learning.event_fd} if spec.learning is not None else set()
    if audit is not None:
        keep |= {audit.read_fd, audit.child_fd, audit.log_fd} - {-1}
        os.set_inheritable(audit.child_fd, True)  # the child's alone: closed once it runs
    if broker is not None:
        keep |= {broker.ours, broker.theirs}
        os.set_inheritable(broker.theirs, True)
    if prompts is not None:
        keep |= {prompts.ours, prompts.theirs}
        os.set_inheritable(prompts.theirs, True)
    keep_only_standard_streams(keep)
    if learning is not None or spec.provider != "none":
        from pysandboxes._host.waiter import adopt_orphans

        # The waiter ends what the program leaves running (a double fork, setsid): under
        # landlock nothing else would, and a sandboxed process would outlive the run.
        adopt_orphans()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    tempdir = spec.tempdir or ""
    adopting: tuple[int, int] | None = None
    handoff: tuple[int, int] | None = None
    if spec.provider in ("landlock", "subprocess"):  # pid 1 comes to the waiter
        from pysandboxes._kernel.handoff import make

        adopting, handoff = make()
    try:
        pid = spawn(spec, child_env, request.python_flags, cwd, handoff=handoff)
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
        if prompts is not None:
            prompts.close_child_end()
    package_parent = _PACKAGE_PARENT
    relay = RELAY.get(spec.provider, "")
    # Made once the child runs, so that it never holds it: the waiter's copy of the rules.
    watch_fd = watch_descriptor(watch)
    argv = [sys.executable, "-I", "-S", "-c", WAITER.format(path=package_parent), str(pid), tempdir]
    argv += [spec.provider, str(watch_fd), audit.argument() if audit is not None else "-"]
    argv.append(broker_argument(broker, spec) if broker is not None else "-")
    if adopting is not None:  # the waiter adopts the sandbox's pid 1: its two ends
        from pysandboxes._kernel.handoff import argument

        for fd in adopting:
            os.set_inheritable(fd, True)
        argv.append(argument(adopting))
    else:
        argv.append("-")
    argv.append(prompts.argument(spec, os.environ) if prompts is not None else "-")
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
        broker.serve(spec, pid if adopting is None else os.getpid())
    followed = None
    if prompts is not None:
        from pysandboxes._host.promptrun import serve_argument
        from pysandboxes._host.rulewatch import Followed

        followed = Followed(watch)
        serve_argument(prompts.argument(spec, os.environ), writer, followed)
    if adopting is not None:
        from pysandboxes._kernel.handoff import wait_adopting

        status = wait_adopting(pid, relay, adopting)
    else:
        status = wait(pid, relay)
    refusal = conclude_run(followed.data if followed is not None else watch)
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
