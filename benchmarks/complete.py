"""Cost of complete mode: ``python-sb`` against plain ``python``, in one run, one table.

Run with the installed packages: ``python benchmarks/complete.py`` (2 to 4 minutes on a
2-core machine; ``--quick`` for a short, rough run; ``--providers landlock,learn`` to
choose the columns). Each guarded operation is timed inside the program
(``complete_program.py``), whose working directory is the benchmark's tree: on a relative
path (``open("data/sub/file.txt")``, as programs are written) and on an absolute one, as
separate rows. Every measure is taken in many batches, pooled over rounds that alternate
plain python and each column, so a burst of load on the machine skews no single column.

Columns: ``python`` (absolute cost per operation); ``floor``, the same program under plain
python with a do-nothing audit hook (``sys.addaudithook(lambda e, a: None)``): what any
audit-hook sandbox pays before judging anything; one column per kernel provider under
``python-sb`` (``subprocess``: the Python layer alone; ``landlock``, the default;
``unshare``; ``bwrap``); ``audit-log``, Landlock with every decision logged
(``audit-log=``); ``learn``, ``python-sb --learn`` with no rule file, each access recorded.

Each cell is the median with half its p25-p75 spread (as a share of the median) and the
best (``b``). Ratios are of medians (``b``: of bests) to plain python, except ``learn``,
whose ratio is to the enforcing ``landlock`` run. A cell that misses its target ends with
``!``. Targets (issue 21, docs/usage.md#cost): start-up (``python-sb -c pass``, wall) <= 50
ms; open+read, ``os.stat``, ``os.listdir``, ``Path.read_text``, relative and absolute, a
fresh import and ``os.environ.get`` <= 1.3x; a TCP connection to an allowed loopback port
<= 1.15x; compute <= 1.05x; peak RSS of ``python-sb -c pass`` (its largest process) < 15
MiB, and (issue 34) every process of an idle run together <= 30 MiB, in 2 processes; with
``audit-log`` (issue 22) and under ``learn`` against ``landlock`` (issue 21)
every guarded operation <= 1.5x; (issue 37) a TCP connection to an allowed name
through the broker, under ``landlock``, <= 2x a plain connection to a loopback listener
under plain python. That row is timed in a run of its own, whose rules name the host
(resolved with the test-only hosts file, to ``127.0.0.2``): a name in the rules puts the
whole run behind the broker, so the landlock column's other rows keep rules without one.
An import statement naming a module already loaded is a
dictionary lookup in plain Python, judged by the sandbox all the same: its row shows the
absolute cost, without a target.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PROGRAM = Path(__file__).with_name("complete_program.py")
#: The broker row's name and the loopback address it stands for: the test-only hosts file
#: maps one to the other, and ``PYSANDBOXES_TEST_PUBLIC`` has that address count as
#: public (else the SSRF-safe defaults refuse a name resolving to loopback).
BROKER_NAME = "bench.example.test"
BROKER_ADDRESS = "127.0.0.2"
PROVIDERS = ("subprocess", "landlock", "unshare", "bwrap", "audit-log", "learn")
KERNELS = ("subprocess", "landlock", "unshare", "bwrap")
# Each operation's target ratio to plain python under every kernel provider; None: the row
# shows absolute costs.
TARGETS: dict[str, float | None] = {
    "open+read rel": 1.3,
    "open+read abs": 1.3,
    "os.stat rel": 1.3,
    "os.stat abs": 1.3,
    "os.listdir rel": 1.3,
    "os.listdir abs": 1.3,
    "Path.read_text rel": 1.3,
    "Path.read_text abs": 1.3,
    "fresh import": 1.3,
    "tcp connect": 1.15,
    "tcp connect by name (broker)": 2.0,
    "os.environ.get": 1.3,
    "compute": 1.05,
    "import statement": None,
}
LOGGED_TARGET = 1.5  # audit-log against python, learn against landlock (compute: 1.05)
START_TARGET = 0.050
RSS_TARGET = 15 * 1024  # KiB
#: Issue 34: every process of a sandbox together, and how many there are.
TREE_RSS_TARGET = 30 * 1024  # KiB
PROCESS_TARGET = 2
MIB = 1024
WIDTH = 19
LABEL = 30  # the longest row's name, "tcp connect by name (broker)", and a space


def listener(host: str = "127.0.0.1") -> int:
    """A loopback server that accepts and closes connections for the whole run."""
    server = socket.socket()
    server.bind((host, 0))
    server.listen(512)

    def serve() -> None:
        while True:
            server.accept()[0].close()

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1]


def rules(column: str, port: int, tree: Path) -> str:
    """The rule file of a ``python-sb`` column (none for ``learn``)."""
    kernel = "landlock" if column == "audit-log" else column
    logged = f"audit-log={tree}/log/audit.jsonl\n" if column == "audit-log" else ""
    return (
        f"expose-ro=.\nnet=ALLOW|tcp|127.0.0.1|{port}|OUT\n"
        "python-import=json, os, socket, sys, time, pathlib, colorsys\n"
        "env=PYSB_BENCH=${PYSB_BENCH}\n"
        f"os-sandbox={kernel}\n{logged}"
    )


def broker_rules(port: int) -> str:
    """The rule file of the broker row's run: outgoing TCP to a name and nothing else."""
    return (
        f"expose-ro=.\nnet=ALLOW|tcp|{BROKER_NAME}|{port}|OUT\n"
        "python-import=json, os, socket, sys, time, pathlib, colorsys\n"
        "os-sandbox=landlock\n"
    )


