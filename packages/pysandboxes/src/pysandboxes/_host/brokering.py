"""Starting a run's socket broker (see ``_host.unixbroker``): whether the run needs one,
its channel, and how the waiter gets it. Light on purpose: every launch asks."""

from __future__ import annotations

import os

from pysandboxes._record import replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading

    from pysandboxes._policy.judge import FileJudge, NetJudge
    from pysandboxes._wire.spec import LaunchSpec


class ChannelEnds:
    """A channel of a run being started: this side's end and the child's."""

    def __init__(self, ours: int, theirs: int) -> None:
        self.ours = ours
        self.theirs = theirs

    def close_child_end(self) -> None:
        """Once the child is spawned: its end is its own."""
        if self.theirs >= 0:
            os.close(self.theirs)
            self.theirs = -1


class BrokerRun(ChannelEnds):
    """The broker of a run being started: its channel's two ends (see ``start_broker``)."""

    def serve(self, spec: LaunchSpec, child: int) -> threading.Thread:
        """Answer the calls of ``child`` (and its descendants) under ``spec``'s rules."""
        from pysandboxes._host.unixbroker import SocketBroker

        files, net = judges(spec)
        return SocketBroker(self.ours, child, files, net).start()


def needs_broker(spec: LaunchSpec) -> bool:
    """Whether the run's native code may make AF_UNIX sockets, whose addresses Landlock
    cannot judge: under ``landlock`` and ``unshare`` (``bwrap`` shows only exposed
    socket files), not while learning (the kernel layer is relaxed then)."""
    if spec.provider not in ("landlock", "unshare") or spec.learning is not None:
        return False
    from pysandboxes._policy.confinement import may_use_unix_sockets

    if not may_use_unix_sockets(spec.policy):
        return False  # the common case: the mechanism's modules are not even loaded
    from pysandboxes._kernel import seccomp, unixbroker

    return not (seccomp.unavailable_reason() or unixbroker.unavailable_reason())


def start_broker(spec: LaunchSpec) -> tuple[LaunchSpec, BrokerRun | None]:
    """``spec`` with the broker's channel for the child, and the run's broker; the spec
    unchanged and ``None`` when the run needs none. The child's end is not inheritable
    yet: the caller makes it so for the child's spawn only."""
    if not needs_broker(spec):
        return spec, None
    import _socket

    ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
    run = BrokerRun(ours.detach(), theirs.detach())  # the caller lends the child its end
    return replace(spec, broker_fd=run.theirs), run


def judges(spec: LaunchSpec) -> tuple[FileJudge, NetJudge]:
    """The judges of the socket files and addresses the sandbox reaches, from its rules:
    the exposures the file guard has (a socket must be writable), and ``net=``."""
    from pysandboxes._policy.judge import FileJudge, NetJudge
    from pysandboxes._policy.view import exposures

    seen = exposures(spec.policy, spec.implicit, [], [])
    return FileJudge(seen, spec.policy.ignore, spec.protected), NetJudge(spec.policy.net)


def broker_argument(run: BrokerRun, spec: LaunchSpec) -> str:
    """How the waiter gets the broker (``_host.waiter``): its channel and a sealed copy
    of the spec, whose rules it judges with (``CHANNEL:SPEC``)."""
    from pysandboxes._host.preparing import watch_descriptor
    from pysandboxes._wire.spec import encode

    sealed = watch_descriptor(encode(spec))
    os.set_inheritable(run.ours, True)
    return f"{run.ours}:{sealed}"


def serve_argument(argument: str, child: int) -> None:
    """Start the broker the waiter was given (see ``broker_argument``)."""
    from pysandboxes._wire.spec import decode

    channel, sealed = (int(part) for part in argument.split(":"))
    with os.fdopen(sealed, "rb") as source:
        spec = decode(source.read())
    BrokerRun(channel, -1).serve(spec, child)
