"""A directory a ``.pth`` file puts on the search path (a project installed in editable
mode, flat layout) lends the sandbox what can be imported from it, not its other files."""

from __future__ import annotations

import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

PROBE = """
import os, sys
import flatmod
print(flatmod.NAME)
for name in (".env", "data/keys.txt"):
    try:
        print(open(os.path.join(sys.argv[1], name)).read().strip())
    except OSError as exc:
        print("REFUSED", type(exc).__name__)
"""


@pytest.fixture
def editable_root(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "flat-project"
    (root / "data").mkdir(parents=True)
    (root / "flatmod.py").write_text("NAME = 'FLATMOD'\n")
    (root / ".env").write_text("API_TOKEN=ENV-SECRET\n")
    (root / "data" / "keys.txt").write_text("KEY-SECRET\n")
    pth = Path(sysconfig.get_paths()["purelib"]) / "zz_test_flat_project.pth"
    pth.write_text(f"{root}\n")
    try:
        yield root
    finally:
        pth.unlink()


def test_only_the_importable_part_of_an_editable_project_is_lent(
    sb: Runner, py: Runner, project: Path, editable_root: Path
) -> None:
    control = py("-c", PROBE, str(editable_root))
    assert control.stdout == "FLATMOD\nAPI_TOKEN=ENV-SECRET\nKEY-SECRET\n", control.stderr
    (project / ".py-sandboxes").write_text("expose-ro=.\npython-import=*\n")
    result = sb("-c", PROBE, str(editable_root))
    assert result.stdout == (
        "FLATMOD\nREFUSED RuleFileNotFoundError\nREFUSED RuleFileNotFoundError\n"
    ), result.stderr
    assert "SECRET" not in result.stdout + result.stderr
