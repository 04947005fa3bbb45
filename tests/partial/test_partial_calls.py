"""Partial mode's contract: results, output, exceptions, concurrency, the child's life."""

from __future__ import annotations

import json
from pathlib import Path

from partiallab import App  # type: ignore[import-not-found]

RULES = "python-import=os\npython-import=time\npython-import=asyncio\n"

TOOLS = """
    import os
    import time
    from pysandboxes import sandbox, is_in_sandbox

    @sandbox
    def add(a: int, b: int = 1) -> int:
        "Add two numbers."
        print("adding", a, b)
        os.write(1, b"from the descriptor\\n")
        print("to stderr", file=__import__("sys").stderr)
        return a + b

    @sandbox
    def where() -> tuple:
        return os.getpid(), is_in_sandbox()

    @sandbox
    def echo(value):
        return value

    @sandbox
    def nap(seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    @sandbox
    async def anap(seconds: float, tag: int) -> int:
        import asyncio
        await asyncio.sleep(seconds)
        return tag

    class Broken(ValueError):
        def __init__(self, message, code):
            super().__init__(message, code)
            self.code = code

    def inner():
        raise Broken("bad input", 7)

    @sandbox
    def fail():
        try:
            inner()
        except ValueError as exc:
            raise KeyError("lookup") from exc

    @sandbox
    def fail_group():
        raise ExceptionGroup("two", [ValueError("one"), TypeError("two")])

    @sandbox
    def leave(status: int):
        with open(os.environ.get("MARK", "/nonexistent"), "a") as handle:
            handle.write("x")
        os._exit(status)

    def init_child():
        print("init ran")
        os.environ["INITIALISED"] = "yes"

    @sandbox
    def initialised():
        return os.environ.get("INITIALISED")
"""


def _rules(app: App, text: str = RULES) -> None:
    (app.project / ".py-sandboxes").write_text(text)


def test_a_call_returns_its_result_and_its_output_in_order(app: App) -> None:
    _rules(app)
    result = app.run(
        """
        import inspect, tools
        from pysandboxes import sandboxes
        with sandboxes():
            print("result", tools.add(2, b=3))
        print(inspect.signature(tools.add), tools.add.__doc__)
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "adding 2 3",
        "from the descriptor",
        "result 5",
        "(a: int, b: int = 1) -> int Add two numbers.",
    ]
    assert "to stderr" in result.stderr


def test_the_function_runs_in_another_process_that_knows_it_is_sandboxed(app: App) -> None:
    _rules(app)
    result = app.run(
        """
        import os, tools
        from pysandboxes import sandboxes, is_in_sandbox
        with sandboxes():
            pid, inside = tools.where()
        print(pid != os.getpid(), inside, is_in_sandbox())
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "False"]


