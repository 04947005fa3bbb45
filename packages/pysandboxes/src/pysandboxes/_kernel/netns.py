"""The namespaces the sandboxed interpreter makes for itself, before Landlock.

- **Network and IPC** (``landlock``, when no ``net=`` rule allows anything): Landlock
  filters TCP by port only: UDP datagrams, raw and packet sockets, ICMP and abstract UNIX
  sockets of the host pass it. An empty network namespace closes all of them at once: its
  loopback interface is left down, so every address is unreachable at once
  (``ENETUNREACH``, no waiting for a timeout). Nothing in the interpreter needs IP for its
  own work (``asyncio`` and ``multiprocessing`` use UNIX socket pairs and pipes). System V
  IPC of the host is reached by a key, not a path: an IPC namespace of its own hides it.
  Required: a run that cannot have them stops. The same namespace, its loopback down too,
  when the broker connects for the run (rules that reach out by name or wildcard only:
  ``_host.egressroutes``): the connections the rules allow are made on the trusted side
  and handed over; native code has no route at all.
- **Mounts** (``landlock``, ``unshare``): the rule files inside a read-write exposure are
  bound read-only onto themselves (see ``mounts``).

The mounts are wanted, not required: where the host refuses them, the run goes on and
the layer lists them as missing (the trusted side then compares the rule files at exit
and restores them, which ``--show-layers`` says); so is the pid namespace, made first of
all (``lifetime``), which the layer reports here. As root the namespaces are made
directly; otherwise with a user namespace mapping the user to itself, whose capabilities
are dropped once the mounts are made. Apply while the process is single-threaded.
"""

from __future__ import annotations

import errno
import os

from pysandboxes._kernel import lifetime, mounts, namespaces
from pysandboxes._policy.plan import IGNORED, NO_NETWORK, PROCESSES, RULE_FILES
from pysandboxes.errors import OSLayerUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._policy.plan import ConfinementPlan


def isolate(
    plan: ConfinementPlan, provider: str, brokered: bool = False
) -> tuple[list[str], list[tuple[str, str]]]:
    """Make the namespaces ``provider``'s interpreter makes for itself (see the module
    docstring); return the concerns they enforce, and those wanted but refused, with why.
    ``brokered``: the broker connects for the run (``_host.egressroutes``), so the
    empty network namespace is made even though rules allow connections.

    Raises:
        OSLayerUnavailable: the network namespace a run without network needs cannot be
            made.
    """
    required = namespaces.NEWNET | namespaces.NEWIPC
    required = required if provider == "landlock" and (brokered or not plan.network) else 0
    wanted = namespaces.NEWNS if plan.read_only or plan.pinned or plan.masked else 0
    enforced: list[str] = [NO_NETWORK] if required else []
    missing: list[tuple[str, str]] = []
    if provider == "landlock":  # the pid namespace, made first of all (see lifetime)
        if lifetime.refused:
            missing.append((PROCESSES, lifetime.refused[0]))
        else:
            enforced.append(PROCESSES)
    userns = False
    try:
        userns = namespaces.enter(required | wanted) if required | wanted else False
    except OSError as exc:
        if not wanted:
            raise _unavailable(exc, provider) from exc
        missing.append((RULE_FILES, exc.strerror or str(exc)))
        wanted = 0
        try:
            userns = namespaces.enter(required) if required else False
        except OSError as again:
            raise _unavailable(again, provider) from again
    if wanted:
        refused = _bind_read_only(plan.pinned, plan.read_only)
        if refused:
            missing.append((RULE_FILES, "; ".join(f"{p}: {e}" for p, e in refused)))
        elif plan.read_only or plan.pinned:
            enforced.append(RULE_FILES)
        if plan.masked:
            unmasked = mounts.mask(plan.masked)
            if unmasked or plan.masks_missing:
                why = [plan.masks_missing] if plan.masks_missing else []
                why += [f"{p}: {e}" for p, e in unmasked]
                missing.append((IGNORED, "; ".join(why)))
            else:
                enforced.append(IGNORED)
    elif plan.masked:
        missing.append((IGNORED, "no mount namespace here"))
    if userns:
        try:
            namespaces.drop_capabilities()
        except OSError as exc:
            raise OSLayerUnavailable(str(exc.strerror), provider=provider) from exc
    return enforced, missing


def _unavailable(exc: OSError, provider: str) -> OSLayerUnavailable:
    return OSLayerUnavailable(
        "cannot make a network namespace for a sandbox without network rules: "
        f"{exc.strerror or exc}",
        provider=provider,
    )


def _bind_read_only(pinned: tuple[str, ...], paths: tuple[str, ...]) -> list[tuple[str, str]]:
    try:
        mounts.keep_private()
    except OSError as exc:
        return [(path, exc.strerror or str(exc)) for path in (*pinned, *paths)]
    # The directories on the way first: a file bound before its directory was would be
    # hidden under the directory's new mount.
    return [*mounts.keep_in_place(pinned), *mounts.keep_read_only(paths)]


_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4


def drop_all_capabilities() -> None:
    """Give up every capability for good: ambient, bounding, then the three sets.

    Started as root, the sandbox would otherwise keep root's capabilities (renaming the
    host, setting the clock, loading BPF...), which Landlock does not mediate. With
    ``no_new_privs`` already set, nothing the sandbox executes can get them back.

    Raises:
        OSLayerUnavailable: the kernel refused to clear them.
    """
    from pysandboxes._kernel import libc

    libc.call("prctl", _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # none before 4.3
    for capability in range(64):
        if libc.call("prctl", _PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            code = libc.errno()
            if code in (errno.EINVAL, errno.EPERM):
                # Past the last capability this kernel knows, or no CAP_SETPCAP (bwrap
                # dropped it already): nothing can raise the sets back in either case.
                break
            raise OSLayerUnavailable(
                f"cannot drop capability {capability} from the bounding set: {os.strerror(code)}",
                provider="landlock",
            )
    try:
        namespaces.drop_capabilities()
    except OSError as exc:
        raise OSLayerUnavailable(str(exc.strerror), provider="landlock") from exc
