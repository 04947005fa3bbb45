"""Round two: the root of an ``expose-rw=`` replaced by a symlink, for the next run.

The exposure's own path is writable (it is inside its rule), so the program may remove
``out`` and create ``out`` again, as a symlink to anywhere, in the project directory that
no rule makes writable. The rule file is unchanged, but the next run resolves
``expose-rw=./out`` to the link's target: the outside is then exposed read-write.
"""

from __future__ import annotations

import pytest
from escapelab import Lab, tree

PLANT_DIR = """
import os
os.rmdir(OUT)
os.symlink(OUTSIDE, OUT)
print('DONE')
"""

PLANT_FILE = """
import os
os.remove(OUT)
os.symlink(SECRET_FILE, OUT)
print('DONE')
"""


def _constants(lab: Lab) -> str:
    return (
        f"OUTSIDE = {str(lab.outside)!r}\nSECRET_FILE = {str(lab.secret_file)!r}\n"
        f"OUT = {str(lab.out)!r}\n"
    )


def _file_exposure(lab: Lab) -> None:
    """``expose-rw=./out`` is a single file here."""

    def prepare() -> None:
        lab.out.rmdir()
        lab.out.write_text("notes\n")

    lab.setup(prepare)
    lab.rules("expose-ro=./data", "expose-rw=./out")


@pytest.mark.parametrize("kind", ["directory", "file"])
def test_cant_replace_exposed_path_with_symlink(lab: Lab, kind: str) -> None:
    if kind == "file":
        _file_exposure(lab)
    code = _constants(lab) + (PLANT_DIR if kind == "directory" else PLANT_FILE)
    assert "DONE" in lab.control(code).stdout
    assert lab.out.is_symlink()
    lab.refused(
        code,
        ("RulePermissionError", "RuleFileNotFoundError"),
        watch=lambda: tree(lab.project),
    )


@pytest.mark.parametrize("kind", ["directory", "file"])
def test_cant_read_secret_in_next_run_through_planted_exposure_link(lab: Lab, kind: str) -> None:
    if kind == "file":
        _file_exposure(lab)
    plant = _constants(lab) + (PLANT_DIR if kind == "directory" else PLANT_FILE)
    path = "out/secret.txt" if kind == "directory" else "out"
    read = lab.probe(f"print('GOT', open({path!r}).read())")
    lab.reset()
    lab.py("-c", plant)
    assert lab.secret in lab.py("-c", read).stdout
    lab.reset()
    first = lab.sb("-c", plant)
    second = lab.sb("-c", read)
    output = first.stdout + first.stderr + second.stdout + second.stderr
    assert lab.secret not in output, f"the next run read the secret:\n{output}"
    # The planting run is refused (its probe has no try: the refusal ends it).
    assert "RulePermissionError" in first.stderr or "REFUSED" in second.stdout, output
