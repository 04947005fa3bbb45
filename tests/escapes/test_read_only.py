"""Attack class 4: changing anything under ``expose-ro=``.

Default rules: ``expose-ro=./data``, ``expose-rw=./out``. Each probe tries to change
``data/`` and prints ``DONE`` if it could; python-sb must refuse with
``RulePermissionError`` and leave ``data/`` (and the outside tree) exactly as it was.
"""

from __future__ import annotations

import sqlite3

import pytest
from escapelab import Lab, got, tree

CONFIG = "DATA + '/config.txt'"

WRITES = {
    "open_write": f"open({CONFIG}, 'w').write('pwned')",
    "open_append": f"open({CONFIG}, 'a').write('pwned')",
    "open_update": f"open({CONFIG}, 'r+').write('pwned')",
    "open_exclusive_create": "open(DATA + '/new.txt', 'x').write('pwned')",
    "os_open_write": f"os.write(os.open({CONFIG}, os.O_WRONLY | os.O_TRUNC), b'pwned')",
    "os_open_append": f"os.write(os.open({CONFIG}, os.O_WRONLY | os.O_APPEND), b'pwned')",
    "os_open_create": "os.open(DATA + '/new.txt', os.O_CREAT | os.O_WRONLY)",
    "io_fileio_write": f"import io\nio.FileIO({CONFIG}, 'w').write(b'pwned')",
    "io_fileio_append": f"import io\nio.FileIO({CONFIG}, 'a').write(b'pwned')",
    "pathlib_write_text": f"import pathlib\npathlib.Path({CONFIG}).write_text('pwned')",
    "pathlib_touch": "import pathlib\npathlib.Path(DATA + '/new.txt').touch()",
    "remove": f"os.remove({CONFIG})",
    "unlink": f"os.unlink({CONFIG})",
    "pathlib_unlink": f"import pathlib\npathlib.Path({CONFIG}).unlink()",
    "rename_within": f"os.rename({CONFIG}, DATA + '/moved.txt')",
    "rename_out": f"os.rename({CONFIG}, OUT + '/stolen.txt')",
    "replace_over": f"open(OUT + '/x', 'w').close()\nos.replace(OUT + '/x', {CONFIG})",
    "rename_dir_in": "os.mkdir(OUT + '/d')\nos.rename(OUT + '/d', DATA + '/d')",
    "mkdir": "os.mkdir(DATA + '/new')",
    "makedirs": "os.makedirs(DATA + '/new/deeper')",
    "rmdir": "os.rmdir(DATA + '/a/b')",
    "chmod": f"os.chmod({CONFIG}, 0o777)",
    "chmod_dir": "os.chmod(DATA + '/a', 0o700)",
    "chown": f"st = os.stat({CONFIG})\nos.chown({CONFIG}, st.st_uid, st.st_gid)",
    "utime": f"os.utime({CONFIG}, (1, 1))",
    "truncate": f"os.truncate({CONFIG}, 0)",
    "setxattr": f"os.setxattr({CONFIG}, 'user.mark', b'pwned')",
    "rmtree": "import shutil\nshutil.rmtree(DATA + '/a')",
    "rmtree_root": "import shutil\nshutil.rmtree(DATA)",
    "symlink": "os.symlink('/etc/passwd', DATA + '/planted')",
    "hard_link_in": "open(OUT + '/x', 'w').close()\nos.link(OUT + '/x', DATA + '/planted')",
    "hard_link_out": f"os.link({CONFIG}, OUT + '/alias')",
    "mkfifo": "os.mkfifo(DATA + '/fifo')",
    "mknod": "import stat\nos.mknod(DATA + '/node', stat.S_IFREG | 0o600)",
    "copyfile_over": f"import shutil\nshutil.copyfile('/dev/null', {CONFIG})",
    "tempfile": "import tempfile\ntempfile.mkstemp(dir=DATA)",
    "unix_bind": "import socket\nsocket.socket(socket.AF_UNIX).bind(DATA + '/sock')",
    "utime_dir_fd": (
        "base = os.open(DATA, os.O_RDONLY)\nos.utime('config.txt', (1, 1), dir_fd=base)"
    ),
    "remove_dir_fd": "base = os.open(DATA, os.O_RDONLY)\nos.remove('config.txt', dir_fd=base)",
}