def make_tree(tree: Path, column: str, port: int) -> None:
    """One column's tree: its own rule file, so each start finds the same file each time."""
    sub = tree / "data" / "sub"
    sub.mkdir(parents=True)
    for i in range(30):
        (sub / f"f{i}.txt").write_text("x" * 100)
    (sub / "file.txt").write_text("hello\n" * 20)
    (tree / "log").mkdir()
    shutil.copyfile(PROGRAM, tree / "bench.py")
    if column in PROVIDERS and column != "learn":
        (tree / ".py-sandboxes").write_text(rules(column, port, tree))


def command(column: str, python_sb: str) -> list[str]:
    """How a column runs a program: the arguments before the program's own."""
    if column in ("python", "floor"):
        return [sys.executable]
    if column == "learn":
        return [python_sb, "--learn"]
    return [python_sb]


def why(run: subprocess.CompletedProcess[str]) -> str:
    lines = (run.stderr or run.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit status {run.returncode}"


class Bench:
    """The trees, the listener and the samples of one run."""

    def __init__(self, tmp: Path, columns: list[str], batches: int) -> None:
        self.python_sb = str(Path(sys.executable).with_name("python-sb"))
        self.port = listener()
        self.named_port = listener(BROKER_ADDRESS)
        self.batches = batches
        self.env = {**os.environ, "PYSB_BENCH": "1"}
        self.trees: dict[str, Path] = {}
        for i, column in enumerate(columns):
            self.trees[column] = tmp / f"c{i:02d}"
            make_tree(self.trees[column], column, self.port)
        # The broker row's run (with landlock): its own tree, rules and test-only names.
        self.broker_tree = tmp / "broker"
        make_tree(self.broker_tree, "broker", self.port)
        (self.broker_tree / ".py-sandboxes").write_text(broker_rules(self.named_port))
        hosts = tmp / "hosts"
        hosts.write_text(f"{BROKER_ADDRESS} {BROKER_NAME}\n")
        self.broker_env = {
            **self.env,
            "PYSANDBOXES_TEST_HOSTS": str(hosts),
            "PYSANDBOXES_TEST_PUBLIC": BROKER_ADDRESS,
        }
        self.columns = columns
        self.samples: dict[str, dict[str, list[float]]] = {}
        self.start: dict[str, list[float]] = {}
        self.rss: dict[str, int] = {}
        self.tree: dict[str, tuple[int, int]] = {}  # column: (processes, summed peak RSS)
        self.broken: dict[str, str] = {}

    def run_operations(self, column: str) -> None:
        """Run the program once more in ``column``; pool its batches with the earlier ones."""
        tree = self.trees[column]
        args = ["bench.py", str(tree), str(self.port), str(self.batches)]
        if column == "floor":
            args.append("hook")
        if column in ("python", "floor"):
            args.append(f"named={BROKER_ADDRESS}:{self.named_port}")  # the plain connect
        learned = tree / ".py-sandboxes"
        if column == "learn":
            learned.unlink(missing_ok=True)
        run = subprocess.run(
            command(column, self.python_sb) + args,
            cwd=tree,
            env=self.env,
            capture_output=True,
            text=True,
        )
        if column == "learn":
            learned.unlink(missing_ok=True)
        if run.returncode != 0:
            self.broken[column] = why(run)
            return
        self.pool(column, run)
        if column == "landlock":
            self.run_broker()

    def run_broker(self) -> None:
        """The broker row's run, pooled into the landlock column."""
        if "landlock (broker)" in self.broken:
            return
        args = [str(self.broker_tree), str(self.port), str(self.batches)]
        args += [f"named={BROKER_NAME}:{self.named_port}", "only"]
        run = subprocess.run(
            [self.python_sb, "bench.py", *args],
            cwd=self.broker_tree,
            env=self.broker_env,
            capture_output=True,
            text=True,
        )
        if run.returncode != 0:
            self.broken["landlock (broker)"] = why(run)
            return
        self.pool("landlock", run)

    def pool(self, column: str, run: subprocess.CompletedProcess[str]) -> None:
        measured = json.loads(run.stdout.strip().splitlines()[-1])
        pooled = self.samples.setdefault(column, {})
        for name, values in measured.items():
            pooled.setdefault(name, []).extend(values)

    def wall(self, column: str) -> None:
        """Time ``-c pass`` once more in ``column`` (from outside, wall clock)."""
        begin = time.perf_counter()
        run = subprocess.run(
            command(column, self.python_sb) + ["-c", "pass"],
            cwd=self.trees[column],
            env=self.env,
            capture_output=True,
            text=True,
        )
        elapsed = time.perf_counter() - begin
        if run.returncode != 0:
            self.broken[column] = why(run)
            return
        self.start.setdefault(column, []).append(elapsed)

    def peak_rss(self, column: str, runs: int) -> None:
        """Median over ``runs`` of the largest resident set of ``-c pass``'s processes.

        Measured by ``/usr/bin/time`` (a small C parent: a Python parent would lend each
        child its own high-water mark through fork and exec), else by a fresh Python
        process's ``RUSAGE_CHILDREN``.
        """
        tool = shutil.which("time")
        found: list[int] = []
        for _ in range(runs):
            with tempfile.NamedTemporaryFile("r") as out:
                if tool:
                    measure = [tool, "-f", "%M", "-o", out.name]
                else:
                    measure = [
                        sys.executable,
                        "-c",
                        "import resource, subprocess, sys;"
                        "subprocess.run(sys.argv[2:], capture_output=True);"
                        "r = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss;"
                        "open(sys.argv[1], 'w').write(str(r))",
                        out.name,
                    ]
                cmd = measure + command(column, self.python_sb) + ["-c", "pass"]
                subprocess.run(cmd, cwd=self.trees[column], env=self.env, capture_output=True)
                text = out.read().strip().splitlines()
            if text and text[-1].isdigit():
                found.append(int(text[-1]))
        if found:
            self.rss[column] = int(statistics.median(found))

    def process_tree(self, column: str) -> None:
        """The processes of a sandbox whose program waits (on its standard input), and
        their peak resident sets summed (``VmHWM``): what one idle run costs the host."""
        program = "import os; os.read(0, 1)"
        child = subprocess.Popen(
            command(column, self.python_sb) + ["-c", program],
            cwd=self.trees[column],
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(1.0)  # every process of the chain started and settled
            found = descendants(child.pid)
            peaks = [peak_kib(pid) for pid in found]
            if child.poll() is None and peaks:
                self.tree[column] = (len(found), sum(peaks))
        finally:
            if child.stdin is not None:
                child.stdin.close()
            child.wait()


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{current}/task/{task}/children") as listing:
                    todo += [int(number) for number in listing.read().split()]
            except OSError:
                continue
    return found


def peak_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def rotated(columns: list[str], turn: int) -> list[str]:
    shift = turn % len(columns)
    return columns[shift:] + columns[:shift]


def summary(values: list[float]) -> tuple[float, float, float]:
    """Median, half the p25-p75 spread as a share of the median, best."""
    ordered = sorted(values)
    median = statistics.median(ordered)
    if len(ordered) > 1:
        low, _, high = statistics.quantiles(ordered, n=4)
    else:
        low = high = median
    return median, (high - low) / 2 / median, ordered[0]


def duration(seconds: float) -> str:
    """A short absolute cost: ns, us or ms, three figures at most."""
    for unit, scale in (("ns", 1e9), ("us", 1e6), ("ms", 1e3)):
        value = seconds * scale
        if value < 1000 or unit == "ms":
            return f"{value:.2f}{unit}" if value < 10 else f"{value:.0f}{unit}"
    raise AssertionError


def cell(median: str, spread: float, best: str, miss: bool) -> str:
    return f"{median}±{spread * 100:.0f}% b{best}{'!' if miss else ''}"


def target_of(column: str, name: str) -> float | None:
    """The ratio ``column`` must keep on the row ``name`` (None: no target)."""
    if column in KERNELS:
        return TARGETS[name]
    if column in ("audit-log", "learn") and TARGETS[name] is not None:
        return TARGETS["compute"] if name == "compute" else LOGGED_TARGET
    return None


def operation_cells(bench: Bench, name: str) -> list[str]:
    cells: list[str] = []
    for column in bench.columns:
        if name not in bench.samples.get(column, {}):
            cells.append("-")
            continue
        median, spread, best = summary(bench.samples[column][name])
        if column == "python" or TARGETS[name] is None:
            cells.append(cell(duration(median), spread, duration(best), False))
            continue
        base = "landlock" if column == "learn" else "python"
        if name not in bench.samples.get(base, {}):
            cells.append("-")
            continue
        base_median, _, base_best = summary(bench.samples[base][name])
        ratio = median / base_median
        target = target_of(column, name)
        miss = target is not None and round(ratio, 2) > target
        cells.append(cell(f"{ratio:.2f}x", spread, f"{best / base_best:.2f}x", miss))
    return cells


def start_cells(bench: Bench) -> list[str]:
    cells: list[str] = []
    for column in bench.columns:
        if column not in bench.start:
            cells.append("-")
            continue
        median, spread, best = summary(bench.start[column])
        miss = column in KERNELS and median > START_TARGET
        cells.append(cell(duration(median), spread, duration(best), miss))
    return cells


def rss_cells(bench: Bench) -> list[str]:
    cells: list[str] = []
    for column in bench.columns:
        if column not in bench.rss:
            cells.append("-")
            continue
        miss = column in KERNELS and bench.rss[column] >= RSS_TARGET
        cells.append(f"{bench.rss[column] / MIB:.1f}MiB{'!' if miss else ''}")
    return cells


def tree_cells(bench: Bench) -> tuple[list[str], list[str]]:
    counts: list[str] = []
    sums: list[str] = []
    for column in bench.columns:
        if column not in bench.tree:
            counts.append("-")
            sums.append("-")
            continue
        processes, total = bench.tree[column]
        many = column in KERNELS and processes > PROCESS_TARGET
        counts.append(f"{processes}{'!' if many else ''}")
        sums.append(
            f"{total / MIB:.1f}MiB{'!' if column in KERNELS and total > TREE_RSS_TARGET else ''}"
        )
    return counts, sums


def print_table(bench: Bench, heading: str) -> None:
    print(heading)
    for column, reason in bench.broken.items():
        print(f"# {column}: cannot run here: {reason}")
    header = "".join(f"{column:>{WIDTH}}" for column in bench.columns)
    print(f"{'measure':<{LABEL}}{header}{'target':>10}")
    counts, sums = tree_cells(bench)
    rows = [
        ("start-up -c pass", start_cells(bench), f"<={START_TARGET * 1e3:.0f}ms"),
        ("peak RSS -c pass", rss_cells(bench), f"<{RSS_TARGET // MIB}MiB"),
        ("processes (idle)", counts, f"{PROCESS_TARGET}"),
        ("RSS all processes", sums, f"<={TREE_RSS_TARGET // MIB}MiB"),
    ]
    for name, target in TARGETS.items():
        shown = "abs. cost" if target is None else f"<={target}x"
        rows.append((name, operation_cells(bench, name), shown))
    for label, cells, target in rows:
        print(f"{label:<{LABEL}}" + "".join(f"{c:>{WIDTH}}" for c in cells) + f"{target:>10}")
    print(
        "# cells: median ± half its p25-p75 spread, b = best; ratios of medians (b: of bests)"
        " to python;\n# rel/abs: relative/absolute path; '!': misses its target (the"
        " target column: subprocess,\n# landlock, unshare, bwrap). floor: plain python with"
        " a do-nothing audit hook.\n# audit-log: landlock with audit-log=, target <=1.5x"
        " (compute <=1.05x). learn: python-sb\n# --learn, no rule file, ratio to the"
        " ENFORCING landlock run, target <=1.5x (compute <=1.05x).\n# peak RSS: largest"
        " process of python-sb -c pass (median of runs); start-up: wall from outside.\n#"
        " processes (idle): how many a run whose program waits keeps; RSS all processes: their"
        "\n# peak resident sets (VmHWM) summed. tcp connect by name (broker): landlock only,"
        " in a run\n# whose rules name the host; plain python connects to its address."
    )


def compile_own_bytecode() -> None:
    """Compile the two packages, as an install by pip (or ``uv pip install
    --compile-bytecode``) has them: ``python-sb``'s own process writes no bytecode where
    ``PYTHONDONTWRITEBYTECODE`` is set, and would otherwise time compiling its modules."""
    import compileall

    import pysandboxes
    import python_sb

    for package in (pysandboxes, python_sb):
        compileall.compile_dir(os.path.dirname(package.__file__ or ""), quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="a short, rough run")
    parser.add_argument(
        "--providers",
        default=",".join(PROVIDERS),
        help=f"columns after python and floor, comma-separated, of: {', '.join(PROVIDERS)}",
    )
    options = parser.parse_args()
    chosen = {name.strip() for name in options.providers.split(",") if name.strip()}
    if chosen - set(PROVIDERS):
        parser.error(f"unknown providers: {', '.join(sorted(chosen - set(PROVIDERS)))}")
    if "learn" in chosen:
        chosen.add("landlock")  # learn's ratio is to the enforcing landlock run
    columns = ["python", "floor", *(p for p in PROVIDERS if p in chosen)]
    rounds, batches, starts, rss_runs = (2, 3, 5, 1) if options.quick else (8, 10, 30, 3)
    compile_own_bytecode()
    load = os.getloadavg()[0]
    begin = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(Path(tmp).resolve(), columns, batches)
        # Rounds alternate plain python and each column: a burst of load on the machine
        # then lands on several columns' batches, never on one column's alone.
        # Each round starts one column later, so no column always follows the same one.
        for turn in range(rounds):
            for column in rotated(columns, turn):
                if column not in bench.broken:
                    bench.run_operations(column)
        started = [c for c in columns if c not in ("floor", "learn") and c not in bench.broken]
        for column in started:
            bench.wall(column)  # untimed: the first start fills the file system's caches
            bench.start.pop(column, None)
        for turn in range(starts):
            for column in rotated(started, turn):
                if column not in bench.broken:
                    bench.wall(column)
        for column in started:
            if column not in bench.broken:
                bench.peak_rss(column, rss_runs)
                bench.process_tree(column)
    heading = (
        f"# benchmarks/complete.py: {rounds} rounds x {batches} batches per column,"
        f" start-up {starts} runs, {time.perf_counter() - begin:.0f} s;"
        f" load average {load:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    cores = os.cpu_count() or 1
    if max(load, os.getloadavg()[0]) > cores:
        heading += (
            f"\n# busy machine (load average above its {cores} cores): medians include other"
            " processes' time;\n# the bests (b) are the steadier reading of the sandbox's own cost"
        )
    print_table(bench, heading)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
