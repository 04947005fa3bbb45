"""Files opened in C: ``dbm.ndbm`` and ``dbm.gnu``.

``_dbm`` and ``_gdbm`` open their files in C with no audit event: ``dbm.ndbm.open(path,
'n')`` truncated any file named ``<path>.db`` the user can write (a SQLite database...),
``dbm.gnu.open(path, 'n')`` any file at all, and ``shelve.open`` created its files
anywhere. Like ``_ctypes``, they are not importable without a ``native`` grant (a
``ModuleNotFoundError``): ``dbm`` and ``shelve`` fall back to ``dbm.dumb``, whose files
the file guard judges. Debian's and Fedora's interpreters ship them; an interpreter
without them skips these tests.

The rules say ``os-sandbox=subprocess``: the Python layer alone is under test.
"""

from __future__ import annotations

import importlib.util

import pytest
from escapelab import Lab, got, tree

RULES = ("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess")
AVAILABLE = [
    name
    for name, module in (("dbm.ndbm", "_dbm"), ("dbm.gnu", "_gdbm"))
    if importlib.util.find_spec(module) is not None
]


@pytest.mark.skipif(not AVAILABLE, reason="no C dbm module in this interpreter")
@pytest.mark.parametrize("module", AVAILABLE or ["dbm.ndbm"])
def test_cant_truncate_a_file_outside_with_c_dbm(lab: Lab, module: str) -> None:
    lab.rules(*RULES)
    # ndbm adds '.db' to the name it is given; gdbm opens the name as it is.
    victim = "victim" if module == "dbm.ndbm" else "victim.db"
    lab.setup(lambda: (lab.outside / "victim.db").write_text("precious\n"))
    code = lab.probe(
        f"""
        import importlib
        db = importlib.import_module({module!r}).open(OUTSIDE + '/{victim}', 'n')
        db[b'key'] = b'value'
        db.close()
        print('DONE')
        """
    )
    assert got(lab.control(code), "DONE")
    assert (lab.outside / "victim.db").read_bytes() != b"precious\n"
    lab.refused(code, ("ImportError", "ModuleNotFoundError"))


@pytest.mark.skipif(not AVAILABLE, reason="no C dbm module in this interpreter")
def test_shelve_falls_back_to_judged_files(lab: Lab) -> None:
    lab.rules(*RULES)
    code = lab.probe(
        """
        import shelve
        with shelve.open(OUT + '/shelf') as shelf:
            shelf['a'] = 1
        with shelve.open(OUT + '/shelf') as shelf:
            print('SHELF', shelf['a'])
        shelve.open(OUTSIDE + '/shelf')
        """
    )
    assert got(lab.control(code), "SHELF 1")
    result = lab.refused(code, "RuleFileNotFoundError", watch=lambda: tree(lab.outside))
    assert "SHELF 1" in result.stdout
