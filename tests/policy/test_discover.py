"""Which rule file a run uses: explicit, next to the program, cwd, pyproject.toml."""

from __future__ import annotations

import sys
from pathlib import Path

from pysandboxes._policy.discover import discover


def make(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_explicit_path_with_a_slash_is_used_as_given(tmp_path: Path) -> None:
    rules = make(tmp_path / "cfg" / "rules")
    found = discover("cfg/rules", cwd=str(tmp_path))
    assert found.path == str(rules)
    missing = discover("cfg/none", cwd=str(tmp_path))
    assert missing.path is None
    assert missing.default == str(tmp_path / "cfg" / "none")


def test_file_next_to_the_script_beats_the_cwd(tmp_path: Path) -> None:
    make(tmp_path / ".py-sandboxes")
    beside = make(tmp_path / "app" / ".py-sandboxes")
    make(tmp_path / "app" / "main.py")
    assert discover(script="app/main.py", cwd=str(tmp_path)).path == str(beside)


def test_bare_config_name_is_searched_like_the_default(tmp_path: Path) -> None:
    beside = make(tmp_path / "app" / "custom.rules")
    assert discover("custom.rules", script="app/x.py", cwd=str(tmp_path)).path == str(beside)


def test_module_is_located_without_being_imported(tmp_path: Path) -> None:
    make(tmp_path / ".py-sandboxes")
    make(tmp_path / "pkg" / "__init__.py", "raise SystemExit('imported!')\n")
    make(tmp_path / "pkg" / "server.py", "raise SystemExit('imported!')\n")
    beside = make(tmp_path / "pkg" / ".py-sandboxes")
    found = discover(module="pkg.server", cwd=str(tmp_path), search_path=[str(tmp_path)])
    assert found.path == str(beside)
    assert "pkg" not in sys.modules


def test_cwd_then_pyproject(tmp_path: Path) -> None:
    assert discover(cwd=str(tmp_path)).path is None
    make(tmp_path / "pyproject.toml", "[project]\nname = 'x'\n")
    assert discover(cwd=str(tmp_path)).path is None  # no [tool.py-sandboxes] table
    py = make(tmp_path / "pyproject.toml", '[tool.py-sandboxes]\nexpose-ro = ["."]\n')
    assert discover(cwd=str(tmp_path)).path == str(py)
    dot = make(tmp_path / ".py-sandboxes")
    assert discover(cwd=str(tmp_path)).path == str(dot)


def test_default_location_for_a_new_file(tmp_path: Path) -> None:
    found = discover(script="tools/run.py", cwd=str(tmp_path))
    assert found.path is None
    assert found.default == str(tmp_path / "tools" / ".py-sandboxes")
    assert found.searched == (
        str(tmp_path / "tools" / ".py-sandboxes"),
        str(tmp_path / ".py-sandboxes"),
    )
