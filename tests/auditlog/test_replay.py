"""``python-sb --replay=LOG``: what a change of the rules would break, before running."""

from __future__ import annotations

import json
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

PROGRAM = """
import os
for name in os.listdir("data"):
    open(os.path.join("data", name)).read()
try:
    open("secrets/key.txt").read()
except OSError:
    pass
"""


def recorded(sb: Runner, project: Path) -> None:
    """A run with the log: reads data/ (allowed), tries secrets/ (refused)."""
    for folder, name in (("data", "a.txt"), ("data", "b.txt"), ("secrets", "key.txt")):
        (project / folder).mkdir(exist_ok=True)
        (project / folder / name).write_text("x")
    (project / "app.py").write_text(PROGRAM)
    (project / ".py-sandboxes").write_text(
        "expose-ro=./data\npython-import=os\naudit-log=audit.jsonl\n"
    )
    result = sb("--quiet-refusals", "app.py")
    assert result.returncode == 0, result.stderr


def test_replay_reports_what_a_narrowed_rule_breaks_and_exits_1(sb: Runner, project: Path) -> None:
    recorded(sb, project)
    (project / ".py-sandboxes").write_text("expose-ro=./data/a.txt\npython-import=os\n")
    result = sb("--replay=audit.jsonl")
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "now REFUSED (allowed when recorded)" in out
    assert f"file {project.resolve() / 'data' / 'b.txt'} (read) at app.py:4" in out
    assert "now allowed" not in out
    assert f"file {project.resolve() / 'data' / 'a.txt'}" not in out  # still allowed


def test_replay_reports_what_a_widened_rule_allows_and_exits_0(sb: Runner, project: Path) -> None:
    recorded(sb, project)
    result = sb("--replay=audit.jsonl", "--expose-ro=./secrets")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "now allowed (refused when recorded): 1" in out
    assert f"file {project.resolve() / 'secrets' / 'key.txt'} (read) at app.py:6" in out
    assert "decided by: <arg>:1: expose-ro=./secrets" in out
    assert "now REFUSED" not in out


def test_replay_with_unchanged_rules_changes_nothing(sb: Runner, project: Path) -> None:
    recorded(sb, project)
    result = sb("--replay", "audit.jsonl")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "nothing would change" in result.stdout


def test_replay_uses_the_rule_file_given(sb: Runner, project: Path) -> None:
    recorded(sb, project)
    (project / "narrow.rules").write_text("python-import=os\n")
    result = sb("--pysandboxes-config=narrow.rules", "--replay=audit.jsonl")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "narrow.rules" in result.stdout


def test_an_unreadable_log_line_is_a_clear_error_naming_the_line(sb: Runner, project: Path) -> None:
    recorded(sb, project)
    lines = (project / "audit.jsonl").read_text().splitlines()
    lines.insert(1, '{"v": 1, "kind": "file", "target": "/x"')
    (project / "audit.jsonl").write_text("\n".join(lines) + "\n")
    result = sb("--replay=audit.jsonl")
    assert result.returncode == 255
    assert "audit.jsonl, line 2: not JSON" in result.stderr, result.stderr


def test_a_log_of_another_format_version_is_refused(sb: Runner, project: Path) -> None:
    recorded(sb, project)
    first = json.loads((project / "audit.jsonl").read_text().splitlines()[0])
    (project / "future.jsonl").write_text(json.dumps({**first, "v": 2}) + "\n")
    result = sb("--replay=future.jsonl")
    assert result.returncode == 255
    assert "line 1: not a decision of format version 1" in result.stderr, result.stderr
