"""Attack class 1: every file API reading a secret outside the exposed tree."""

from __future__ import annotations

import os
import sqlite3

import pytest
from escapelab import Lab, got

READ_PROBES = {
    "open": "print('GOT', open(SECRET_FILE).read())",
    "io_open": "import io\nprint('GOT', io.open(SECRET_FILE).read())",
    "os_open": "fd = os.open(SECRET_FILE, os.O_RDONLY)\nprint('GOT', os.read(fd, 200))",
    "io_fileio": "import io\nprint('GOT', io.FileIO(SECRET_FILE).read())",
    "pathlib_read_text": "import pathlib\nprint('GOT', pathlib.Path(SECRET_FILE).read_text())",
    "pathlib_read_bytes": "import pathlib\nprint('GOT', pathlib.Path(SECRET_FILE).read_bytes())",
    "pathlib_open": "import pathlib\nprint('GOT', pathlib.Path(SECRET_FILE).open().read())",
    "io_open_code": "import io\nprint('GOT', io.open_code(SECRET_FILE).read())",
    "unwrapped_io_module": "import _io\nprint('GOT', _io.open(SECRET_FILE).read())",
    "os_open_bytes_path": (
        "fd = os.open(os.fsencode(SECRET_FILE), os.O_RDONLY)\nprint('GOT', os.read(fd, 200))"
    ),
    "linecache": "import linecache\nprint('GOT', linecache.getline(SECRET_FILE, 1))",
    "fileinput": "import fileinput\nprint('GOT', list(fileinput.input(SECRET_FILE)))",
}


