"""Round four: arguments that answer the guard differently than they answer C.

A ``str`` subclass given with ``dir_fd`` skipped the wrapper's folding of ``dir_fd`` into
the path, so the guard judged the name against the working directory while the kernel
resolved it in the descriptor's directory; an ``int`` subclass as ``dir_fd`` was dropped
by the guard and used by the kernel. C reads the raw value of both: so does the guard now.
"""

from __future__ import annotations

from escapelab import Lab, got, tree

PREAMBLE = """
        class Lying(str):
            pass
        class Number(int):
            pass
        os.chdir(PROJECT)
        folder = os.open(OUT, os.O_RDONLY | os.O_DIRECTORY)
"""


def _rules(lab: Lab) -> None:
    lab.rules("expose-ro=.", "expose-rw=./out")


def test_cant_read_through_str_subclass_with_dir_fd(lab: Lab) -> None:
    _rules(lab)
    code = lab.probe(
        PREAMBLE
        + """
        os.symlink(SECRET_FILE, OUT + '/x')
        fd = os.open(Lying('x'), os.O_RDONLY, dir_fd=folder)
        print('GOT', os.read(fd, 100))
        """
    )
    assert got(lab.control(code), lab.secret)
    refusals = ("RuleFileNotFoundError", "RulePermissionError")
    lab.refused(code, refusals, watch=lambda: tree(lab.outside))


def test_cant_truncate_outside_through_str_subclass_with_dir_fd(lab: Lab) -> None:
    _rules(lab)
    code = lab.probe(
        PREAMBLE
        + """
        os.symlink(SECRET_FILE, OUT + '/out')
        os.open(Lying('out'), os.O_WRONLY | os.O_TRUNC, dir_fd=folder)
        print('GOT', 'truncated', os.path.getsize(SECRET_FILE))
        """
    )
    assert got(lab.control(code), "GOT truncated 0")
    lab.refused(
        code,
        ("RuleFileNotFoundError", "RulePermissionError"),
        watch=lambda: tree(lab.outside),
    )


def test_cant_stat_outside_through_int_subclass_dir_fd(lab: Lab) -> None:
    _rules(lab)
    code = lab.probe(
        PREAMBLE
        + """
        os.symlink(SECRET_FILE, OUT + '/x')
        print('GOT', 'size', os.stat('x', dir_fd=Number(folder)).st_size)
        """
    )
    assert got(lab.control(code), "GOT size")
    lab.refused(code, "RuleFileNotFoundError", watch=lambda: tree(lab.outside))
