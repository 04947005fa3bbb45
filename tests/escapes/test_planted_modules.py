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