@pytest.mark.parametrize("api", list(READ_PROBES))
def test_cant_read_secret_outside_exposed_tree(lab: Lab, api: str) -> None:
    code = lab.probe(READ_PROBES[api])
    assert lab.secret in lab.control(code).stdout
    if api == "linecache":
        # linecache swallows every OSError and answers "": refused means nothing came back.
        result = lab.run_sandboxed(code)
        assert lab.secret not in result.stdout + result.stderr, result.stdout
        return
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_read_secret_with_fileio_given_a_path_object(lab: Lab) -> None:
    # io.FileIO is not wrapped: only the audit hook judges it, and the "open" event carries
    # the path object itself, not the converted string.
    code = lab.probe(
        "import io, pathlib\nprint('GOT', io.FileIO(pathlib.Path(SECRET_FILE)).read())"
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_read_secret_with_fileio_given_an_os_pathlike(lab: Lab) -> None:
    code = lab.probe(
        """
        import io
        class Where:
            def __fspath__(self):
                return SECRET_FILE
        print('GOT', io.FileIO(Where()).read())
        """
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


LISTINGS = {
    "listdir": "print('GOT', os.listdir(OUTSIDE))",
    "scandir": "print('GOT', [e.name for e in os.scandir(OUTSIDE)])",
    "walk": "print('GOT', [(d, f) for d, _, f in os.walk(OUTSIDE)])",
    "fwalk": "print('GOT', [(d, f) for d, _, f, _ in os.fwalk(OUTSIDE)])",
    "pathlib_iterdir": "import pathlib\nprint('GOT', list(pathlib.Path(OUTSIDE).iterdir()))",
    "glob": "import glob\nprint('GOT', glob.glob(OUTSIDE + '/*'))",
    "glob_recursive": "import glob\nprint('GOT', glob.glob(OUTSIDE + '/**', recursive=True))",
}


@pytest.mark.parametrize("api", list(LISTINGS))
def test_cant_list_outside_directory(lab: Lab, api: str) -> None:
    code = lab.probe(LISTINGS[api])
    assert "secret.txt" in lab.control(code).stdout
    result = lab.run_sandboxed(code)
    assert "secret.txt" not in result.stdout + result.stderr, result.stdout
    assert "other.txt" not in result.stdout + result.stderr, result.stdout
    if api in ("listdir", "scandir", "pathlib_iterdir"):
        assert "REFUSED RuleFileNotFoundError" in result.stdout, result.stdout + result.stderr


STATS = {
    "stat": "print('GOT', os.stat(SECRET_FILE).st_size)",
    "lstat": "print('GOT', os.lstat(SECRET_FILE).st_size)",
    "access": "print('GOT', os.access(SECRET_FILE, os.R_OK))",
    "exists": "print('GOT', os.path.exists(SECRET_FILE))",
    "isfile": "print('GOT', os.path.isfile(SECRET_FILE))",
    "lexists": "print('GOT', os.path.lexists(SECRET_FILE))",
    "getsize": "print('GOT', os.path.getsize(SECRET_FILE))",
    "pathlib_exists": "import pathlib\nprint('GOT', pathlib.Path(SECRET_FILE).exists())",
    "statvfs": "print('GOT', os.statvfs(SECRET_FILE).f_bsize)",
    "getxattr": "print('GOT', os.listxattr(SECRET_FILE))",
}


@pytest.mark.parametrize("api", list(STATS))
def test_cant_see_that_hidden_file_exists(lab: Lab, api: str) -> None:
    code = lab.probe(STATS[api])
    control = lab.control(code)
    assert "GOT" in control.stdout, control.stderr
    assert "GOT False" not in control.stdout
    result = lab.run_sandboxed(code)
    output = result.stdout + result.stderr
    if api in ("exists", "isfile", "lexists", "pathlib_exists"):
        assert "GOT False" in result.stdout, output  # a hidden path looks absent
    elif api == "access":
        # False, as for a missing file; or refused as missing.
        refused = "REFUSED RuleFileNotFoundError" in result.stdout
        assert "GOT False" in result.stdout or refused, output
    else:
        assert "REFUSED RuleFileNotFoundError" in result.stdout, output
    assert "PermissionError" not in output  # absent, not "there but forbidden"


def test_cant_copy_secret_into_writable_dir_with_shutil(lab: Lab) -> None:
    code = lab.probe(
        """
        import shutil
        shutil.copyfile(SECRET_FILE, OUT + '/copy.txt')
        print('GOT', open(OUT + '/copy.txt').read())
        """
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


@pytest.mark.parametrize("api", ["copy", "copy2", "copytree", "move"])
def test_cant_copy_secret_into_writable_dir_with_other_shutil_functions(lab: Lab, api: str) -> None:
    source = "OUTSIDE" if api == "copytree" else "SECRET_FILE"
    code = lab.probe(
        f"""
        import shutil
        shutil.{api}({source}, OUT + '/copy')
        print('DONE', os.listdir(OUT))
        """
    )
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RuleFileNotFoundError")


def _make_database(lab: Lab) -> None:
    with sqlite3.connect(lab.outside / "secret.db") as db:
        db.execute("create table t (v text)")
        db.execute("insert into t values (?)", (lab.secret,))
    db.close()


def test_cant_open_outside_database_with_sqlite3_connect(lab: Lab) -> None:
    lab.setup(lambda: _make_database(lab))
    code = lab.probe(
        """
        db = sqlite3.connect(OUTSIDE + '/secret.db')
        print('GOT', db.execute('select v from t').fetchall())
        """,
        imports="os, sqlite3",
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


@pytest.mark.parametrize(
    "uri",
    ["file:{path}?mode=ro", "file://{path}", "file:{path}?mode=rw", "file:{path}?cache=shared"],
    ids=["ro", "authority", "rw", "query"],
)
def test_cant_open_outside_database_with_sqlite3_uri(lab: Lab, uri: str) -> None:
    lab.setup(lambda: _make_database(lab))
    code = lab.probe(
        f"""
        db = sqlite3.connect({uri!r}.format(path=OUTSIDE + '/secret.db'), uri=True)
        print('GOT', db.execute('select v from t').fetchall())
        """,
        imports="os, sqlite3",
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_open_outside_database_with_sqlite3_uri_fragment(lab: Lab) -> None:
    # SQLite ends the path at '#' and ignores the fragment; the guard reads the text after
    # '?' as the query, sees "mode=memory" and judges nothing.
    lab.setup(lambda: _make_database(lab))
    code = lab.probe(
        """
        db = sqlite3.connect('file:' + OUTSIDE + '/secret.db#?mode=memory', uri=True)
        print('GOT', db.execute('select v from t').fetchall())
        """,
        imports="os, sqlite3",
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_open_outside_database_with_sqlite3_percent_encoded_uri(lab: Lab) -> None:
    # SQLite decodes %2F in a URI path: the guard judges a relative name in the project.
    lab.rules("expose-ro=.")
    lab.setup(lambda: _make_database(lab))
    code = lab.probe(
        """
        db = sqlite3.connect('file:%2E%2E%2Foutside%2Fsecret.db?mode=ro', uri=True)
        print('GOT', db.execute('select v from t').fetchall())
        """,
        imports="os, sqlite3",
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


# SQLite opens these files itself (no audit event, no wrapper); a refusal from inside it
# can only come back as sqlite3.DatabaseError ("not authorized").
SQLITE_REFUSALS = ("RuleFileNotFoundError", "DatabaseError")


def test_cant_attach_outside_database_from_sqlite(lab: Lab) -> None:
    lab.setup(lambda: _make_database(lab))
    code = lab.probe(
        """
        db = sqlite3.connect(':memory:')
        db.execute('attach database ? as s', (OUTSIDE + '/secret.db',))
        print('GOT', db.execute('select v from s.t').fetchall())
        """,
        imports="os, sqlite3",
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, SQLITE_REFUSALS)


def test_cant_write_outside_file_with_sqlite_vacuum_into(lab: Lab) -> None:
    code = lab.probe(
        """
        db = sqlite3.connect(':memory:')
        db.execute('vacuum into ?', (OUTSIDE + '/dropped.db',))
        print('DONE')
        """,
        imports="os, sqlite3",
    )
    assert got(lab.control(code), "DONE")
    assert (lab.outside / "dropped.db").exists()
    lab.refused(code, SQLITE_REFUSALS)


def test_cant_read_link_target_outside_with_readlink(lab: Lab) -> None:
    # The link's text is itself a secret (where the credentials live).
    lab.setup(lambda: os.symlink(f"/nowhere/{lab.secret}", lab.outside / "pointer"))
    code = lab.probe("print('GOT', os.readlink(OUTSIDE + '/pointer'))")
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_stat_hidden_target_through_scandir_entry(lab: Lab) -> None:
    # DirEntry.stat() follows a link in an exposed directory with no event and no wrapper:
    # the hidden file must still look absent (is_file False, stat refused).
    lab.setup(lambda: os.symlink(lab.secret_file, lab.data / "link"))
    code = lab.probe(
        """
        entry = next(e for e in os.scandir(DATA) if e.name == 'link')
        print('IS_FILE', entry.is_file())
        print('GOT inode', entry.stat().st_ino)
        """
    )
    control = lab.control(code)
    assert f"GOT inode {os.stat(lab.secret_file).st_ino}" in control.stdout  # this tree's
    result = lab.run_sandboxed(code)
    assert f"GOT inode {os.stat(lab.secret_file).st_ino}" not in result.stdout, result.stdout
    assert "IS_FILE True" not in result.stdout, result.stdout


def test_cant_stat_hidden_directory_through_trailing_slash_lstat(lab: Lab) -> None:
    # lstat("link/") makes the kernel follow the link; the guard judges the link itself.
    lab.setup(lambda: os.symlink(lab.outside, lab.data / "dirlink"))
    code = lab.probe("print('GOT inode', os.lstat(DATA + '/dirlink/').st_ino)")
    control = lab.control(code)
    assert f"GOT inode {os.stat(lab.outside).st_ino}" in control.stdout  # this tree's
    result = lab.refused(code, "RuleFileNotFoundError")
    assert f"GOT inode {os.stat(lab.outside).st_ino}" not in result.stdout
