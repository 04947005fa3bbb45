"""Cost of partial mode: ``@sandbox`` calls against their natural alternatives, in one run.

Run with the installed packages: ``python benchmarks/partial.py [provider]`` (default:
the rules' default provider, Landlock where the kernel has it). It prints one table:
entering and leaving ``sandboxes()``; the median of a tiny call and its p99, against a
plain call, ``ProcessPoolExecutor(1)`` and a raw socket-pair ping-pong between two Python
processes (pickle both ways: the floor of any process boundary, measured in the same
run); the same tiny call with ``remote-result-mode=objects``; 1 MiB and 16 MiB arguments
and results; calls per second from 4 threads and from 50 async calls gathered at once,
each with its calls' p99 latency against their median; the idle child's resident
memory; the time from a call that crashes the child to the next call's result (a fresh
child started, at most once).

Targets (docs/design, issues 34 and 35): enter <= 80 ms, exit <= 20 ms, a fresh child
after a crash <= 80 ms, tiny call <= 100 us and <= 2x the socket-pair floor, 1 MiB each
way <= 5 ms, 16 MiB <= 40 ms, >= 10,000 calls/s from 4 threads and from 50 gathered, p99
<= 5x the median under that load, idle child RSS <= 25 MiB.
"""

from __future__ import annotations

import os
import pickle
import socket
import statistics
import struct
import sys
import tempfile
import textwrap
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

TOOLS = """
from pysandboxes import sandbox

def plain_add(a, b):
    return a + b

@sandbox
def add(a, b):
    return a + b

@sandbox
def size(data):
    return len(data)

@sandbox
def blob(n):
    return b"x" * n

@sandbox
async def add_async(a, b):
    return a + b

@sandbox
def crash():
    import os
    os._exit(1)
"""
MIB = 1 << 20