def test_large_arguments_and_results_cross_whole(app: App) -> None:
    _rules(app)
    result = app.run(
        """
        import tools
        from pysandboxes import sandboxes
        blob = bytes(range(256)) * 4096 * 4  # 4 MiB
        with sandboxes():
            back = tools.echo(blob)
            values = tools.echo({"a": [1, 2.5, None, (3, 4)], "b": {1, 2}, "c": b"x"})
        print(back == blob, values == {"a": [1, 2.5, None, (3, 4)], "b": {1, 2}, "c": b"x"})
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]


def test_exceptions_keep_class_chain_attributes_and_remote_traceback(app: App) -> None:
    _rules(app)
    result = app.run(
        """
        import traceback, tools
        from pysandboxes import sandboxes, RemoteError
        with sandboxes():
            try:
                tools.fail()
            except KeyError as exc:
                cause = exc.__cause__
                print(type(cause).__name__, isinstance(cause, ValueError),
                      type(cause) is tools.Broken, cause.code, cause.args,
                      isinstance(cause, RemoteError))
                traceback.print_exc()
            try:
                tools.fail_group()
            except* ValueError as group:
                print("group", [str(e) for e in group.exceptions])
            except* TypeError:
                print("type error too")
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # The caller's own class (it imported tools itself), not a look-alike.
    assert lines[0] == "Broken True True 7 ('bad input', 7) False"
    assert lines[1:] == ["group ['one']", "type error too"]
    # The remote frames, with their source lines, after the caller's, under names
    # that no file of the caller's has.
    assert 'tools.py>", line' in result.stderr
    assert 'raise Broken("bad input", 7)' in result.stderr
    assert "The above exception was the direct cause" in result.stderr
    assert "main.py" in result.stderr


def test_calls_from_four_threads_overlap(app: App) -> None:
    _rules(app)
    result = app.run(
        """
        import time, tools
        from concurrent.futures import ThreadPoolExecutor
        from pysandboxes import sandboxes
        with sandboxes():
            tools.nap(0)
            start = time.perf_counter()
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(tools.nap, [0.5] * 4))
            print(round(time.perf_counter() - start, 2))
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert float(result.stdout) < 1.2  # serialised, they would take 2 s


def test_two_hundred_concurrent_async_calls_complete(app: App) -> None:
    _rules(app)
    result = app.run(
        """
        import asyncio, time, tools
        import pysandboxes

        async def main():
            start = time.perf_counter()
            tags = await asyncio.gather(*(tools.anap(0.2, i) for i in range(200)))
            return tags == list(range(200)), time.perf_counter() - start

        done, took = pysandboxes.run(main())
        print(done, took < 5)
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]


def test_a_sync_sandbox_works_inside_a_running_event_loop_and_across_steps(app: App) -> None:
    _rules(app)
    result = app.run(
        """
        import asyncio, tools
        from pysandboxes import sandboxes

        async def cell_one():
            return sandboxes().__enter__()  # a notebook cell: entered here ...

        async def cell_two():
            return tools.add(40, 2)  # ... called in another cell

        loop = asyncio.new_event_loop()
        box = loop.run_until_complete(cell_one())
        print(loop.run_until_complete(cell_two()))
        box.__exit__(None, None, None)  # ... and left in a third
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "42"


def test_init_fn_runs_in_the_child_before_the_first_call(app: App) -> None:
    _rules(app)
    result = app.run(
        """
        import os, tools
        from pysandboxes import sandboxes
        with sandboxes(init_fn=tools.init_child):
            print(tools.initialised(), os.environ.get("INITIALISED"))
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["init ran", "yes None"]


def test_a_failing_init_fn_fails_entering_at_once_with_its_traceback(app: App) -> None:
    _rules(app)
    tools = TOOLS + '\n    def bad_init():\n        raise RuntimeError("no database")\n'
    result = app.run(
        """
        import time, tools
        from pysandboxes import sandboxes
        start = time.perf_counter()
        try:
            with sandboxes(init_fn=tools.bad_init):
                print("entered")
        except RuntimeError as exc:
            print("raised", exc, time.perf_counter() - start < 10)
            import traceback; traceback.print_exc()
        """,
        tools,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["raised", "no", "database", "True"]
    assert "in bad_init" in result.stderr


def test_a_crashed_child_fails_the_call_once_and_a_fresh_child_serves_the_next(
    app: App, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    mark = marks / "mark"
    _rules(app, RULES + f"expose-rw={marks}\nenv=MARK=${{MARK}}\n")
    result = app.run(
        """
        import tools
        from pysandboxes import sandboxes, SandboxCrashed, SandBoxError
        with sandboxes():
            try:
                tools.leave(3)
            except SandboxCrashed as exc:
                print("crashed", isinstance(exc, SandBoxError), exc.__class__.__name__)
                print(exc)
            print(tools.add(1, 1))
        """,
        TOOLS,
        env={"MARK": str(mark)},
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "crashed True SandboxCrashed"
    assert "exit status 3" in lines[1]
    assert lines[-1] == "2"
    assert mark.read_text() == "x"  # at most once: the call was not sent again


def test_profiles_route_calls_to_sandboxes_with_their_own_rules(app: App) -> None:
    (app.project / "data.txt").write_text("shared data")
    result = app.run(
        """
        import tools
        from pysandboxes import sandboxes
        with sandboxes(python_import="os", expose_ro="data.txt"), \\
                sandboxes(python_import="os", profile="calculator"):
            print(tools.reader("data.txt"))
            try:
                tools.locked_reader("data.txt")
            except FileNotFoundError:
                print("calculator cannot read it")
        """,
        """
        from pysandboxes import sandbox

        @sandbox
        def reader(path):
            with open(path) as handle:
                return handle.read()

        @sandbox(profile="calculator")
        def locked_reader(path):
            with open(path) as handle:
                return handle.read()
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["shared data", "calculator cannot read it"]


def test_under_python_sb_a_sandbox_function_runs_inline(app: App, python_sb: str) -> None:
    _rules(app, RULES + "expose-ro=.\npython-import=json\npython-import=tools\n")
    result = app.run(
        """
        import json, os, tools
        from pysandboxes import sandboxes
        with sandboxes():
            pid, inside = tools.where()
        print(json.dumps([pid == os.getpid(), inside]))
        """,
        TOOLS,
        command=[python_sb],
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [True, True]


def test_run_returns_what_main_returns_and_takes_only_a_coroutine(app: App) -> None:
    _rules(app)
    result = app.run(
        """
        import tools, pysandboxes

        async def main():
            return await tools.anap(0, 7)

        print(pysandboxes.run(main()))
        try:
            pysandboxes.run(tools.add)
        except ValueError as exc:
            print("refused:", exc)
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "7"
    assert "takes a coroutine" in result.stdout
