"""The file guard's per-access caches kept past a change of what they cache.

The guard keeps the working directory between accesses, the names a stat or an open may
skip judging again (absolute, and relative to that directory), and the directories every
entry of which the rules expose. Each probe here fills a cache, changes what it caches (a
``chdir``, an ``fchdir``, a symlink swapped in), and asks again: the new answer must come.

Rules: ``expose-ro=.`` with ``ignore=data/a/secret.txt`` (a read-only tree, where the
working directory is kept), or ``expose-rw=./out`` (a writable one, where it is not).
``data/a/secret.txt`` holds the secret; ``data/a/b/secret.txt`` is harmless.
"""

from __future__ import annotations

import pytest
from escapelab import Lab, got

#: The same relative name, allowed from data/a/b and hidden from data/a.
FILL = """
os.chdir(DATA + '/a/b')
for _ in range(3):
    os.stat('secret.txt')
    open('secret.txt').read()
"""
MOVES = {  # to the parent directory
    "chdir": "os.chdir('..')",
    "fchdir": "os.fchdir(os.open('..', os.O_RDONLY))",
    "pathlib": "import pathlib\nos.chdir(pathlib.Path('..'))",
}


def _nested_secret(lab: Lab) -> None:
    lab.rules("expose-ro=.", "ignore=data/a/secret.txt")

    def prepare() -> None:
        (lab.data / "a" / "secret.txt").write_text(lab.secret + "\n")
        (lab.data / "a" / "b" / "secret.txt").write_text("harmless\n")

    lab.setup(prepare)


@pytest.mark.parametrize("move", sorted(MOVES))
def test_cant_read_hidden_file_by_a_name_judged_before_a_change_of_directory(
    lab: Lab, move: str
) -> None:
    _nested_secret(lab)
    code = lab.probe(FILL + MOVES[move] + "\nprint('GOT', open('secret.txt').read())")
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


@pytest.mark.parametrize("move", sorted(MOVES))
def test_cant_stat_hidden_file_by_a_name_judged_before_a_change_of_directory(
    lab: Lab, move: str
) -> None:
    _nested_secret(lab)
    code = lab.probe(FILL + MOVES[move] + "\nprint('GOT', os.stat('secret.txt').st_size)")
    assert got(lab.control(code), "GOT ")
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_read_hidden_file_by_a_name_judged_in_another_thread_before_chdir(
    lab: Lab,
) -> None:
    # The directory is kept for every thread: one thread's chdir is another's too.
    _nested_secret(lab)
    code = lab.probe(
        FILL
        + """
import threading
thread = threading.Thread(target=os.chdir, args=('..',))
thread.start()
thread.join()
print('GOT', open('secret.txt').read())
"""
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_read_secret_by_a_relative_name_swapped_to_a_symlink(lab: Lab) -> None:
    # A writable directory: the name is judged again at every access, the link followed.
    code = lab.probe(
        """
        os.chdir(OUT)
        open('note.txt', 'w').write('mine')
        for _ in range(3):
            os.stat('note.txt')
            open('note.txt').read()
        os.remove('note.txt')
        os.symlink(SECRET_FILE, 'note.txt')
        print('GOT', open('note.txt').read())
        """
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError", watch=lambda: lab.state()["outside"])


def test_cant_list_outside_directory_through_a_listed_one_swapped_to_a_symlink(
    lab: Lab,
) -> None:
    # The directories whose every entry is exposed are kept by their real path: the
    # swapped name resolves elsewhere, and that is judged.
    code = lab.probe(
        """
        os.mkdir(OUT + '/d')
        open(OUT + '/d/mine.txt', 'w').close()
        for _ in range(3):
            os.listdir(OUT + '/d')
        os.remove(OUT + '/d/mine.txt')
        os.rmdir(OUT + '/d')
        os.symlink(OUTSIDE, OUT + '/d')
        print('GOT', os.listdir(OUT + '/d'))
        """
    )
    assert got(lab.control(code), "secret.txt")
    lab.refused(code, "RuleFileNotFoundError", watch=lambda: lab.state()["outside"])


@pytest.mark.parametrize("move", sorted(MOVES))
def test_cant_list_outside_directory_by_a_name_listed_before_a_change_of_directory(
    lab: Lab, move: str
) -> None:
    # data/a/b is a directory exposed whole; from data, the name b is a link to outside.
    lab.rules("expose-ro=.")
    lab.setup(lambda: (lab.data / "b").symlink_to(lab.outside))
    listed = "os.chdir(DATA + '/a')\nfor _ in range(3):\n    os.listdir('b')\n"
    code = lab.probe(listed + MOVES[move] + "\nprint('GOT', os.listdir('b'))")
    assert got(lab.control(code), "secret.txt")
    lab.refused(code, "RuleFileNotFoundError")


#: The last look of an ``open`` taken round its ``_before`` (``guards.shortcuts``), run in
#: a plain interpreter: a stand-in for ``open`` changes directory while it "opens", as
#: another thread of the program could, and a hook records what the guards are asked.
LAST_LOOK = """
import os, sys
from pysandboxes._inside.guards.shortcuts import seen_open
from pysandboxes._inside.guards.workdir import WorkingDirectory
from pysandboxes._policy.model import Access

asked = []
def hook(event, args):
    if event == 'pysandboxes.opened':
        asked.append(args[1])
        if REFUSE:
            raise PermissionError('refused')
sys.addaudithook(hook)

class Handle:
    closed = False
    def fileno(self):
        return 0
    def close(self):
        self.closed = True

workdir = WorkingDirectory(os.getcwd)
workdir.keep = lambda directory: True
workdir.current()
workdir.seen.names.add(('data/file.txt', Access.READ))
handle = Handle()
def stand_in(file, mode='r', *args, **kwargs):
    if MOVE:
        workdir.notice(False)  # what the chdir wrapper does
        workdir.notice(True)
    return handle
def before(*args, **kwargs):
    raise AssertionError('the name was seen: _before is not asked')
wrapped = seen_open(stand_in, before, {'__builtins__': __builtins__}, workdir, Access.READ)
try:
    print('RESULT', wrapped('data/file.txt') is handle, asked, handle.closed)
except PermissionError:
    print('RESULT refused', asked, handle.closed)
"""


@pytest.mark.parametrize(
    ("move", "refuse", "expected"),
    [
        (False, False, "RESULT True [] False"),
        (True, False, "RESULT True ['data/file.txt'] False"),
        (True, True, "RESULT refused ['data/file.txt'] True"),
    ],
)
def test_cant_open_a_judged_name_in_another_directory_changed_to_while_it_opened(
    move: bool, refuse: bool, expected: str
) -> None:
    # A name seen is opened without its _before; when the directory changed meanwhile,
    # what was opened goes to the hook, which may refuse it: the file is then closed.
    import subprocess
    import sys

    script = f"MOVE, REFUSE = {move}, {refuse}\n" + LAST_LOOK
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert expected in done.stdout
