"""docs/audit-log.md's worked example runs as written: its files are written, its shell
sessions run in order, and each prints what the page shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "audit-log.md"
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.M | re.S)
#: The directory the page's paths stand for.
SHOWN = "/home/me/report"


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` is ``expected``, where a ``...`` line stands for any lines."""
    pattern = "".join(
        r"(?:[^\n]*\n)*?" if line == "..." else re.escape(line) + r"\n" for line in expected
    )
    return re.fullmatch(pattern, "".join(f"{line}\n" for line in actual)) is not None


def test_the_worked_example_of_tightening_a_rule_file_runs_as_written(tmp_path: Path) -> None:
    project = tmp_path / "report"
    project.mkdir()
    bin_dir = str(Path(sys.executable).parent)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": str(tmp_path)}
    sessions = 0
    for lang, info, body in FENCE.findall(PAGE.read_text()):
        path = next((part[5:] for part in info.split() if part.startswith("path=")), None)
        if path is not None:
            target = project / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body)
            continue
        if lang != "console":
            continue
        lines = body.splitlines()
        commands = [line[2:] for line in lines if line.startswith("$ ")]
        expected = [line for line in lines if not line.startswith("$ ")]
        script = "\n".join(f"{command} 2>&1" for command in commands)
        result = subprocess.run(
            ["bash", "-c", script], cwd=project, env=env, capture_output=True, text=True
        )
        actual = result.stdout.replace(str(project), SHOWN).splitlines()
        assert matches(expected, actual), "\n".join(["expected:", *expected, "got:", *actual])
        sessions += 1
    assert sessions == 3
