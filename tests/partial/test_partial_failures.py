"""A child that dies costs the application the calls in flight, never more: each fails
once with ``SandboxCrashed`` (how the child ended, its last lines on standard error),
nothing is sent twice, the next call gets a fresh child (``init_fn`` again) within a
restart budget, and nothing of a child outlives the application, even a killed one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from partiallab import App  # type: ignore[import-not-found]

RULES = "python-import=os, signal, time, threading, tempfile, sys\n"
TOOLS = """
    import os, signal, sys, tempfile, time
    from pysandboxes import sandbox

    # Which child: each imports this module afresh (pids repeat: each child is pid 2
    # of a pid namespace of its own).
    PROCESS = os.urandom(8).hex()

    started = []

    def init_child():
        started.append(os.getpid())

    @sandbox
    def where():
        return PROCESS, len(started)

    @sandbox
    def die(how):
        print("last words before", how, file=sys.stderr, flush=True)
        if how == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif how == "exit":
            os._exit(3)
        elif how == "segfault":
            import ctypes
            ctypes.string_at(0)
        time.sleep(60)

    @sandbox
    def count_then(action, counter, seconds=0.0):
        with open(counter, "a") as handle:
            handle.write(action + "\\n")
        time.sleep(seconds)
        if action == "die":
            os._exit(1)
        return action

    @sandbox
    def report(path, then):
        with open(path, "w") as handle:
            handle.write(f"{os.getpid()} {tempfile.gettempdir()}")
        if then == "c-loop":
            return sum(range(10**12))
        if then == "python-loop":
            while True:
                pass
        return None
"""


def _rules(app: App, extra: str = "") -> None:
    (app.project / ".py-sandboxes").write_text(RULES + extra)


CRASH_MAIN = """
    import tools
    from pysandboxes import sandboxes, SandboxCrashed
    with sandboxes(tools.init_child):
        first, _ = tools.where()
        try:
            tools.die({how!r})
        except SandboxCrashed as exc:
            print("crashed", exc.exitcode, exc.signal)
            print(str(exc).replace("\\n", "|"))
        second, inits = tools.where()
        print("fresh", first != second, inits)
"""


@pytest.mark.parametrize(
    ("how", "ended", "fields", "said"),
    [
        ("sigkill", "killed by signal SIGKILL", "None 9", "last words before sigkill"),
        ("exit", "ended with exit status 3", "3 None", "last words before exit"),
        # faulthandler's report; its first line may interleave with the tool's own words
        ("segfault", "killed by signal SIGSEGV", "None 11", "Fatal Python error"),
    ],
)
def test_a_dead_child_fails_its_call_with_how_it_ended_and_a_fresh_child_serves_on(
    app: App, how: str, ended: str, fields: str, said: str
) -> None:
    _rules(app, "python-import=ctypes\npython-api=ALLOW:native\n" if how == "segfault" else "")
    result = app.run(CRASH_MAIN.format(how=how), TOOLS)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"crashed {fields}"
    assert ended in lines[1]
    assert "last lines on standard error" in lines[1]
    assert said in lines[1]
    assert lines[2] == "fresh True 1"  # init_fn ran again in the new child


def test_a_crash_never_runs_a_call_twice(app: App, tmp_path: Path) -> None:
    counter = tmp_path / "marks" / "counter"
    counter.parent.mkdir()
    _rules(app, f"expose-rw={counter.parent}\n")
    result = app.run(
        f"""
        import threading, time, tools
        from pysandboxes import sandboxes, SandboxCrashed
        counter = {str(counter)!r}
        outcomes = []

        def call(action, seconds):
            try:
                outcomes.append(tools.count_then(action, counter, seconds))
            except SandboxCrashed:
                outcomes.append("crashed")

        with sandboxes(workers=4):
            threads = [threading.Thread(target=call, args=("sleep", 3)) for _ in range(3)]
            for thread in threads:
                thread.start()
            time.sleep(1.0)
            call("die", 0)
            for thread in threads:
                thread.join()
            print(sorted(outcomes))
            print(tools.count_then("after", counter))
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["['crashed', 'crashed', 'crashed', 'crashed']", "after"]
    # Every call was sent once: one line each, the crashed ones included, none repeated.
    assert sorted(counter.read_text().split()) == ["after", "die", "sleep", "sleep", "sleep"]


