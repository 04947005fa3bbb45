"""The trusted side while the program runs: forward signals, wait, report, clean up.

``python-sb`` parses the rules with the host environment in its memory. Once the sandboxed
interpreter is spawned it needs none of it, so it replaces itself (``exec``) with this
small waiter, started with an empty environment: the secrets the rules did not forward
are then nowhere in the process chain, not in ``/proc/<parent>/environ`` nor in its
memory. The waiter keeps the child (same process), its blocked signals and its exit.
"""

from __future__ import annotations

import os
import signal
import sys

from pysandboxes._kernel.relay import WATCHED, wait


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
    """Entry point after ``exec``: ``argv`` is the child's pid, the temporary dir, how
    signals are relayed (see ``wait``), then the plan of a learning run when there is one
    (see ``_host.learning.conclude``)."""
    pid, tempdir = int(sys.argv[1]), sys.argv[2]
    relay = sys.argv[3] if len(sys.argv) > 3 else ""
    if len(sys.argv) < 5:
        status = wait(pid, relay)
        end_leftovers()  # what the program left running ends with it (see adopt_orphans)
        sys.exit(finish(status, tempdir))
    from pysandboxes._host.learning.conclude import Collector, conclude, show
    from pysandboxes._host.learning.plan import parse_plan

    plan = parse_plan(sys.argv[4])
    collector = Collector(plan.fd)  # events are read as they come: a SIGKILL loses none
    status = wait(pid, relay)
    end_leftovers()  # nothing the program started may edit the rules once written
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)  # writing the rules stays interruptible
    signal.pthread_sigmask(signal.SIG_UNBLOCK, WATCHED)
    summary = conclude(plan, collector.finish())
    if summary is not None:
        show(summary, plan.renderer)
    sys.exit(finish(status, tempdir))


#: prctl(PR_SET_CHILD_SUBREAPER): orphans of the program become this process's children.
_PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> None:
    """Make this process (python-sb, then the waiter it becomes) the reaper of every
    process the program leaves behind, however it detached them (setsid, double fork)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def end_leftovers() -> None:
    """Kill and reap what the program left running (see ``adopt_orphans``)."""
    for _ in range(100):
        pids: set[int] = set()
        try:
            for task in os.listdir("/proc/self/task"):
                with open(f"/proc/self/task/{task}/children") as handle:
                    pids.update(int(pid) for pid in handle.read().split())
        except OSError:
            return  # no /proc: nothing more can be found
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                continue
            except PermissionError:
                # A set-user-ID program the program left running cannot be signalled:
                # ending the waiter here would lose the rules learned.
                continue
