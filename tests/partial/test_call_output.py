"""A call's output is replayed in the calling thread, whole and in order, never mixed
with another call's; a caller that cannot write (a paused terminal) slows the child's
writes instead of filling the caller's memory, and other calls still get their
results meanwhile."""

from __future__ import annotations

import subprocess
import sys
import time

from partiallab import App  # type: ignore[import-not-found]

TOOLS = """
    import os
    from pysandboxes import sandbox

    @sandbox
    def talk(tag, lines):
        for number in range(lines):
            print(f"{tag} line {number}")
            if number % 7 == 0:
                os.write(1, f"{tag} raw {number}\\n".encode())
        return tag

    @sandbox
    def flood(megabytes):
        line = "x" * 1023
        for _ in range(megabytes * 1024):
            print(line)
        return megabytes

    @sandbox
    def quick(n):
        return n + 1
"""


def _rules(app: App) -> None:
    (app.project / ".py-sandboxes").write_text("python-import=tools, os\n")


def test_cant_mix_two_concurrent_calls_output(app: App) -> None:
    _rules(app)
    result = app.run(
        """
        import threading, tools
        from pysandboxes import sandboxes
        with sandboxes():
            threads = [threading.Thread(target=tools.talk, args=(t, 60)) for t in "AB"]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    printed = [line for line in result.stdout.splitlines() if " line " in line]
    tags = [line[0] for line in printed]
    assert tags in (["A"] * 60 + ["B"] * 60, ["B"] * 60 + ["A"] * 60), result.stdout
    for tag in "AB":  # in the order written, lines whole
        assert [line for line in printed if line[0] == tag] == [
            f"{tag} line {n}" for n in range(60)
        ]
    # Descriptor 1 is one pipe for the whole child: what reaches it while two calls run
    # is no single call's, and goes to standard error; nothing is lost.
    raw = sorted(line for line in (result.stdout + result.stderr).splitlines() if " raw " in line)
    assert raw == sorted(f"{tag} raw {n}" for tag in "AB" for n in range(0, 60, 7))


def test_cant_fill_the_callers_memory_through_a_paused_output(app: App) -> None:
    _rules(app)
    (app.project / "tools.py").write_text(__import__("textwrap").dedent(TOOLS))
    main = """
        import resource, sys, threading, time, tools
        from pysandboxes import sandboxes
        with sandboxes():
            tools.quick(0)
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            flooding = threading.Thread(target=tools.flood, args=(128,))
            flooding.start()
            start = time.monotonic()
            answered = [tools.quick(n) for n in range(20)]  # while the flood is held back
            print("quick calls", answered == list(range(1, 21)),
                  round(time.monotonic() - start, 2), file=sys.stderr, flush=True)
            flooding.join()
            grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
            print("grown KiB", grown, file=sys.stderr, flush=True)
    """
    (app.project / "main.py").write_text(__import__("textwrap").dedent(main))
    with subprocess.Popen(
        [sys.executable, "main.py"],
        cwd=app.project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        time.sleep(4)  # a paused terminal: nobody reads the caller's standard output
        assert process.poll() is None  # the flood cannot be done: its output is held back
        lines = 0
        while chunk := process.stdout.read(1 << 20):
            lines += chunk.count(b"\n")
        errors = process.stderr.read().decode()
        assert process.wait(60) == 0, errors
    assert lines == 128 * 1024  # nothing lost
    said = dict(line.split(" ", 2)[1:] for line in errors.splitlines() if " " in line)
    assert said["calls"].startswith("True"), errors
    assert float(said["calls"].split()[1]) < 3.5, errors  # answered while the output waited
    assert int(said["KiB"]) < 50 * 1024, errors
