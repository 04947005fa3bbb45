"""``python-sb --explain RESOURCE``: the verdict, the deciding line, the layers; no program runs.

Each kind of resource is asked allowed and refused: exit 0 and the line that allows it,
exit 1 and the line that would. The verdicts are the guards' own: a refused one is what
the program would meet (the import test shows it on a real run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path

    from runner import Runner

RULES = """\
expose-ro=./data
env=LANG=${LANG}
python-import=json
net=ALLOW|tcp|127.0.0.1|8080|OUT
python-api=ALLOW:os.kill
eval-syntax=arith
eval-call=sum, range
"""


@pytest.fixture
def rules(project: Path) -> Path:
    (project / "data").mkdir()
    (project / "data" / "a.txt").write_text("a")
    path = project / ".py-sandboxes"
    path.write_text(RULES)
    return path


@pytest.mark.parametrize(
    ("resource", "decided_by"),
    [
        ("data/a.txt", ".py-sandboxes(1): expose-ro=./data"),
        ("env:LANG", ".py-sandboxes(2): env=LANG=${LANG}"),
        ("import:json", ".py-sandboxes(3): python-import=json"),
        ("net:127.0.0.1:8080", ".py-sandboxes(4): net=ALLOW|tcp|127.0.0.1|8080|OUT"),
        ("api:os.kill", ".py-sandboxes(5): python-api=ALLOW:os.kill"),
        ("eval:sum(range(10))", ".py-sandboxes(6): eval-syntax=arith"),
    ],
)
def test_explain_names_the_line_that_allows_a_resource(
    sb: Runner, rules: Path, resource: str, decided_by: str
) -> None:
    result = sb("--explain", resource)
    assert result.returncode == 0, result.stdout + result.stderr
    first = result.stdout.splitlines()[0]
    assert first.endswith(": ALLOWED"), result.stdout
    assert f"  decided by: {decided_by}" in result.stdout
    assert "  enforced by: Python layer: " in result.stdout


@pytest.mark.parametrize(
    ("resource", "would_allow"),
    [
        ("/etc/hostname", "expose-ro=/etc/hostname"),
        ("env:HOME", "env=HOME=${HOME}"),
        ("import:sqlite3", "python-import=sqlite3"),
        ("net:127.0.0.1:22", "net=ALLOW|tcp|127.0.0.1|22|OUT"),
        ("api:os.system", "python-api=ALLOW:os.system"),
        ("eval:open('x')", "eval-call=open"),
    ],
)
def test_explain_names_the_line_that_would_allow_a_refused_resource(
    sb: Runner, rules: Path, resource: str, would_allow: str
) -> None:
    result = sb("--explain", resource)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines()[0].endswith(": REFUSED"), result.stdout
    assert "  decided by: no rule: nothing allows it" in result.stdout
    assert f"  would allow it: {would_allow}" in result.stdout


def test_explain_of_a_path_gives_the_read_and_the_write_verdict(sb: Runner, rules: Path) -> None:
    result = sb("--explain=data/a.txt")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("read ")
    assert lines[0].endswith("/data/a.txt: ALLOWED")
    write = lines.index(next(line for line in lines if line.startswith("write ")))
    assert lines[write].endswith(": REFUSED")
    assert lines[write + 1] == "  decided by: .py-sandboxes(1): expose-ro=./data"


def test_explain_matches_what_a_run_meets(sb: Runner, rules: Path, project: Path) -> None:
    explained = sb("--explain", "import:sqlite3")
    ran = sb("-c", "import sqlite3")
    assert explained.returncode == 1
    assert ran.returncode != 0
    assert "python-import=sqlite3" in ran.stderr  # the same line the explanation gives


def test_explain_runs_no_program(sb: Runner, rules: Path, project: Path) -> None:
    (project / "app.py").write_text("open('ran', 'w').close()\n")
    result = sb("--explain", "import:json", "app.py")
    assert result.returncode == 0, result.stderr
    assert not (project / "ran").exists()


def test_explain_of_an_expression_beyond_the_sub_language_lists_each_line(
    sb: Runner, rules: Path
) -> None:
    result = sb("--explain", "eval:[n for n in range(3)]")
    assert result.returncode == 1
    assert "would allow it: eval-syntax=comprehension" in result.stdout


def test_explain_of_a_malformed_resource_is_a_usage_error(sb: Runner, rules: Path) -> None:
    result = sb("--explain", "net:nowhere")
    assert result.returncode == 2
    assert "expected net:HOST:PORT" in result.stderr


def test_explain_without_a_rule_file_says_a_run_would_offer_to_learn(
    sb: Runner, project: Path
) -> None:
    result = sb("--explain", "import:json")
    assert result.returncode == 1, result.stderr
    assert "  would allow it: python-import=json" in result.stdout
    assert "  note: no rule file: a run would ask at a terminal whether to learn" in result.stdout


def test_explain_of_a_refused_port_names_the_kernel_layer_of_the_net_lines(
    sb: Runner, rules: Path
) -> None:
    shown = sb("--show-layers")
    net_row = next(line for line in shown.stdout.splitlines() if "net=ALLOW" in line)
    kernel = net_row.split("\t")[3]
    result = sb("--explain", "net:127.0.0.1:22")
    assert result.returncode == 1
    assert f"kernel layer: {kernel if kernel != '-' else 'none'}" in result.stdout
