"""Attack class 2: traversal out of the exposed tree: ``..``, absolute paths, symlinks, hard
links, ``dir_fd`` forms, ``/proc/self/...``, and the guard's caches of all of these."""

from __future__ import annotations

import os
import sqlite3

import pytest
from escapelab import Lab, got, tree

from pysandboxes._host.select import unavailable_reason

READ_OS_OPEN = "fd = os.open({path}, os.O_RDONLY)\nprint('GOT', os.read(fd, 200))"


def test_cant_read_secret_through_dotdot_from_exposed_dir(lab: Lab) -> None:
    code = lab.probe("print('GOT', open('data/../../outside/secret.txt').read())")
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_read_secret_through_dotdot_with_os_open(lab: Lab) -> None:
    code = lab.probe(READ_OS_OPEN.format(path="DATA + '/a/b/../../../../outside/secret.txt'"))
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_read_secret_through_absolute_path(lab: Lab) -> None:
    code = lab.probe("print('GOT', open(SECRET_FILE).read())")
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


@pytest.mark.parametrize("api", ["open", "os_open", "fileio"])
def test_cant_read_secret_through_symlink_in_exposed_dir(lab: Lab, api: str) -> None:
    lab.setup(lambda: os.symlink(lab.secret_file, lab.data / "innocent.txt"))
    read = {
        "open": "print('GOT', open('data/innocent.txt').read())",
        "os_open": READ_OS_OPEN.format(path="'data/innocent.txt'"),
        "fileio": "import io\nprint('GOT', io.FileIO('data/innocent.txt').read())",
    }[api]
    code = lab.probe(read)
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_read_secret_through_relative_symlink_in_exposed_dir(lab: Lab) -> None:
    lab.setup(lambda: os.symlink("../../outside/secret.txt", lab.data / "rel.txt"))
    code = lab.probe(READ_OS_OPEN.format(path="'data/rel.txt'"))
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_read_secret_through_symlinked_dir_and_dotdot(lab: Lab) -> None:
    # data/sublink -> outside/sub, so data/sublink/../secret.txt is outside/secret.txt for
    # the kernel (a lexical clean-up would say data/secret.txt).
    lab.setup(lambda: os.symlink(lab.outside / "sub", lab.data / "sublink"))
    code = lab.probe(READ_OS_OPEN.format(path="'data/sublink/../secret.txt'"))
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_read_secret_through_symlink_planted_by_the_program(lab: Lab) -> None:
    code = lab.probe(
        """
        os.symlink(OUTSIDE, OUT + '/door')
        print('GOT', open(OUT + '/door/secret.txt').read())
        """
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError", watch=lambda: lab.state()["outside"])


def test_cant_read_secret_through_symlink_planted_after_a_check(lab: Lab) -> None:
    # The guard caches the real path of directories: judging out/door/... while "door"
    # does not exist must not let the name keep that meaning once it is a symlink.
    code = lab.probe(
        """
        os.path.exists(OUT + '/door/secret.txt')
        os.symlink(OUTSIDE, OUT + '/door')
        fd = os.open(OUT + '/door/secret.txt', os.O_RDONLY)
        print('GOT', os.read(fd, 200))
        """
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError", watch=lambda: lab.state()["outside"])


def test_cant_read_secret_through_hard_linked_relative_symlink(lab: Lab) -> None:
    # A relative symlink means something else once hard-linked into another directory:
    # out/a/door -> ../../outside is project/outside (absent, exposed); the same link,
    # linked (not followed) as out/door, names the real outside. And os.link does not
    # make the guard forget what it resolved for out/door/... before.
    lab.rules("expose-rw=.")
    code = lab.probe(
        """
        os.mkdir(OUT + '/a')
        os.symlink('../../outside', OUT + '/a/door')
        os.path.exists(OUT + '/door/secret.txt')
        os.link(OUT + '/a/door', OUT + '/door', follow_symlinks=False)
        fd = os.open(OUT + '/door/secret.txt', os.O_RDONLY)
        print('GOT', os.read(fd, 200))
        """
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError", watch=lambda: lab.state()["outside"])


def test_cant_hard_link_outside_file_into_writable_dir(lab: Lab) -> None:
    code = lab.probe(
        """
        os.link(SECRET_FILE, OUT + '/mine.txt')
        print('GOT', open(OUT + '/mine.txt').read())
        """
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_read_secret_through_dir_fd_and_dotdot(lab: Lab) -> None:
    code = lab.probe(
        """
        base = os.open(DATA, os.O_RDONLY)
        fd = os.open('../../outside/secret.txt', os.O_RDONLY, dir_fd=base)
        print('GOT', os.read(fd, 200))
        """
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


@pytest.mark.parametrize("api", ["stat", "access", "readlink", "open_opener"])
def test_cant_reach_secret_through_dir_fd_forms(lab: Lab, api: str) -> None:
    lab.setup(lambda: os.symlink(f"/nowhere/{lab.secret}", lab.outside / "pointer"))
    action = {
        "stat": "print('GOT', os.stat('../../outside/secret.txt', dir_fd=base).st_ino)",
        "access": "print('GOT', os.access('../../outside/secret.txt', os.R_OK, dir_fd=base))",
        "readlink": "print('GOT', os.readlink('../../outside/pointer', dir_fd=base))",
        "open_opener": (
            "opener = lambda name, flags: os.open(name, flags, dir_fd=base)\n"
            "print('GOT', open('../../outside/secret.txt', opener=opener).read())"
        ),
    }[api]
    code = lab.probe(f"base = os.open(DATA, os.O_RDONLY)\n{action}")
    control = lab.control(code)
    assert "GOT" in control.stdout, control.stderr
    assert "GOT False" not in control.stdout
    result = lab.run_sandboxed(code)
    output = result.stdout + result.stderr
    assert lab.secret not in output
    inode = str(os.stat(lab.secret_file).st_ino)
    assert f"GOT {inode}" not in output, output
    assert "GOT True" not in output, output


def test_cant_read_secret_through_os_open_dir_fd_judged_against_cwd(lab: Lab) -> None:
    # The "open" audit event of os.open carries no dir_fd: the guard judges the name
    # against the working directory. From project/data/a the name ../outside/... is
    # project/data/outside/... (exposed, absent); from the directory fd of project/ it is
    # the real outside.
    lab.rules("expose-ro=.")
    code = lab.probe(
        """
        base = os.open(PROJECT, os.O_RDONLY)
        os.chdir(DATA + '/a')
        fd = os.open('../outside/secret.txt', os.O_RDONLY, dir_fd=base)
        print('GOT', os.read(fd, 200))
        """
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_read_secret_after_relative_chdir(lab: Lab) -> None:
    # After os.chdir('../..'), relative names must be judged from the new directory.
    lab.rules("expose-ro=.")
    code = lab.probe(
        """
        os.chdir(DATA + '/a/b')
        os.chdir('../..')
        print('GOT', open('../../outside/secret.txt').read())
        """
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_read_secret_after_relative_chdir_with_os_open(lab: Lab) -> None:
    code = lab.probe(
        """
        os.chdir(DATA + '/a/b')
        os.chdir('../..')
        fd = os.open('../../outside/secret.txt', os.O_RDONLY)
        print('GOT', os.read(fd, 200))
        """
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_truncate_outside_file_after_relative_chdir(lab: Lab) -> None:
    # open(..., 'w') is re-checked on its descriptor, but O_TRUNC has already run then.
    code = lab.probe(
        """
        os.makedirs(OUT + '/a/b')
        os.chdir(OUT + '/a/b')
        os.chdir('../..')
        open('../../outside/secret.txt', 'w').close()
        print('DONE')
        """
    )
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RuleFileNotFoundError", watch=lambda: lab.state()["outside"])


def test_cant_read_secret_through_proc_self_cwd_dotdot(lab: Lab) -> None:
    code = lab.probe(READ_OS_OPEN.format(path="'/proc/self/cwd/../outside/secret.txt'"))
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_read_secret_through_proc_self_root(lab: Lab) -> None:
    code = lab.probe(READ_OS_OPEN.format(path="'/proc/self/root' + SECRET_FILE"))
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_read_secret_through_proc_thread_self_root(lab: Lab) -> None:
    code = lab.probe(READ_OS_OPEN.format(path="'/proc/thread-self/root' + SECRET_FILE"))
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_read_secret_through_proc_self_fd_of_exposed_dir(lab: Lab) -> None:
    code = lab.probe(
        """
        base = os.open(DATA, os.O_RDONLY)
        print('GOT', open(f'/proc/self/fd/{base}/../../outside/secret.txt').read())
        """
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_reopen_read_only_descriptor_for_writing_through_proc_self_fd(lab: Lab) -> None:
    code = lab.probe(
        """
        fd = os.open(DATA + '/config.txt', os.O_RDONLY)
        with open(f'/proc/self/fd/{fd}', 'w') as handle:
            handle.write('pwned')
        print('DONE')
        """
    )
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RulePermissionError")


def test_cant_write_read_only_file_through_reused_proc_self_fd_number(lab: Lab) -> None:
    # /proc/self/fd/N/ names whatever directory N is now; the guard must not keep what it
    # resolved when N was the read-write directory.
    code = lab.probe(
        """
        rw = os.open(OUT, os.O_RDONLY)
        os.path.exists(f'/proc/self/fd/{rw}/config.txt')
        os.close(rw)
        ro = os.open(DATA, os.O_RDONLY)
        assert ro == rw
        fd = os.open(f'/proc/self/fd/{ro}/config.txt', os.O_WRONLY | os.O_APPEND)
        os.write(fd, b'pwned')
        print('DONE')
        """
    )
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RulePermissionError")


def test_cant_write_read_only_file_through_proc_self_cwd_after_chdir(lab: Lab) -> None:
    code = lab.probe(
        """
        os.chdir(OUT)
        os.path.exists('/proc/self/cwd/config.txt')
        os.chdir(DATA)
        fd = os.open('/proc/self/cwd/config.txt', os.O_WRONLY | os.O_APPEND)
        os.write(fd, b'pwned')
        print('DONE')
        """
    )
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RulePermissionError")


def test_cant_chdir_into_hidden_dir_then_read_relative(lab: Lab) -> None:
    code = lab.probe(
        """
        os.chdir(OUTSIDE)
        print('GOT', open('secret.txt').read())
        """
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


# -- fail closed: a name the guard cannot resolve is refused, saying why ---------------------
# (ENAMETOOLONG: test_ignore.py, a link beyond PATH_MAX.)


def test_a_chain_of_too_many_links_is_refused_with_eloop(lab: Lab) -> None:
    # 41 links: the guard stopped following at 40 and judged the last link as named.
    def chain() -> None:
        os.symlink("config.txt", lab.data / "l40")
        for i in range(40):
            os.symlink(f"l{i + 1}", lab.data / f"l{i}")

    lab.setup(chain)
    code = lab.probe("print('GOT', open('data/l0').read())")
    control = lab.control(code)
    assert "Too many levels of symbolic links" in control.stdout, control.stdout
    result = lab.refused(code, "RulePermissionError", watch=lambda: lab.state()["project"])
    assert "ELOOP" in result.stdout, result.stdout


def test_an_ancestor_the_kernel_will_not_show_is_refused_with_eacces(lab: Lab) -> None:
    # /proc/<ppid>/root of the launcher, outside the sandbox: Landlock keeps the sandbox
    # from reading the link (EACCES). Inside an exposure of /proc, it was judged as named.
    reason = unavailable_reason("landlock")
    if reason is not None:
        pytest.skip(f"landlock cannot run here: {reason}")
    lab.rules("expose-ro=./data", "expose-ro=/proc", "os-sandbox=landlock")
    code = lab.probe("print('GOT', open(f'/proc/{os.getppid()}/root' + SECRET_FILE).read())")
    assert lab.secret in lab.control(code).stdout
    result = lab.refused(code, "RulePermissionError")
    assert "EACCES" in result.stdout, result.stdout


def test_a_malformed_percent_escape_in_a_sqlite_uri_is_refused(lab: Lab) -> None:
    # SQLite keeps "%zz" as written; a decoder that guessed could judge another name.
    def database() -> None:
        sqlite3.connect(lab.data / "x%zz.db").close()

    lab.setup(database)
    code = lab.probe(
        "db = sqlite3.connect('file:data/x%zz.db?mode=ro', uri=True)\n"
        "print('GOT', db.execute('select 1').fetchall())",
        imports="os, sqlite3",
    )
    assert got(lab.control(code), "GOT [(1,)]")
    result = lab.refused(code, "RulePermissionError")
    assert "a '%' not followed by two hex digits" in result.stdout, result.stdout


def test_a_directory_whose_path_the_kernel_cannot_write_out_is_refused(lab: Lab) -> None:
    # Made and reached one level at a time through descriptors, a directory whose real
    # path is longer than PATH_MAX: /proc/self/fd/<n> cannot show where it is
    # (ENAMETOOLONG), and the names judged through it were taken as written. (The probe
    # removes what it made: nothing else can name it.)
    code = lab.probe(
        """
        import shutil
        fd = os.open(OUT, os.O_RDONLY)
        for _ in range(24):
            os.mkdir('d' * 200, dir_fd=fd)
            fd = os.open('d' * 200, os.O_RDONLY, dir_fd=fd)
        listed = os.listdir(fd)
        shutil.rmtree(OUT + '/' + 'd' * 200)
        print('GOT', listed)
        """
    )
    assert got(lab.control(code), "GOT []")
    result = lab.refused(code, "RulePermissionError", watch=lambda: tree(lab.outside))
    assert "ENAMETOOLONG" in result.stdout, result.stdout
