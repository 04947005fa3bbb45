"""Who reads a call's reply: the caller itself when it waits alone, another waiting
caller or the background thread otherwise (``_host/leading.py``). Whoever reads, a reply
and its output reach the call they belong to, once; a caller is never held past its
timeout by a child that stops in the middle of a frame; a reader interrupted while it
reads never guesses at what it was reading: the child is replaced, nothing runs twice.
"""

from __future__ import annotations

from pathlib import Path

from partiallab import App  # type: ignore[import-not-found]

RULES = "python-import=os, stat, socket, time, asyncio, threading\n"
TOOLS = """
    import asyncio, os, socket, stat, threading, time
    from pysandboxes import sandbox

    PROCESS = os.urandom(8).hex()

    @sandbox
    def echo(tag):
        print(f"out {tag}")
        return tag

    @sandbox
    async def aecho(tag):
        await asyncio.sleep(0)
        print(f"aout {tag}")
        return tag

    @sandbox
    def pid():
        return PROCESS

    @sandbox
    def nap_marked(seconds, mark):
        with open(mark, "a") as handle:
            handle.write("ran\\n")
        time.sleep(seconds)
        return PROCESS

    def _connection():
        for fd in range(3, 256):  # the one stream socket: the call connection
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    return fd
            except OSError:
                pass
        raise LookupError("no connection")

    @sandbox(timeout=1)
    def half_a_frame():
        os.write(_connection(), b"\\x05\\x00\\x00")  # 3 of a header's 13 bytes, no more
        time.sleep(60)
"""


def _rules(app: App, extra: str = "") -> None:
    (app.project / ".py-sandboxes").write_text(RULES + extra)


def test_cant_misattribute_a_reply_or_its_output_read_by_another_caller(app: App) -> None:
    # Four threads and a loop of async calls wait at once: each reply and each line of
    # output is read by whoever leads, and must reach its own caller.
    _rules(app)
    result = app.run(
        """
        import asyncio, io, sys, threading, tools
        from pysandboxes import sandboxes

        class PerThread(io.TextIOBase):  # each thread's replayed output, apart
            def __init__(self):
                self.seen = {}
            def write(self, text):
                self.seen.setdefault(threading.get_ident(), []).append(text)
                return len(text)

        out = PerThread()
        wrong = []
        with sandboxes():
            tools.echo(-1)
            sys.stdout = out

            def calls(base):
                for i in range(base, base + 300):
                    if tools.echo(i) != i:
                        wrong.append(i)

            async def gathered():
                for round in range(10):
                    tags = [10_000 + round * 30 + i for i in range(30)]
                    got = await asyncio.gather(*(tools.aecho(t) for t in tags))
                    if got != tags:
                        wrong.append(round)

            threads = [threading.Thread(target=calls, args=(n * 1000,)) for n in range(4)]
            threads.append(threading.Thread(target=asyncio.run, args=(gathered(),)))
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            sys.stdout = sys.__stdout__
        by_thread = {t.ident: "".join(out.seen.get(t.ident, [])) for t in threads}
        for n, thread in enumerate(threads[:4]):
            expected = "".join(f"out {i}\\n" for i in range(n * 1000, n * 1000 + 300))
            print(n, by_thread[thread.ident] == expected)
        lines = by_thread[threads[4].ident].splitlines()
        print("async", sorted(lines) == sorted(f"aout {10_000 + i}" for i in range(300)))
        print("wrong", wrong)
        """,
        TOOLS,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "out -1",
        "0 True",
        "1 True",
        "2 True",
        "3 True",
        "async True",
        "wrong []",
    ]


def test_cant_hold_a_caller_past_its_timeout_with_half_a_frame(app: App) -> None:
    # The caller waits alone, so it reads the connection itself: the child writes the
    # start of a frame and nothing more, and the read must still give way at the timeout.
    _rules(app)
    result = app.run(
        """
        import tools
        from pysandboxes import sandboxes, SandboxTimeout
        with sandboxes():
            first = tools.pid()
            try:
                tools.half_a_frame()
                print("returned")
            except SandboxTimeout:
                print("timed out")
            print("next", tools.pid() != first)
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["timed out", "next True"]


def test_an_interrupted_reader_replaces_the_child_and_runs_nothing_twice(
    app: App, tmp_path: Path
) -> None:
    # ^C reaches the main thread while it reads its own reply: what it read of a frame
    # is not trusted further; the call fails, ran once, and a fresh child serves on.
    marks = tmp_path / "marks"
    marks.mkdir()
    mark = marks / "ran"
    _rules(app, f"expose-rw={marks}\n")
    result = app.run(
        f"""
        import os, signal, threading, time, tools
        from pysandboxes import sandboxes
        with sandboxes():
            first = tools.pid()
            threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
            try:
                tools.nap_marked(30, {str(mark)!r})
                print("returned")
            except KeyboardInterrupt:
                print("interrupted")
            print("next", tools.pid() != first)
            time.sleep(0.5)
        print("ran", open({str(mark)!r}).read().count("ran"))
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["interrupted", "next True", "ran 1"]


def test_a_call_sent_alone_cant_keep_a_second_caller_waiting_behind_it(app: App) -> None:
    # The worker that reads a call sent alone runs it without passing its turn to read:
    # a call sent meanwhile (from another thread) must be read and answered all the same.
    # Here the first call can only end once the second has run in the child.
    _rules(app)
    result = app.run(
        """
        import threading, tools
        from pysandboxes import sandboxes
        done = []
        with sandboxes():
            tools.pid()
            held = threading.Thread(target=lambda: done.append(("released", tools.held())))
            held.start()
            while not tools.holding():  # the held call runs (sent alone)
                pass
            done.append(("second", tools.release()))
            held.join()
        print(sorted(done))
        """,
        TOOLS
        + """
    _gate = threading.Event()
    _holding = threading.Event()

    @sandbox
    def held():
        _holding.set()
        return _gate.wait(60)

    @sandbox
    def holding():
        return _holding.is_set()

    @sandbox
    def release():
        _gate.set()
        return True
""",
    )
    assert result.returncode == 0, result.stderr
    # The held call could only return True once the second one had run in the child.
    assert result.stdout.splitlines() == ["[('released', True), ('second', True)]"]


def test_a_call_sent_alone_gets_credit_for_more_output_than_the_window(app: App) -> None:
    # Its output waits for credit past the window: the credit comes while the call runs
    # alone, so a worker must be relieved to read it, or the call never ends.
    _rules(app)
    result = app.run(
        """
        import tools
        from pysandboxes import sandboxes
        with sandboxes():
            print("lines", tools.lines(200_000))
        """,
        TOOLS
        + """
    @sandbox
    def lines(count):
        for number in range(count):
            print("x" * 40, number)
        return count
""",
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    assert len(out) == 200_001
    assert out[-1] == "lines 200000"
