"""Partial mode, the trusted side: start one sandboxed child, tied to this process.

``start`` makes the plan of a child (``launchplan.build_spec``, as ``python-sb`` would),
with the call server as its program, the decision-log pipe and the AF_UNIX broker it may
need, and spawns it (``launch.spawn``): in a process group of its own, linked to this
process by a socket pair made here (no port, no token, nothing another process can
reach) and by its lifeline (``lifeline``). What it gives back is the running child's
parts, for ``partial.Child`` to serve calls with; if anything fails on the way, nothing
of the child is left: not its process, its descriptors nor its temporary directory.
"""

from __future__ import annotations

import os
import socket
import threading

from pysandboxes._host.auditlog import start_audit
from pysandboxes._host.brokering import start_broker
from pysandboxes._host.lifeline import Lifeline, kill_group
from pysandboxes._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from pysandboxes._host.auditlog import AuditRun
    from pysandboxes._host.launchplan import LaunchRequest
    from pysandboxes._host.learning.plan import LearnRun
    from pysandboxes._wire.spec import LaunchSpec

#: One child is spawned at a time: its ends are inheritable only meanwhile.
_SPAWNING = threading.Lock()


@record
class Started:
    """A child spawned and tied to this process.

    Attributes:
        spec: the spec it runs under.
        pid: its pid, the leader of its process group.
        sock: this process's end of the socket pair.
        errors: the read end of its standard error.
        lifeline: the lifeline that kills its group when this process ends.
        learning: the learning run, when it learns.
        audit: the decision log's run, when it has one.
        watch: what ``rulewatch`` checks when it ends.
        asks: this process's end of the permission requests' socket, when prompting.
        relief: the write end of the child's relief pipe (``ServeSpec.relief``).
    """

    spec: LaunchSpec
    pid: int
    sock: socket.socket
    errors: int
    lifeline: Lifeline
    learning: LearnRun | None
    audit: AuditRun | None
    watch: bytes
    asks: socket.socket | None = None
    relief: int = -1


def objects_mode(spec: LaunchSpec) -> bool:
    """Whether results may carry objects (``remote-result-mode=objects``)."""
    mode = spec.policy.remote_result_mode
    return mode is not None and mode.value == "objects"


def start(
    request: LaunchRequest,
    env: Mapping[str, str],
    modules: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]],
    workers: int,
    prompting: bool = False,
) -> Started:
    """Spawn a child serving the ``@sandbox`` functions of ``modules`` (their files, the
    path they import from, their names) with ``workers`` workers;
    ``prompting``: with a socket for its permission requests.

    Raises:
        ConfigSyntaxError: the rules cannot be used; nothing was started.
        OSError: the child could not be spawned; nothing is left of it.
    """
    from pysandboxes._host.launch import spawn
    from pysandboxes._host.launchplan import build_spec
    from pysandboxes._record import replace
    from pysandboxes._wire.spec import ServeSpec

    cwd = os.getcwd()
    spec, child_env, learning, watch = build_spec(request, cwd, env)
    spec, audit = start_audit(spec)
    ours, theirs = socket.socketpair()
    files, path, names = modules
    # A learning run sends objects as data too: their classes are what it learns.
    objects = objects_mode(spec) or learning is not None
    relief_read, relief = os.pipe()
    serving = ServeSpec(
        theirs.fileno(), workers, files, path, modules=names, objects=objects, relief=relief_read
    )
    spec = replace(spec, serve=serving)
    spec, broker = start_broker(spec)
    asks = asked = None
    if prompting:  # one message per request: the kernel keeps the bounds
        asks, asked = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        spec = replace(spec, ask_fd=asked.fileno())
    errors_read, errors_write = os.pipe()
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_DUP2, errors_write, 2),
    ]
    pid = 0
    lifeline = Lifeline()
    try:
        # Its ends are inheritable only while this child is spawned: a child another
        # thread spawns meanwhile (another sandbox, the reaper) must not hold them, or
        # this one's end would never be seen.
        with _SPAWNING:
            theirs.set_inheritable(True)
            os.set_inheritable(relief_read, True)
            lifeline.inheritable(True)
            if audit is not None:
                os.set_inheritable(audit.child_fd, True)
            if broker is not None:
                os.set_inheritable(broker.theirs, True)
            if asked is not None:
                asked.set_inheritable(True)
            try:
                pid = spawn(
                    spec, child_env, request.python_flags, cwd, file_actions=actions, detached=True
                )
            finally:
                theirs.close()
                os.close(relief_read)
                if asked is not None:
                    asked.close()
                os.close(errors_write)
                lifeline.inheritable(False)
                if broker is not None:
                    broker.close_child_end()
            lifeline.arm(pid, spec.tempdir)
            if broker is not None:
                broker.serve(spec, pid)
    except BaseException:
        if pid:  # started, but not tied to this process: not left running
            kill_group(pid)
            os.waitpid(pid, 0)
        os.close(errors_read)
        os.close(relief)
        ours.close()
        if asks is not None:
            asks.close()
            if asked is not None:
                asked.close()
        if broker is not None:
            broker.close_child_end()
            os.close(broker.ours)
        lifeline.release()
        if spec.tempdir:
            from pysandboxes._host.waiter import remove_tree

            remove_tree(spec.tempdir)
        raise
    finally:
        if learning is not None:
            learning.close_child_end()
        if audit is not None:
            audit.close_child_end()
    return Started(spec, pid, ours, errors_read, lifeline, learning, audit, watch, asks, relief)
