"""The trusted side while the program runs: forward signals, wait, report, clean up.

``python-sb`` parses the rules with the host environment in its memory. Once the sandboxed
interpreter is spawned it needs none of it, so it replaces itself (``exec``) with this
small waiter, started with an empty environment: the secrets the rules did not forward
are then nowhere in the process chain, not in ``/proc/<parent>/environ`` nor in its
memory. The waiter keeps the child (same process), its blocked signals and its exit.
"""

from __future__ import annotations

import os
import sys

from pysandboxes._host.descendants import children, stop_descendants
from pysandboxes._kernel.relay import WATCHED, wait

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
else:
    # The C module: signal's enums import enum, functools and collections, milliseconds
    # of every start of the waiter. The numbers and functions are the same.
    import _signal as signal

#: How the waiter relays signals, per provider (see ``_kernel.relay.wait``).
RELAY = {"bwrap": "session", "unshare": "init"}
_PR_SET_DUMPABLE = 4


def remove_tree(path: str) -> None:
    """Remove the sandbox's temporary directory, whatever the program left in it."""
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return
    except OSError:
        import shutil

        shutil.rmtree(path, ignore_errors=True)


def finish(status: int, tempdir: str) -> int:
    """Clean up, then end as the program ended: its exit status, or its signal."""
    if tempdir:
        remove_tree(tempdir)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number != signal.SIGKILL:  # SIGKILL has no handler to reset (EINVAL)
            signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {number})
        os.kill(os.getpid(), number)
    return os.waitstatus_to_exitcode(status)


def main() -> None:
    """Entry point after ``exec``: ``argv`` is the child's pid, the temporary dir, the
    provider (how signals are relayed: ``RELAY``), the descriptor of the rules' snapshot
    (``-``: none, see ``_host.rulewatch``), the decision log (``-``: none, see
    ``_host.auditlog``), the socket broker (``-``: none, see ``_host.unixbroker``), the
    hand-over of the sandbox's pid 1 (``-``: none, see ``_kernel.handoff``), the permission
    prompts (``-``: none, see ``_host.promptrun``), then the plan of a learning run when
    there is one (see ``_host.learning.conclude``)."""
    pid, tempdir, provider, watch = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    audit, writer = None, None
    if sys.argv[5] != "-":  # the decision log (see _host.auditlog): read as it comes
        from pysandboxes._host.auditlog import parse_argument

        audit = parse_argument(sys.argv[5])
        writer = audit.writer("complete")
    relay = RELAY.get(provider, "")
    if provider == "subprocess":
        # No Landlock keeps the program from this process's memory, which is the
        # trusted side's: nothing of the same user may read or write it.
        from pysandboxes._kernel import libc

        libc.call("prctl", _PR_SET_DUMPABLE, 0, 0, 0, 0)
    snapshot = _read_all(int(watch)) if watch != "-" else b""
    adopting = sys.argv[7]
    if sys.argv[6] != "-":  # AF_UNIX addresses, judged here (see _host.unixbroker)
        from pysandboxes._host.brokering import serve_argument

        # With a hand-over, the process spawned leaves: the sandbox is below this one.
        serve_argument(sys.argv[6], pid if adopting == "-" else os.getpid())
    if sys.argv[8] != "-":  # questions on the terminal (see _host.promptrun)
        from pysandboxes._host.promptrun import serve_argument as serve_prompts
        from pysandboxes._host.rulewatch import Followed

        followed = Followed(snapshot)  # a rule written at a prompt is the reviewed one
        serve_prompts(sys.argv[8], writer, followed)
        status = _wait(pid, relay, adopting)
        conclude_run(followed.data)
        if audit is not None and writer is not None:
            audit.conclude(writer)
        _end(finish(status, tempdir))
    if len(sys.argv) < 10:
        status = _wait(pid, relay, adopting)
        conclude_run(snapshot)
        if audit is not None and writer is not None:
            audit.conclude(writer)
        _end(finish(status, tempdir))
    from pysandboxes._host.learning.conclude import Collector, conclude, show
    from pysandboxes._host.learning.plan import parse_plan

    plan = parse_plan(sys.argv[9])
    collector = Collector(plan.fd)  # events are read as they come: a SIGKILL loses none
    status = _wait(pid, relay, adopting)
    refusal = conclude_run(snapshot)
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)  # writing the rules stays interruptible
    signal.pthread_sigmask(signal.SIG_UNBLOCK, WATCHED)
    summary = conclude(plan, collector.finish(), refusal=refusal)
    if summary is not None:
        show(summary, plan.renderer)
    _end(finish(status, tempdir))


