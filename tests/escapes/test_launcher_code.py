"""The sandbox may not write where python-sb's own interpreter loads code from.

A ``.pth`` file or a module put in the launcher's ``site-packages`` (or its script
directory, or the user's site) runs on the next start of python-sb, in the trusted
launcher and before any wall: rules allowing that are refused before anything starts.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner


#: The planted line acts only in a process with this test's token: the venv is shared
#: with the other workers, whose interpreters would run it too while it is there.
_TOKEN = "PYSB_PLANTED_TOKEN"


def _planter(site_packages: Path, marker: Path) -> str:
    acts = f"os.environ.get({_TOKEN!r}) == {str(marker)!r}"
    line = f"import os; {acts} and open({str(marker)!r}, 'w').close()\n"
    return f"open({str(site_packages / 'zz_planted.pth')!r}, 'w').write({line!r})"


def test_cant_plant_code_in_python_sbs_site_packages(
    sb: Runner, py: Runner, project: Path, tmp_path: Path
) -> None:
    site_packages = Path(sysconfig.get_paths()["purelib"])  # the launcher's: same venv
    planted = site_packages / "zz_planted.pth"
    marker = tmp_path / "ran-outside-the-sandbox"
    token = {_TOKEN: str(marker)}
    try:
        py("-c", _planter(site_packages, marker))
        py("-c", "pass", env=token)  # any later start of this interpreter runs it
        assert marker.exists()
    finally:
        planted.unlink(missing_ok=True)
    marker.unlink()
    (project / ".py-sandboxes").write_text(f"expose-ro=.\nexpose-rw={site_packages}\n")
    result = sb("-c", _planter(site_packages, marker), env=token)
    assert result.returncode != 0
    assert f"'expose-rw={site_packages}' lets the sandbox write in" in result.stderr
    assert "outside the sandbox on the next run" in result.stderr
    assert not planted.exists()
    py("-c", "pass", env=token)  # the next start: nothing was planted, nothing runs
    assert not marker.exists()


def test_a_parent_of_the_launchers_directories_is_refused_too(
    sb: Runner, python_sb: str, project: Path
) -> None:
    venv = Path(python_sb).parent.parent
    (project / ".py-sandboxes").write_text(f"expose-ro=.\nexpose-rw={venv}\n")
    result = sb("-c", "print('RAN')")
    assert result.stdout == ""
    assert "where python-sb's own interpreter loads code from" in result.stderr


def test_writable_data_directories_are_fine(sb: Runner, project: Path) -> None:
    (project / "data").mkdir()
    (project / ".py-sandboxes").write_text("expose-ro=.\nexpose-rw=./data\n")
    assert sb("-c", "print('RAN')").stdout == "RAN\n"


def test_cant_write_in_a_subpackage_of_python_sb_installed_in_editable_mode(
    sb: Runner, py: Runner, project: Path
) -> None:
    """Installed in editable mode (as in this repository), python-sb's own packages lie
    outside ``site-packages``: a module changed in one of their subpackages runs in the
    trusted launcher on the next run, so a writable rule inside one is refused too."""
    import pytest

    import pysandboxes

    package = Path(pysandboxes.__file__).parent
    libraries = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
    if any(package.resolve().is_relative_to(tree) for tree in libraries):
        pytest.skip("pysandboxes is not installed in editable mode here")
    subpackage = package / "_policy"
    planted = subpackage / "zz_planted.py"
    write = f"open({str(planted)!r}, 'w').write('# planted')"
    try:
        py("-c", write)
        assert planted.exists()
    finally:
        planted.unlink(missing_ok=True)
    (project / ".py-sandboxes").write_text(f"expose-ro=.\nexpose-rw={subpackage}\n")
    try:
        result = sb("-c", write)
        assert result.returncode != 0
        assert "where python-sb's own interpreter loads code from" in result.stderr
        assert not planted.exists()
    finally:
        planted.unlink(missing_ok=True)
