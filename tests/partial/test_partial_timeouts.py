"""A call past its timeout raises ``SandboxTimeout`` (a ``TimeoutError`` and a
``SandBoxError``) and really stops: a call that cannot be interrupted (a Python loop, a
loop in C, a blocked read) ends with its process, replaced for the next call; an async
call is cancelled where it awaits. Cancelling the task that awaits a call cancels it
in the child.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from partiallab import App  # type: ignore[import-not-found]

RULES = "python-import=os, time, asyncio\n"
TOOLS = """
    import asyncio, os, time
    from pysandboxes import sandbox

    PROCESS = os.urandom(8).hex()  # which child (each is pid 2 of a namespace of its own)

    @sandbox(timeout=1)
    def stuck(how, progress=None):
        if progress:
            with open(progress, "w") as handle:
                handle.write(PROCESS)
        if how == "python-loop":
            while True:
                pass
        if how == "c-loop":
            return sum(range(10**12))
        if how == "blocked-read":
            read_end, _ = os.pipe()
            return os.read(read_end, 1)
        if how == "writing":
            while True:
                with open(progress + ".grows", "a") as handle:
                    handle.write("x")
                time.sleep(0.02)

    @sandbox
    def nap(seconds):
        time.sleep(seconds)
        return seconds

    @sandbox
    def pid():
        return PROCESS

    @sandbox(timeout=300)
    def ready():
        return True  # the child started and serving: the timeouts after it are the calls'

    @sandbox(timeout=0.5)
    async def slow_async(seconds, mark):
        await asyncio.sleep(seconds)
        with open(mark, "w") as handle:
            handle.write("finished")

    @sandbox
    async def sleepy(seconds, mark):
        await asyncio.sleep(seconds)
        with open(mark, "w") as handle:
            handle.write("finished")
"""


def _rules(app: App, marks: Path, extra: str = "") -> None:
    (app.project / ".py-sandboxes").write_text(RULES + f"expose-rw={marks}\n" + extra)


@pytest.mark.parametrize("how", ["python-loop", "c-loop", "blocked-read"])
def test_a_call_past_its_timeout_is_stopped_with_its_process(
    app: App, tmp_path: Path, how: str
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    progress = marks / "pid"
    _rules(app, marks)
    result = app.run(
        f"""
        import os, time, tools
        from pysandboxes import sandboxes, SandBoxError, SandboxTimeout
        with sandboxes() as box:
            outside = box._child.pid  # the child as the host sees it
            tools.ready()
            start = time.monotonic()
            try:
                tools.stuck({how!r}, {str(progress)!r})
            except TimeoutError as exc:
                took = time.monotonic() - start
                print(type(exc).__name__, isinstance(exc, SandBoxError), round(took))
                print(exc)
            stuck = open({str(progress)!r}).read()
            print("next", tools.pid() != stuck)
            deadline = time.monotonic() + 5
            while os.path.exists(f"/proc/{{outside}}") and time.monotonic() < deadline:
                time.sleep(0.05)
            print("stopped", not os.path.exists(f"/proc/{{outside}}"))
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "SandboxTimeout True 1"
    assert "tools.stuck did not finish within 1 s (@sandbox(timeout=1))" in lines[1]
    assert lines[2:] == ["next True", "stopped True"]


def test_a_timed_out_call_does_nothing_more(app: App, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    progress = marks / "pid"
    grows = marks / "pid.grows"
    _rules(app, marks)
    result = app.run(
        f"""
        import tools
        from pysandboxes import sandboxes, SandboxTimeout
        with sandboxes():
            tools.ready()
            try:
                tools.stuck("writing", {str(progress)!r})
            except SandboxTimeout:
                print("timed out")
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    size = grows.stat().st_size
    time.sleep(1.0)
    assert grows.stat().st_size == size  # the loop that wrote it ended with the call


def test_the_rules_give_the_default_timeout(app: App, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    _rules(app, marks, "sandbox-timeout=500ms\n")
    result = app.run(
        """
        import tools
        from pysandboxes import sandboxes, SandboxTimeout
        with sandboxes():
            tools.ready()
            print(tools.nap(0.1))
            try:
                tools.nap(5)
            except SandboxTimeout as exc:
                print(exc.timeout, exc)
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "0.1"
    assert lines[1].startswith("0.5 tools.nap did not finish within 0.5 s")
    assert "'sandbox-timeout=500ms' from .py-sandboxes(3)" in lines[1]


def test_an_async_call_past_its_timeout_is_cancelled_in_the_child(app: App, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    mark = marks / "finished"
    _rules(app, marks)
    result = app.run(
        f"""
        import asyncio, pysandboxes, tools
        from pysandboxes import SandboxTimeout

        async def main():
            first = await asyncio.to_thread(tools.pid)
            try:
                await tools.slow_async(2, {str(mark)!r})
            except SandboxTimeout as exc:
                print("timed out", exc.timeout)
            await asyncio.sleep(2.5)
            print("same child", await asyncio.to_thread(tools.pid) == first)

        pysandboxes.run(main())
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["timed out 0.5", "same child True"]
    assert not mark.exists()  # cancelled where it awaited: it never finished


def test_cancelling_the_awaiting_task_cancels_the_call_in_the_child(
    app: App, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    mark = marks / "finished"
    _rules(app, marks)
    result = app.run(
        f"""
        import asyncio, pysandboxes, tools

        async def main():
            task = asyncio.create_task(tools.sleepy(2, {str(mark)!r}))
            await asyncio.sleep(0.5)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                print("cancelled")
            await asyncio.sleep(2.5)
            await tools.sleepy(0, {str(mark)!r} + ".after")
            print("served on")

        pysandboxes.run(main())
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["cancelled", "served on"]
    assert not mark.exists()
    assert (marks / "finished.after").exists()


def test_a_timeout_must_be_a_positive_number_of_seconds(app: App) -> None:
    result = app.run(
        """
        from pysandboxes import sandbox
        try:
            sandbox(timeout=0)
        except ValueError as exc:
            print(exc)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "positive number of seconds" in result.stdout
