"""Start-up cost of what the kernel carries beyond Landlock, in one run, one table.

Run with the installed packages: ``python benchmarks/mount_view.py`` (about a minute;
``--runs N`` per row, 30 by default). Each row starts ``python-sb -c pass`` in a project
of 2,000 small files under ``landlock``, with rules that need more than Landlock:

- ``landlock``: ``expose-ro=.`` alone (the reference of the other rows);
- ``rule file bound``: ``expose-rw=.``: the rule file bound read-only in a mount
  namespace, and the socket broker (AF_UNIX sockets may be made);
- ``ignore= masked``: ``expose-ro=.`` with ``ignore=*.key`` over 200 of the files: the
  walk that finds them and a mount over each;
- ``bwrap view``: ``expose-ro=.`` under ``bwrap``, whose view is all mounts.

Columns: the median and best wall time in milliseconds, and the ratios of the median to
plain ``python -c pass`` and to the ``landlock`` row. Rows alternate within each round, so
a burst of load skews no single row.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROWS = {
    "landlock": "expose-ro=.\nos-sandbox=landlock\n",
    "rule file bound": "expose-rw=.\nos-sandbox=landlock\n",
    "ignore= masked": "expose-ro=.\nignore=*.key\nos-sandbox=landlock\n",
    "bwrap view": "expose-ro=.\nos-sandbox=bwrap\n",
}


def _project(root: Path, rules: str) -> Path:
    project = root / str(abs(hash(rules)))
    for folder in range(20):
        (project / f"d{folder}").mkdir(parents=True)
        for index in range(100):
            suffix = ".key" if index % 10 == 0 else ".txt"
            (project / f"d{folder}" / f"f{index}{suffix}").write_text("x")
    (project / ".py-sandboxes").write_text(rules)
    return project


def _time(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    python_sb = str(Path(sys.executable).with_name("python-sb"))
    with tempfile.TemporaryDirectory() as tmp:
        projects = {name: _project(Path(tmp), rules) for name, rules in ROWS.items()}
        times: dict[str, list[float]] = {name: [] for name in ("python", *ROWS)}
        for _ in range(runs):
            times["python"].append(_time([sys.executable, "-c", "pass"], Path(tmp)))
            for name, project in projects.items():
                times[name].append(_time([python_sb, "-c", "pass"], project))
    plain = statistics.median(times["python"])
    reference = statistics.median(times["landlock"])
    print(f"{'row':<18}{'median ms':>10}{'best ms':>9}{'x python':>10}{'x landlock':>12}")
    for name, values in times.items():
        median = statistics.median(values)
        print(
            f"{name:<18}{median:>10.1f}{min(values):>9.1f}{median / plain:>10.2f}"
            f"{median / reference:>12.2f}"
        )


if __name__ == "__main__":
    main()