def _median(fn: object, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _samples(fn: object, rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append(time.perf_counter() - start)
    return sorted(samples)


def _gathered(call: object, concurrent: int, rounds: int) -> tuple[float, list[float]]:
    """Calls per second of ``concurrent`` awaited at once with ``asyncio.gather``, and
    each call's latency (sorted)."""
    import asyncio

    latencies: list[float] = []

    async def timed(i: int) -> None:
        start = time.perf_counter()
        await call(i, 1)  # type: ignore[operator]
        latencies.append(time.perf_counter() - start)

    async def run() -> float:
        await asyncio.gather(*(call(i, 1) for i in range(concurrent)))  # type: ignore[operator]
        start = time.perf_counter()
        for _ in range(rounds):
            await asyncio.gather(*(timed(i) for i in range(concurrent)))
        return concurrent * rounds / (time.perf_counter() - start)

    rate = asyncio.run(run())
    return rate, sorted(latencies)


def _threaded(call: object, threads: int, per_thread: int) -> tuple[float, list[float]]:
    """Calls per second of ``threads`` threads calling at once, and each call's latency."""
    latencies: list[list[float]] = [[] for _ in range(threads)]

    def work(mine: list[float]) -> None:
        clock = time.perf_counter
        for _ in range(per_thread):
            start = clock()
            call(1, 2)  # type: ignore[operator]
            mine.append(clock() - start)

    workers = [threading.Thread(target=work, args=(mine,)) for mine in latencies]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    rate = threads * per_thread / (time.perf_counter() - start)
    return rate, sorted(x for mine in latencies for x in mine)


def _tail_row(latencies: list[float]) -> tuple[str, str, str, str]:
    """The row of a load's calls: their p99 against their median."""
    median, p99 = statistics.median(latencies), _p99(latencies)
    return (
        "  a call's p99 / median",
        f"{p99 * 1e6:.0f} / {median * 1e6:.0f} us",
        f"{p99 / median:.2f}x median",
        "5x median",
    )


def _p99(samples: list[float]) -> float:
    return samples[int(len(samples) * 0.99)]


def _socketpair_floor(rounds: int) -> float:
    ours, theirs = socket.socketpair()
    header = struct.Struct("<I")
    pid = os.fork()
    if pid == 0:
        ours.close()
        while True:
            raw = theirs.recv(4)
            if not raw:
                os._exit(0)
            (size,) = header.unpack(raw)
            args = pickle.loads(theirs.recv(size))
            reply = pickle.dumps(args[0] + args[1])
            theirs.sendall(header.pack(len(reply)) + reply)
    theirs.close()

    def ping() -> None:
        message = pickle.dumps((1, 2))
        ours.sendall(header.pack(len(message)) + message)
        (size,) = header.unpack(ours.recv(4))
        pickle.loads(ours.recv(size))

    for _ in range(100):
        ping()
    floor = _median(ping, rounds)
    ours.close()
    os.waitpid(pid, 0)
    return floor


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main() -> None:
    provider = sys.argv[1] if len(sys.argv) > 1 else None
    work = Path(tempfile.mkdtemp(prefix="pysandboxes-bench-"))
    (work / "bench_tools.py").write_text(textwrap.dedent(TOOLS))
    (work / ".py-sandboxes").write_text("py-sandbox=true\n")  # no right at all
    sys.path.insert(0, str(work))
    os.chdir(work)
    import bench_tools  # type: ignore[import-not-found]

    from pysandboxes import sandboxes

    rules = {"os_sandbox": provider} if provider else {}
    rows: list[tuple[str, str, str, str]] = []

    enters, exits = [], []
    for _ in range(5):
        box = sandboxes(**rules)
        start = time.perf_counter()
        box.__enter__()
        enters.append(time.perf_counter() - start)
        start = time.perf_counter()
        box.__exit__(None, None, None)
        exits.append(time.perf_counter() - start)
    rows.append(("sandboxes() enter", f"{statistics.median(enters) * 1e3:.1f} ms", "", "80 ms"))
    rows.append(("sandboxes() exit", f"{statistics.median(exits) * 1e3:.1f} ms", "", "20 ms"))

    floor = _socketpair_floor(2000)
    plain = _median(lambda: bench_tools.plain_add(1, 2), 2000)
    with ProcessPoolExecutor(1) as pool:
        pool.submit(bench_tools.plain_add, 1, 2).result()
        ppe = _median(lambda: pool.submit(bench_tools.plain_add, 1, 2).result(), 2000)
    with sandboxes(**rules) as box:
        child = box._child  # pyright: ignore[reportPrivateUsage]
        for _ in range(200):
            bench_tools.add(1, 2)
        samples = _samples(lambda: bench_tools.add(1, 2), 2000)
        tiny, p99 = statistics.median(samples), _p99(samples)
        data = b"x" * MIB
        bench_tools.size(data)
        arg = _median(lambda: bench_tools.size(data), 50)
        result = _median(lambda: bench_tools.blob(MIB), 50)
        big = b"x" * (16 * MIB)
        arg16 = _median(lambda: bench_tools.size(big), 10)
        result16 = _median(lambda: bench_tools.blob(16 * MIB), 10)
        gathered, gather_latencies = _gathered(bench_tools.add_async, 50, 40)
        rate, thread_latencies = _threaded(bench_tools.add, 4, 2000)
        time.sleep(0.2)
        rss = _rss_kib(child.pid) if child is not None else 0
    with sandboxes(remote_result_mode="objects", **rules):
        for _ in range(200):
            bench_tools.add(1, 2)
        tiny_objects = _median(lambda: bench_tools.add(1, 2), 2000)
    recoveries = []
    with sandboxes(max_restarts=100, python_import="os", **rules):
        from pysandboxes import SandboxCrashed

        bench_tools.add(1, 2)
        for _ in range(10):
            start = time.perf_counter()
            try:
                bench_tools.crash()
            except SandboxCrashed:
                pass
            bench_tools.add(1, 2)
            recoveries.append(time.perf_counter() - start)
    recovery = statistics.median(recoveries)

    us = 1e6
    rows.append(("plain call", f"{plain * us:.2f} us", "", ""))
    rows.append(("raw socketpair ping-pong", f"{floor * us:.1f} us", "1.00x", ""))
    rows.append(("ProcessPoolExecutor(1) call", f"{ppe * us:.1f} us", f"{ppe / floor:.2f}x", ""))
    rows.append(("@sandbox tiny call", f"{tiny * us:.1f} us", f"{tiny / floor:.2f}x", "100 us, 2x"))
    rows.append(("  its p99", f"{p99 * us:.1f} us", f"{p99 / tiny:.2f}x median", "5x median"))
    rows.append(
        ("  same, objects mode", f"{tiny_objects * us:.1f} us", f"{tiny_objects / floor:.2f}x", "")
    )
    rows.append(("1 MiB argument", f"{arg * 1e3:.2f} ms", "", "5 ms"))
    rows.append(("1 MiB result", f"{result * 1e3:.2f} ms", "", "5 ms"))
    rows.append(("16 MiB argument", f"{arg16 * 1e3:.2f} ms", "", "40 ms"))
    rows.append(("16 MiB result", f"{result16 * 1e3:.2f} ms", "", "40 ms"))
    rows.append(("calls/s, 4 threads", f"{rate:,.0f}", "", ">= 10,000"))
    rows.append(_tail_row(thread_latencies))
    rows.append(("calls/s, 50 gathered (async)", f"{gathered:,.0f}", "", ">= 10,000"))
    rows.append(_tail_row(gather_latencies))
    rows.append(("idle child RSS", f"{rss / 1024:.1f} MiB", "", "25 MiB"))
    rows.append(("crash -> next call's result", f"{recovery * 1e3:.1f} ms", "", "80 ms"))

    print(f"partial mode, provider: {provider or 'default'}  (vs floor = the socket pair)")
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    head = ("measure", "median", "vs floor", "target")
    widths = [max(w, len(h)) for w, h in zip(widths, head, strict=True)]
    for row in (head, *rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