def _wait(pid: int, relay: str, adopting: str) -> int:
    """The program's wait status, adopting the sandbox's pid 1 when handed over."""
    if adopting == "-":
        return wait(pid, relay)
    from pysandboxes._kernel.handoff import parse, wait_adopting

    return wait_adopting(pid, relay, parse(adopting))


def _end(code: int) -> None:
    """Exit with ``code`` at once. Every file the waiter wrote is closed by now and
    ``finish`` flushed its streams: the interpreter's teardown of the waiter's modules
    would only add milliseconds to the end of every run."""
    os._exit(code)


def conclude_run(snapshot: bytes) -> str:
    """Once the program ended: end what it left running, then set back the rules of the
    next run (see ``_host.rulewatch``), saying what was done on stderr. Returns why a
    learning run may write nothing (``""``: it may)."""
    left = end_leftovers()
    say_leftovers(left)
    changed: list[str] = []
    if snapshot:
        from pysandboxes._host.rulewatch import check

        try:
            changed = check(snapshot)
        except Exception as exc:  # a bug here must not cost the program's exit status
            changed = [f"the rule files could not be checked ({exc!r}): review them"]
    for message in changed:
        print(f"python-sb: {message}", file=sys.stderr)
    if left:
        return leftover_refusal(left)
    if changed:
        return "the program changed the rules of the next run (above): nothing is written"
    return ""


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def leftover_refusal(left: list[int]) -> str:
    """Why nothing may be written, when processes of the program are left; else ``""``."""
    if not left:
        return ""
    return (
        f"{_described(left)} could not be ended: one could rewrite the rules once written, "
        "so nothing is written"
    )


def say_leftovers(left: list[int]) -> None:
    """Warn that processes of the program outlive it."""
    if left:
        print(f"python-sb: {_described(left)} could not be ended and still run", file=sys.stderr)


def _described(left: list[int]) -> str:
    if left == [-1]:
        return "processes the program started (their pids cannot be listed)"
    shown = ", ".join(map(str, left[:10])) + (", ..." if len(left) > 10 else "")
    return f"{len(left)} process(es) the program started (pid {shown})"


#: prctl(PR_SET_CHILD_SUBREAPER): orphans of the program become this process's children.
_PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> None:
    """Make this process (python-sb, then the waiter it becomes) the reaper of every
    process the program leaves behind, however it detached them (setsid, double fork)."""
    from pysandboxes._kernel import libc

    libc.call("prctl", _PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def end_leftovers(patience: float = 10.0) -> list[int]:
    """End every process the program left running (see ``adopt_orphans``); return the
    pids of those still there after ``patience`` seconds: empty when none is left.

    Each round stops the whole tree first (``SIGSTOP``, sent to a process before its
    children are read: a stopped process forks no more, and a child its fork had under
    way is found next round), then kills it: a chain of any depth is ended in one round,
    a fast one in a few. Under a pid namespace (``_kernel.lifetime``) the kernel has ended
    them already, and this finds nothing. The proof that nothing is left is the
    kernel's too: this process has no child, living or dead, and every orphan of the
    program would be its child. ``-1`` stands for children it cannot list (no ``/proc``).
    """
    import time

    deadline = time.monotonic() + patience
    while True:
        found = stop_descendants()
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue  # ended meanwhile; or set-user-ID, unkillable: reported below
        left = _reap()
        if left is None:
            return []
        if time.monotonic() > deadline:
            return sorted(set(found) | left) or [-1]
        time.sleep(0.005)  # killed, not yet reaped: let them die


def _reap() -> set[int] | None:
    """Reap the children that ended; the pids of those still there, ``None`` when this
    process has no child left at all."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return None
        if pid == 0:
            return set(children(os.getpid()))
