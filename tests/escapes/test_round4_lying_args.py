"""Round four: arguments that answer the guard differently than they answer C.

A ``str`` subclass given with ``dir_fd`` skipped the wrapper's folding of ``dir_fd`` into
the path, so the guard judged the name against the working directory while the kernel
resolved it in the descriptor's directory; an ``int`` subclass as ``dir_fd`` was dropped
by the guard and used by the kernel. C reads the raw value of both: so does the guard now.
"""

from __future__ import annotations

import pytest
from escapelab import Lab, got, tree

PREAMBLE = """
        class Lying(str):
            pass
        class Number(int):
            pass
        os.chdir(PROJECT)
        folder = os.open(OUT, os.O_RDONLY | os.O_DIRECTORY)
"""


REFUSALS = ("RuleFileNotFoundError", "RulePermissionError")

PROBES = {
    "read_through_str_subclass_with_dir_fd": (
        """
        os.symlink(SECRET_FILE, OUT + '/x')
        fd = os.open(Lying('x'), os.O_RDONLY, dir_fd=folder)
        print('GOT', os.read(fd, 100))
        """,
        None,
    ),
    "truncate_outside_through_str_subclass_with_dir_fd": (
        """
        os.symlink(SECRET_FILE, OUT + '/out')
        os.open(Lying('out'), os.O_WRONLY | os.O_TRUNC, dir_fd=folder)
        print('GOT', 'truncated', os.path.getsize(SECRET_FILE))
        """,
        "GOT truncated 0",
    ),
    "stat_outside_through_int_subclass_dir_fd": (
        """
        os.symlink(SECRET_FILE, OUT + '/x')
        print('GOT', 'size', os.stat('x', dir_fd=Number(folder)).st_size)
        """,
        "GOT size",
    ),
}


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_cant_get_outside_with_lying_arguments(lab: Lab, probe: str) -> None:
    lab.rules("expose-ro=.", "expose-rw=./out")
    body, evidence = PROBES[probe]
    code = lab.probe(PREAMBLE + body)
    assert got(lab.control(code), evidence or lab.secret)
    # The outside tree is what must not change: the probe's own link sits in out/.
    lab.refused(code, REFUSALS, watch=lambda: tree(lab.outside))
