"""Complete mode's permission prompts (``python-sb --prompt``, ``prompt=tty``): whether a
run asks, its request socket, and how the waiter serves it.

``python-sb`` decides at start (``start_prompts``): a run asks only when the rules say so,
the Python layer is on, it does not learn (a learning run refuses nothing), and a terminal
is there to ask on (``/dev/tty`` opens); without one it says so and refuses as without
the key. The child gets one end of a ``SOCK_SEQPACKET`` pair (``spec.ask_fd``); the
waiter, which has no environment, gets the other and a sealed copy of what the broker
needs (``argument``): the spec, the launcher's import path (the rule writer's
``tomlkit``), and the host's environment as far as rules are written with it: the home,
``PATH`` and the path variables, and the *names* of the others, never their values. So
no variable's value is asked about in complete mode (see docs/prompts.md).

The waiter then runs the ``Broker`` (``_host.prompts``) on a thread of its own, with the
``TtyDecider`` (``_host.deciders``), which holds the program while a question is on the
terminal (``waiter.hold_program``).

The same socket carries the connections the broker makes when the rules reach out by
name (``_host.egressroutes``): a run whose rules do (``egress_routed``) gets the socket
even without prompting (``spec.egress_fd``, and ``ask_fd`` stays ``-1``: nothing is
asked), and its broker answers every question of the child with a denial.
"""

from __future__ import annotations

import os
import sys

from pysandboxes._host.brokering import ChannelEnds
from pysandboxes._policy.model import ARG_SOURCE
from pysandboxes._record import replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from pysandboxes._host.auditlog import LogWriter
    from pysandboxes._host.prompts import Broker, Decider
    from pysandboxes._host.rulewatch import Followed
    from pysandboxes._policy.prompts import Decision, PermissionRequest
    from pysandboxes._wire.spec import LaunchSpec

#: The host's variables whose values the rules of a prompt's ``ALWAYS`` may be written
#: with (``${HOME}``, ``${VIRTUAL_ENV}``...): paths, never secrets.
_SHOWN = ("HOME", "PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "PYENV_ROOT")


class PromptRun(ChannelEnds):
    """The prompts of a run being started: the request socket's two ends."""

    def argument(self, spec: LaunchSpec, env: Mapping[str, str]) -> str:
        """How the waiter gets the prompts (``OURS:SEALED``): the socket, and a sealed
        copy of the spec, the launcher's import path and the host's view (module docs)."""
        import marshal

        from pysandboxes._host.egressroutes import settings
        from pysandboxes._host.preparing import watch_descriptor
        from pysandboxes._wire.spec import encode

        view = dict.fromkeys(env, "")
        view.update({name: env[name] for name in _SHOWN if name in env})
        path = [entry for entry in sys.path if entry]
        tests = settings(env) if spec.egress_fd >= 0 else ("", "")
        sealed = watch_descriptor(marshal.dumps((encode(spec), view, path, tests)))
        os.set_inheritable(self.ours, True)
        return f"{self.ours}:{sealed}"


def terminal_reason(terminal: str = "/dev/tty") -> str:
    """Why nobody can be asked at a terminal here (``""``: someone can)."""
    try:
        fd = os.open(terminal, os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        return f"{terminal} cannot be opened: {exc.strerror or exc}"
    try:
        if not os.isatty(fd):
            return f"{terminal} is not a terminal"
    finally:
        os.close(fd)
    return ""


def start_prompts(spec: LaunchSpec) -> tuple[LaunchSpec, PromptRun | None]:
    """``spec`` with the request socket for the child, and the run's prompts; the spec
    unchanged and ``None`` when the run asks nothing (said on stderr when the rules
    asked for prompts). The child's end is not inheritable yet."""
    asks = _asks(spec)
    routes = egress_routed(spec)
    if not asks and not routes:
        return spec, None
    import _socket

    ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    run = PromptRun(ours.detach(), theirs.detach())
    ask_fd, egress_fd = (run.theirs if asks else -1), (run.theirs if routes else -1)
    return replace(spec, ask_fd=ask_fd, egress_fd=egress_fd), run


def egress_routed(spec: LaunchSpec) -> bool:
    """Whether the broker connects for this run (``_host.egressroutes``): complete mode
    under ``landlock`` with the Python layer, not learning, rules that reach out by name
    or wildcard only (``netjudge.brokered``)."""
    policy = spec.policy
    if spec.provider != "landlock" or spec.learning is not None or spec.serve is not None:
        return False
    if not policy.python_layer or not policy.net:
        return False
    from pysandboxes._policy.netjudge import brokered

    return brokered(policy.net)


def _asks(spec: LaunchSpec) -> bool:
    """Whether the run asks at the terminal (said on stderr when it cannot)."""
    policy = spec.policy
    if not policy.prompting or spec.learning is not None:
        return False  # a learning run refuses nothing: it asks nothing
    why = terminal_reason() if policy.python_layer else "py-sandbox=false: nothing is refused"
    if why:
        origin = policy.prompt.origin if policy.prompt is not None else None
        line = "--prompt"
        if origin is not None and origin.source != ARG_SOURCE:
            line = f"'{origin.text}' ({origin.where})"
        print(
            f"python-sb: {line}: nobody can be asked ({why}); "
            "refusals are not asked about in this run",
            file=sys.stderr,
        )
        return False
    return True


def serve_argument(argument: str, log: LogWriter | None, watch: Followed | None) -> Broker:
    """Start, in the waiter, the broker ``PromptRun.argument`` describes."""
    import marshal
    import socket

    from pysandboxes._host.deciders import TtyDecider
    from pysandboxes._host.descendants import hold_program, resume_program
    from pysandboxes._host.prompts import Broker
    from pysandboxes._wire.spec import decode

    channel, sealed = (int(part) for part in argument.split(":"))
    with os.fdopen(sealed, "rb") as source:
        encoded, view, path, tests = marshal.loads(source.read())
    spec = decode(encoded)
    sys.path[:0] = [entry for entry in path if entry not in sys.path]  # the writer's tomlkit
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=channel)
    sock.set_inheritable(False)
    decider: Decider = TtyDecider(hold_program, resume_program, spec.rule_file)
    if spec.ask_fd < 0:
        decider = _Nobody()  # the socket routes only: a question is the child's forgery
    routes = None
    if spec.egress_fd >= 0:
        from pysandboxes._host.egressroutes import Routes

        routes = Routes(spec.policy.net, tests, log)
    broker = Broker(sock, spec, decider, _complete, log, host=view, watch=watch, routes=routes)
    broker.start()
    return broker


class _Nobody:
    """Answers every question with a denial: a run that does not prompt asks nobody."""

    def decide(self, request: PermissionRequest, call: int) -> Decision:
        from pysandboxes._policy.prompts import Decision

        return Decision.DENY


def _complete(call: int) -> bool:
    """Complete mode has no calls: every request is the program's own (call 0)."""
    return call == 0
