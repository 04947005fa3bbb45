"""bubblewrap: the sandbox in a mount view of its own, built by ``bwrap`` from a plan.

The trusted side turns a ``ConfinementPlan`` into bwrap's command line; bwrap then makes
the namespaces and a root on a fresh tmpfs where only the planned paths exist, bound at
their own paths (read-only, or read-write for written paths and the private temporary
directory). Everything else is not refused but absent: the sandbox cannot name it.

Choices, each against a leak the reference implementation had:

- ``--unshare-all``: user, mount, pid, ipc, uts, cgroup and network namespaces. The
  network is shared back (``--share-net``) only when the plan allows some network; then
  hosts stay the Python layer's, and ports Landlock's. Without network the namespace has
  only loopback, so a connect fails at once instead of hanging.
- ``--proc /proc`` in the new pid namespace: ``/proc`` lists the sandbox's processes only,
  and pid 1 is bwrap's own init, whose environment is the sandbox's (bwrap is started
  with exactly the child's environment, never the host's).
- The environment is handed down, never put in ``--setenv``: a command line is readable
  by every user of the host, an environment only by its owner.
- ``/dev`` holds only the planned device nodes, bound one by one. bwrap's own ``--dev``
  would add ``/dev/tty`` (the controlling terminal) and a pseudo-terminal instance.
  Device nodes must be bound with ``--dev-bind`` (a read-only bind sets ``nodev``), so
  the read-only ones are kept read-only by Landlock, not by the mount.
- ``--new-session``: no controlling terminal, so ``TIOCSTI`` cannot push keystrokes into
  the user's shell. The interactive session keeps its terminal as standard input and
  output; the trusted side relays ^C to it (the terminal no longer can).
- ``--die-with-parent``, and ``--cap-drop ALL`` so that a run started by root keeps no
  capability inside its namespaces.
- A read-write file is not bound itself (it may not exist yet, and a mount point cannot be
  renamed, as a rotated log is): its directory is, read-write, and Landlock inside grants
  there only what making that file needs (regular files).
- The rule files inside a read-write exposure are bound again, read-only, over it: the
  sandbox can neither write, remove nor replace them (a mount point cannot be renamed).
- The options go to bwrap through a descriptor (``--args``), never its command line:
  bwrap's init, pid 1 of the sandbox, shows the program that command line in
  ``/proc/1/cmdline``, and every bound host path would be listed there (and in ``ps`` to
  every user of the host).
"""

from __future__ import annotations

import os
import shutil

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from pysandboxes._policy.plan import ConfinementPlan

#: Device links every program expects; they point into the process's own ``/proc``.
_DEV_LINKS = (
    ("/proc/self/fd", "/dev/fd"),
    ("/proc/self/fd/0", "/dev/stdin"),
    ("/proc/self/fd/1", "/dev/stdout"),
    ("/proc/self/fd/2", "/dev/stderr"),
)
_TRUE = ("1", "true", "yes", "on")


def unavailable_reason() -> str | None:
    """Why bwrap cannot run here, or ``None``."""
    if shutil.which("bwrap") is None:
        return "the bwrap program is not installed"
    return None


def command(
    plan: ConfinementPlan,
    cwd: str,
    argv: list[str],
    options: Mapping[str, str] | None = None,
) -> tuple[str, list[str], int]:
    """The executable and argv that run ``argv`` under bwrap with this plan, and the
    descriptor holding bwrap's options (``--args``), to close once bwrap is started.

    Args:
        plan: what the sandbox keeps; its read and write paths make the mount view.
        cwd: the program's working directory (made empty when nothing exposes it).
        argv: the command to run inside, its executable an absolute path in the view.
        options: ``bwrap.<option>=`` values: ``hostname``, ``share-net`` (keep the host
            network even without a ``net=`` rule) and ``unshare-net`` (no network even
            with one).
    """
    options = options or {}
    executable = shutil.which("bwrap") or "bwrap"
    isolate = not plan.network
    if options.get("share-net", "").lower() in _TRUE:
        isolate = False
    if options.get("unshare-net", "").lower() in _TRUE:
        isolate = True
    args = [executable, "--unshare-all"]
    if not isolate:
        args.append("--share-net")
    args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    args += ["--hostname", options.get("hostname") or "sandbox"]
    args += ["--proc", "/proc", "--dir", "/dev"]
    for device in plan.devices:
        if os.path.exists(device):
            args += ["--dev-bind", device, device]
    for target, link in _DEV_LINKS:
        args += ["--symlink", target, link]
    binds, links = mount_view(plan)
    for path, writable in binds.items():
        args += ["--bind" if writable else "--ro-bind", path, path]
    for link, target in links.items():
        args += ["--symlink", target, link]
    for path in plan.masked:  # what ignore= hides: covered, after the binds holding it
        if os.path.isdir(path) and not os.path.islink(path):
            args += ["--perms", "0555", "--tmpfs", path, "--remount-ro", path]
        elif os.path.isfile(path) and not os.path.islink(path):
            args += ["--ro-bind", "/dev/null", path]
    if not _covered(cwd, binds):
        args += ["--dir", cwd]  # the cwd exists, empty: its files need a rule
    args += ["--chdir", cwd]
    fd = _options_descriptor(args[1:])
    return executable, [executable, "--args", str(fd), "--", *argv], fd


