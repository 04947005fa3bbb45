"""The kernel layer, applied by the sandboxed interpreter on itself, before the guards.

Under ``landlock`` the interpreter restricts itself; under ``bwrap`` and ``unshare`` the
namespaces are made already by the provider's program (from the trusted side's plan),
and the interpreter drops the capabilities they grant and applies Landlock inside too.
"""

from __future__ import annotations

import sys

from pysandboxes._policy.view import plan_for
from pysandboxes.errors import OSLayerUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._policy.plan import AppliedLayer
    from pysandboxes._wire.spec import LaunchSpec


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
        from pysandboxes._kernel.keyring import leave_session_keyring

        leave_session_keyring(spec.provider)  # the launching session's keys stay outside
        also = ("/proc",) if namespaced else ()
        plan = plan_for(spec.policy, spec.implicit, spec.tempdir, roots, program, also)
        from pysandboxes._kernel.netns import drop_all_capabilities, isolate

        # Network and IPC, read-only rule files: what Landlock cannot do (with the
        # capabilities an unshare namespace gives, dropped next).
        enforced, missing = isolate(plan, spec.provider, spec.egress_fd >= 0)
        if spec.provider == "unshare":
            from pysandboxes._kernel.unshare import drop_capabilities

            try:
                drop_capabilities()
            except OSError as exc:
                raise OSLayerUnavailable(str(exc.strerror), provider="unshare") from exc
        reason = landlock.unavailable_reason()
        if reason is not None:
            layer = AppliedLayer("none", missing=(("landlock", reason),))
        else:
            layer = landlock.apply(plan)
        layer = layer.plus(enforced, missing)
        # As root the process would keep root's capabilities, which Landlock does not
        # mediate (host name, clock, BPF...): give them all up, under every provider.
        drop_all_capabilities()
        # What Landlock does not mediate (the inherited terminal, the keyrings...).
        from pysandboxes._kernel.seccomp import add_to

        layer = add_to(layer, plan)
        if spec.broker_fd >= 0:
            # AF_UNIX addresses, which Landlock cannot judge: the trusted side's broker.
            from pysandboxes._kernel.unixbroker import hand_over

            hand_over(spec.broker_fd)
            layer = layer.brokered()
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
    if TYPE_CHECKING:
        import signal
    else:  # the C module: signal's enums would load enum at every start
        import _signal as signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