def _watch_data(lab: Lab) -> object:
    return tree(lab.data), tree(lab.outside)


@pytest.mark.parametrize("attack", list(WRITES))
def test_cant_change_read_only_tree(lab: Lab, attack: str) -> None:
    code = lab.probe(WRITES[attack] + "\nprint('DONE')")
    control = lab.control(code)
    assert got(control, "DONE"), control.stdout + control.stderr
    lab.refused(code, "RulePermissionError", watch=lambda: _watch_data(lab))


def test_cant_write_read_only_file_with_fileio_given_a_path_object(lab: Lab) -> None:
    # The "open" event of io.FileIO carries the path object: the guard judges nothing.
    code = lab.probe(
        f"""
        import io, pathlib
        io.FileIO(pathlib.Path({CONFIG}), 'w').write(b'pwned')
        print('DONE')
        """
    )
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RulePermissionError", watch=lambda: _watch_data(lab))


@pytest.mark.parametrize(
    "call",
    [
        "os.chmod(fd, 0o666)",
        "os.fchmod(fd, 0o666)",
        "os.utime(fd, (1, 1))",
        "os.setxattr(fd, 'user.mark', b'pwned')",
    ],
    ids=["chmod_fd", "fchmod", "utime_fd", "setxattr_fd"],
)
def test_cant_change_read_only_file_through_read_only_descriptor(lab: Lab, call: str) -> None:
    # A descriptor opened for reading is enough for the kernel to change the mode, times
    # and attributes of a file one owns; the guard does not judge descriptors.
    code = lab.probe(
        f"""
        fd = os.open({CONFIG}, os.O_RDONLY)
        {call}
        print('DONE')
        """
    )
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RulePermissionError", watch=lambda: _watch_data(lab))


def _make_database(lab: Lab) -> None:
    with sqlite3.connect(lab.data / "db.sqlite") as db:
        db.execute("create table t (v text)")
    db.close()


def test_cant_write_read_only_database_with_sqlite3(lab: Lab) -> None:
    lab.setup(lambda: _make_database(lab))
    code = lab.probe(
        """
        db = sqlite3.connect(DATA + '/db.sqlite')
        db.execute("insert into t values ('pwned')")
        db.commit()
        print('DONE')
        """,
        imports="os, sqlite3",
    )
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RulePermissionError", watch=lambda: _watch_data(lab))


def test_cant_write_read_only_database_with_smuggled_mode_ro(lab: Lab) -> None:
    # The guard looks for "mode=ro" anywhere in the query; SQLite reads the mode parameter
    # and ignores the unknown "x".
    lab.setup(lambda: _make_database(lab))
    code = lab.probe(
        """
        db = sqlite3.connect('file:' + DATA + '/db.sqlite?mode=rw&x=mode=ro', uri=True)
        db.execute("insert into t values ('pwned')")
        db.commit()
        print('DONE')
        """,
        imports="os, sqlite3",
    )
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RulePermissionError", watch=lambda: _watch_data(lab))


def test_cant_write_read_only_file_through_os_open_dir_fd(lab: Lab) -> None:
    # os.open's audit event has no dir_fd: the name is judged against the working
    # directory (out/, writable), the kernel opens it in data/.
    code = lab.probe(
        """
        base = os.open(DATA, os.O_RDONLY)
        os.chdir(OUT)
        fd = os.open('config.txt', os.O_WRONLY | os.O_APPEND, dir_fd=base)
        os.write(fd, b'pwned')
        print('DONE')
        """
    )
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RulePermissionError", watch=lambda: _watch_data(lab))


@pytest.mark.parametrize("opener", ["os_open", "open_w"])
def test_cant_write_read_only_file_after_relative_chdir(lab: Lab, opener: str) -> None:
    # os.chdir('../data') from out/: later relative names must be judged in data/.
    write = {
        "os_open": "os.write(os.open('config.txt', os.O_WRONLY | os.O_APPEND), b'pwned')",
        "open_w": "open('config.txt', 'w').write('pwned')",
    }[opener]
    code = lab.probe(
        f"""
        os.chdir(OUT)
        os.chdir('../data')
        {write}
        print('DONE')
        """
    )
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RulePermissionError", watch=lambda: _watch_data(lab))