def test_a_child_that_keeps_crashing_is_not_restarted_past_the_budget(
    app: App, tmp_path: Path
) -> None:
    counter = tmp_path / "marks" / "counter"
    counter.parent.mkdir()
    _rules(app, f"expose-rw={counter.parent}\n")
    result = app.run(
        f"""
        import time, tools
        from pysandboxes import sandboxes, SandboxCrashed
        with sandboxes(max_restarts=2, restart_window=60):
            for attempt in range(4):
                start = time.monotonic()
                try:
                    tools.count_then("die", {str(counter)!r})
                except SandboxCrashed as exc:
                    print(attempt, "not started again" in str(exc))
            print("at once", time.monotonic() - start < 0.05)
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "0 False",
        "1 False",
        "2 False",
        "3 True",
        "at once True",  # no child is started for the call past the budget
    ]
    assert counter.read_text().split() == ["die", "die", "die"]


def test_leaving_waits_for_calls_in_flight_then_stops_them(app: App) -> None:
    _rules(app)
    result = app.run(
        """
        import threading, time, tools
        from pysandboxes import sandboxes, SandboxCrashed
        outcomes = {}

        def call(name, seconds):
            try:
                tools.count_then("sleep", "/dev/null", seconds)
                outcomes[name] = "finished"
            except SandboxCrashed as exc:
                outcomes[name] = str(exc)

        for grace, seconds in ((5, 1.0), (0.5, 30)):
            with sandboxes(graceful_shutdown=grace):
                thread = threading.Thread(target=call, args=(grace, seconds))
                thread.start()
                time.sleep(0.5)
                start = time.monotonic()
            print(grace, round(time.monotonic() - start) <= max(grace, 1) + 1)
            thread.join()
            print(outcomes[grace])
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["5 True", "finished"]
    assert lines[2] == "0.5 True"
    assert "sandboxes() was left while the call ran" in lines[3]
    assert "0.5 s grace period" in lines[3]


def test_nothing_of_a_closed_sandbox_survives(app: App, tmp_path: Path) -> None:
    _rules(app)
    private = tmp_path / "tmp"  # the machine's /tmp is shared with other runs
    private.mkdir()
    result = app.run(
        """
        import os, threading, time, tools
        from pysandboxes import sandboxes
        with sandboxes() as box:
            tools.where()
            pid = box._child.pid  # the child as the host sees it
            print("during", len(os.listdir(os.environ["TMPDIR"])))
        time.sleep(0.2)
        print("threads", sorted(t.name for t in threading.enumerate()))
        print("child", os.path.exists(f"/proc/{pid}"))
        print("children", open(f"/proc/self/task/{os.getpid()}/children").read().split())
        print("temporary", os.listdir(os.environ["TMPDIR"]))
        """,
        TOOLS,
        env={"TMPDIR": str(private)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "during 1",
        "threads ['MainThread']",
        "child False",
        "children []",
        "temporary []",
    ]


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = [int(c) for c in (task / "children").read_text().split()]
        for child in children:
            found += [child, *_descendants(child)]
    return found


@pytest.mark.parametrize("then", ["idle", "python-loop", "c-loop"])
def test_nothing_of_the_child_survives_a_killed_application(
    app: App, tmp_path: Path, then: str
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    report = marks / "report"
    _rules(app, f"expose-rw={marks}\n")
    (app.project / "tools.py").write_text(textwrap.dedent(TOOLS))
    (app.project / "main.py").write_text(
        textwrap.dedent(
            f"""
            import time, tools
            from pysandboxes import sandboxes
            with sandboxes():
                tools.report({str(report)!r}, {then!r})
                time.sleep(60)
            """
        )
    )
    private = tmp_path / "tmp"
    private.mkdir()
    app_process = subprocess.Popen(
        [sys.executable, "main.py"],
        cwd=app.project,
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LC_ALL": "C.UTF-8",
            "TMPDIR": str(private),
        },
    )
    try:
        deadline = time.monotonic() + 30
        while not (report.exists() and report.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        _, tempdir = report.read_text().split()
        below = _descendants(app_process.pid)  # the child's processes, as the host sees them
        assert below
        assert Path(tempdir).is_dir()
        app_process.send_signal(signal.SIGKILL)
        app_process.wait(timeout=10)
        deadline = time.monotonic() + 5
        alive = below
        while (alive or Path(tempdir).exists()) and time.monotonic() < deadline:
            time.sleep(0.05)
            alive = [pid for pid in below if Path(f"/proc/{pid}").exists()]
        assert not alive, f"the child outlived the application ({then})"
        assert not Path(tempdir).exists(), "its temporary directory outlived the application"
    finally:
        if app_process.poll() is None:
            app_process.kill()
            app_process.wait()


def test_a_sandbox_entered_by_a_thread_that_ended_still_serves(app: App) -> None:
    # PR_SET_PDEATHSIG would kill the child here: it fires when the *thread* that
    # started it ends. The lifeline is tied to the application, not to a thread.
    _rules(app)
    result = app.run(
        """
        import threading, tools
        from pysandboxes import sandboxes
        box = sandboxes()
        entering = threading.Thread(target=box.__enter__)
        entering.start()
        entering.join()
        first, _ = tools.where()
        print("served", tools.where()[0] == first)
        box.__exit__(None, None, None)
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["served True"]