def _options_descriptor(options: list[str]) -> int:
    """An inheritable descriptor holding ``options``, NUL-separated, for ``--args``; bwrap
    reads and closes it. The caller closes its own copy once bwrap is started."""
    fd = os.memfd_create("bwrap-options", 0)  # not close-on-exec: bwrap inherits it
    os.write(fd, b"".join(os.fsencode(option) + b"\0" for option in options))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def mount_view(plan: ConfinementPlan) -> tuple[dict[str, bool], dict[str, str]]:
    """The binds (real path: writable, parents first) and symlinks that show the plan.

    A planned path reached through symlinks (``/lib`` on a merged-``/usr`` system,
    ``/etc/localtime``) is bound at its real path, and each symlink on the way is made
    again, so the path works as the program writes it.
    """
    wanted: dict[str, bool] = {}
    links: dict[str, str] = {}
    for path, writable in _planned(plan):
        if not os.path.exists(path):
            continue  # the plan says: skipped
        _links_on_the_way(path, links)
        real = os.path.realpath(path)
        wanted[real] = wanted.get(real, False) or writable
    for path in (*plan.create, *[p for p in plan.create_dirs if not os.path.lexists(p)]):
        # A missing file cannot be bound, and a bound one cannot be renamed (a rotated
        # log): its directory is bound, read-write, so that the file made there is the
        # host's; Landlock inside keeps that directory to regular files, the Python layer
        # to the name.
        parent = os.path.realpath(os.path.dirname(path))
        _links_on_the_way(parent, links)
        wanted[parent] = True
    for path in plan.read_only:  # the rule files, whatever directory holds them
        if os.path.isfile(path):
            wanted[path] = False
    pinned = {path for path in plan.pinned if os.path.isdir(path)}
    for path in pinned:  # the directories on the way to them: mount points, not renamed
        wanted[path] = True
    binds: dict[str, bool] = {}
    for path in sorted(wanted):
        parent = _covering(path, binds)
        if parent is not None and binds[parent] == wanted[path] and path not in pinned:
            continue  # the same host tree, bound the same way already
        binds[path] = wanted[path]
    kept = {link: t for link, t in links.items() if not _covered(link, binds)}
    return binds, kept


def _planned(plan: ConfinementPlan) -> Iterable[tuple[str, bool]]:
    devices = set(plan.devices)
    for path in plan.read:
        if path not in devices:
            yield path, False
    for path in plan.write:
        if path not in devices:
            yield path, True
    if plan.tempdir is not None:
        yield plan.tempdir, True


def _links_on_the_way(path: str, links: dict[str, str], depth: int = 0) -> None:
    """Record each symlink met while resolving ``path``, chains of links included."""
    if depth > 40:  # the kernel's own limit: a loop, which realpath leaves unresolved
        return
    current = "/"
    for part in path.strip("/").split("/"):
        step = os.path.join(current, part)
        if os.path.islink(step):
            links[step] = os.readlink(step)
            target = os.path.join(os.path.dirname(step), links[step])
            _links_on_the_way(os.path.normpath(target), links, depth + 1)
            current = os.path.realpath(step)
        else:
            current = step


def _covering(path: str, binds: Mapping[str, bool]) -> str | None:
    """The bound path ``path`` lies in (itself or an ancestor), if any."""
    probe: str = path
    while True:
        if probe in binds:
            return probe
        parent: str = os.path.dirname(probe)
        if parent == probe:
            return None
        probe = parent


def _covered(path: str, binds: Mapping[str, bool]) -> bool:
    return _covering(path, binds) is not None
