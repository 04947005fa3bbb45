"""The program ``benchmarks/complete.py`` times: each guarded operation, in batches.

``complete.py`` copies this file into each column's tree as ``bench.py`` and runs it there,
under plain ``python`` or under ``python-sb``, as
``bench.py ROOT PORT BATCHES [hook] [named=HOST:PORT [only]]``: ROOT is its working
directory (so ``data/sub`` is a relative path and ``ROOT/data/sub`` the same place as an
absolute one), PORT a loopback port accepting connections, BATCHES how many batches of
each measure to time, ``hook`` a do-nothing audit hook to install first (the floor of any
audit-hook sandbox). ``named=`` adds the measure ``tcp connect by name (broker)``, a
connection to HOST:PORT (a name the broker connects to under python-sb, its loopback
address under plain python); ``only``: that measure alone (its rules grant nothing else).
It prints one JSON object: for each measure, the seconds per operation of each batch.
One batch of every measure is timed in turn, so a burst of load on the machine lands on
all measures alike; a first batch of each, untimed, warms the caches.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    Measure = Callable[[int], None]

RELATIVE_FILE = "data/sub/file.txt"
RELATIVE_FOLDER = "data/sub"


#: The measure ``named=`` adds.
BY_NAME = "tcp connect by name (broker)"


def measures(root: str, port: int) -> dict[str, tuple[Measure, int]]:
    """Each measure's function of ``n`` and the ``n`` of one batch (a few milliseconds)."""
    absolute_file = os.path.join(root, RELATIVE_FILE)
    absolute_folder = os.path.join(root, RELATIVE_FOLDER)

    def open_read(path: str) -> Measure:
        def run(n: int) -> None:
            for _ in range(n):
                with open(path) as handle:
                    handle.read()

        return run

    def stat(path: str) -> Measure:
        def run(n: int) -> None:
            for _ in range(n):
                os.stat(path)

        return run

    def listdir(path: str) -> Measure:
        def run(n: int) -> None:
            for _ in range(n):
                os.listdir(path)

        return run

    def read_text(path: str) -> Measure:
        def run(n: int) -> None:
            for _ in range(n):
                Path(path).read_text()

        return run

    def fresh_import(n: int) -> None:
        for _ in range(n):
            sys.modules.pop("colorsys", None)
            import colorsys  # noqa: F401  # pyright: ignore[reportUnusedImport]

    def connect(n: int) -> None:
        for _ in range(n):
            socket.create_connection(("127.0.0.1", port)).close()

    def environ_get(n: int) -> None:
        for _ in range(n):
            os.environ.get("PYSB_BENCH")

    def compute(n: int) -> None:
        total = 0
        for i in range(n):
            total += i * i % 7

    def import_statement(n: int) -> None:
        for _ in range(n):
            import colorsys  # noqa: F401  # pyright: ignore[reportUnusedImport]

    return {
        "open+read rel": (open_read(RELATIVE_FILE), 200),
        "open+read abs": (open_read(absolute_file), 200),
        "os.stat rel": (stat(RELATIVE_FILE), 1000),
        "os.stat abs": (stat(absolute_file), 1000),
        "os.listdir rel": (listdir(RELATIVE_FOLDER), 200),
        "os.listdir abs": (listdir(absolute_folder), 200),
        "Path.read_text rel": (read_text(RELATIVE_FILE), 200),
        "Path.read_text abs": (read_text(absolute_file), 200),
        "fresh import": (fresh_import, 30),
        "tcp connect": (connect, 40),
        "os.environ.get": (environ_get, 5000),
        "compute": (compute, 50_000),
        "import statement": (import_statement, 20_000),
    }


def connect_to(host: str, port: int) -> Measure:
    def run(n: int) -> None:
        for _ in range(n):
            socket.create_connection((host, port)).close()

    return run


def main() -> None:
    root, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    options = sys.argv[4:]
    if "hook" in options:
        sys.addaudithook(lambda event, args: None)
    timed = measures(root, port)
    if "only" in options:
        timed.clear()
    for option in options:
        if option.startswith("named="):
            host, _, named_port = option.removeprefix("named=").rpartition(":")
            timed[BY_NAME] = (connect_to(host, int(named_port)), 40)
    samples: dict[str, list[float]] = {name: [] for name in timed}
    for run, n in timed.values():
        run(n)
    for _ in range(count):
        for name, (run, n) in timed.items():
            start = time.perf_counter_ns()
            run(n)
            samples[name].append((time.perf_counter_ns() - start) / n / 1e9)
    print(json.dumps(samples))


if __name__ == "__main__":
    main()
