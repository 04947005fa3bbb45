"""A module named like a standard one, planted next to the program, never runs unguarded.

Python puts the working directory (or the script's directory) first on ``sys.path``. The
sandbox itself imports standard modules (fnmatch, struct...) before its walls are up; a
planted ``fnmatch.py`` there would run with python-sb's rights. Each probe's planted module
writes a marker outside the project: plain python shows the file is importable, python-sb
must run the program without ever running it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner


@pytest.mark.parametrize(
    ("folder", "module"), [(".", "fnmatch"), ("scripts", "struct"), ("scripts", "shutil")]
)
def test_a_planted_standard_module_never_runs_before_the_walls(
    sb: Runner, py: Runner, project: Path, tmp_path: Path, folder: str, module: str
) -> None:
    marker = tmp_path / "outside-marker"
    place = project / folder
    place.mkdir(exist_ok=True)
    (place / f"{module}.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (place / "prog.py").write_text("print('program ok')\n")
    py("-c", f"import sys; sys.path.insert(0, {str(place)!r}); import {module}")
    assert marker.exists(), "the planted module is not importable: the probe proves nothing"
    marker.unlink()
    (project / ".py-sandboxes").write_text("expose-ro=.\npython-import=json\n")
    result = sb(f"{folder}/prog.py")
    assert result.stdout == "program ok\n", result.stderr
    assert not marker.exists()


def test_the_programs_listing_shows_only_what_the_rules_show(
    sb: Runner, py: Runner, project: Path
) -> None:
    # The program's directory is listed for the import system before the walls; that
    # listing must not show what the rules hide (here: a module no rule exposes).
    (project / "helper.py").write_text("print('helper ran')\n")
    (project / "hidden_helper.py").write_text("print('hidden ran')\n")
    (project / "prog.py").write_text(
        "import helper\ntry:\n    import hidden_helper\nexcept ImportError:\n"
        "    print('hidden not found')\n"
    )
    assert py("prog.py").stdout == "helper ran\nhidden ran\n"
    rules = "expose-ro=./prog.py\nexpose-ro=./helper.py\npython-import=helper, hidden_helper\n"
    (project / ".py-sandboxes").write_text(rules)
    result = sb("prog.py")
    assert result.stdout == "helper ran\nhidden not found\n", result.stderr


@pytest.mark.parametrize(
    ("entry", "module"), [("pp", "sitecustomize"), ("./pp", "ctypes"), ("pp/", "fnmatch")]
)
def test_nothing_in_a_forwarded_pythonpath_runs_before_the_walls(
    sb: Runner, project: Path, tmp_path: Path, entry: str, module: str
) -> None:
    # sitecustomize runs at start-up from any sys.path entry; a planted ctypes would be
    # what the kernel layer's own binding imports. PYTHONPATH waits for the walls.
    marker = tmp_path / "outside-marker"
    (project / "pp").mkdir()
    planted = project / "pp" / (f"{module}.py" if module != "ctypes" else "ctypes/__init__.py")
    planted.parent.mkdir(exist_ok=True)
    planted.write_text(f"open({str(marker)!r}, 'w').close()\nraise ImportError\n")
    (project / "prog.py").write_text("print('program ok')\n")
    rules = f"expose-ro=./prog.py\nenv=PYTHONPATH={project}/{entry}\npython-import=json\n"
    (project / ".py-sandboxes").write_text(rules)
    result = sb("prog.py")
    assert "program ok" in result.stdout, result.stderr
    assert not marker.exists()


def test_a_forwarded_pycache_prefix_feeds_nothing_to_the_start_up(
    sb: Runner, project: Path
) -> None:
    # A bytecode cache the sandbox may write, used by the next start-up before the walls,
    # would run whatever .pyc a sandbox planted there for a module the start-up imports.
    (project / "cache").mkdir()
    rules = "expose-rw=./cache\nenv=PYTHONPYCACHEPREFIX=${PWD}/cache\npython-import=sys\n"
    (project / ".py-sandboxes").write_text(rules)
    code = "import sys; print(sys.pycache_prefix)"
    result = sb("-c", code, env={"PWD": str(project)})
    assert result.stdout == f"{project}/cache\n", result.stderr  # the program still gets it
    written = [str(p) for p in (project / "cache").rglob("*.pyc")]
    assert not [p for p in written if "pysandboxes" in p], written


def test_a_loader_variable_naming_a_writable_place_stops_the_run(sb: Runner, project: Path) -> None:
    (project / "rw").mkdir()
    rules = "expose-rw=./rw\nenv=LD_PRELOAD=${PWD}/rw/evil.so\n"
    (project / ".py-sandboxes").write_text(rules)
    result = sb("-c", "print('ran')", env={"PWD": str(project)})
    assert result.returncode == 255
    assert "LD_PRELOAD names" in result.stderr
    assert "where the sandbox may write" in result.stderr
    assert "ran" not in result.stdout


def test_a_user_site_the_sandbox_may_write_is_not_read_at_start_up(
    sb: Runner, project: Path
) -> None:
    (project / "home").mkdir()
    rules = "expose-rw=./home\nenv=HOME=${PWD}/home\npython-import=sys\n"
    (project / ".py-sandboxes").write_text(rules)
    result = sb("-c", "import sys; print(sys.flags.no_user_site)", env={"PWD": str(project)})
    assert result.stdout == "1\n", result.stderr
