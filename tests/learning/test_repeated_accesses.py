"""A repeated access is recorded once, cheaply; a different one after it still is.

The Learning enforcer remembers what it recorded (``learned``, ``learned_modules``), and
the guards let the repeats through without judging them again. What that remembers must
change with what the program does: another path, another access, a symbolic link
pointing elsewhere, another variable, another module each give an event of their own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from learnlab import granted, sent_events

from pysandboxes._inside.enforce import FileAccess, Messages
from pysandboxes._inside.guards.env import watch_environ
from pysandboxes._inside.guards.files import FileGuard
from pysandboxes._inside.guards.paths import Resolver
from pysandboxes._inside.recorder import Learning
from pysandboxes._policy.judge import FileJudge
from pysandboxes._policy.model import Access, Verdict

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    yield read_end, write_end
    os.close(read_end)
    os.close(write_end)


def _events(read_end: int) -> list[tuple[str, str, str]]:
    return [(event.family, event.name, event.access) for event in sent_events(read_end)]


def _learning(write_end: int, project: Path) -> Learning:
    return Learning(write_end, Messages(".py-sandboxes", str(project)), str(project))


def test_a_read_repeated_is_recorded_once_and_another_access_after_it_is_too(
    pipe: tuple[int, int], tmp_path: Path
) -> None:
    learning = _learning(pipe[1], tmp_path)
    verdict = Verdict(False, None, hidden=True, fix=f"expose-ro={tmp_path}/a.txt")
    read = FileAccess("a.txt", f"{tmp_path}/a.txt", Access.READ, "open")
    for _ in range(1000):
        learning.refuse_file(read, verdict)
    assert (read.real, Access.READ, "open") in learning.learned
    listing = FileAccess("a.txt", f"{tmp_path}/a.txt", Access.READ, "os.listdir")
    other = FileAccess("b.txt", f"{tmp_path}/b.txt", Access.READ, "open")
    write = FileAccess("a.txt", f"{tmp_path}/a.txt", Access.WRITE, "open")
    for report in (listing, other, write, read):
        learning.refuse_file(report, verdict)
    assert _events(pipe[0]) == [
        ("file", f"{tmp_path}/a.txt", "read"),
        ("file", f"{tmp_path}/a.txt", "list"),
        ("file", f"{tmp_path}/b.txt", "read"),
        ("file", f"{tmp_path}/a.txt", "create"),  # a.txt does not exist: a creation
    ]
    # A write's event depends on whether the file exists: never let through unjudged.
    assert all(access is not Access.WRITE for _, access, _ in learning.learned)


def test_a_file_guard_learning_sees_a_symlink_the_program_swapped_after_many_reads(
    pipe: tuple[int, int], tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    (tmp_path / "link").symlink_to("a.txt")
    learning = _learning(pipe[1], tmp_path)
    guard = FileGuard(FileJudge([], []), learning, Resolver())
    for _ in range(500):
        assert guard.check(f"{tmp_path}/link", Access.READ, "open") == f"{tmp_path}/a.txt"
    # The program swaps it: its rename is judged (and learned) before it happens, which
    # forgets where every name led; the next read leads to b.txt.
    (tmp_path / "new").symlink_to("b.txt")
    guard.check(f"{tmp_path}/link", Access.CREATE, "os.replace", follow=False)
    os.replace(tmp_path / "new", tmp_path / "link")
    for _ in range(500):
        assert guard.check(f"{tmp_path}/link", Access.READ, "open") == f"{tmp_path}/b.txt"
    assert [event for event in _events(pipe[0]) if event[2] == "read"] == [
        ("file", f"{tmp_path}/a.txt", "read"),
        ("file", f"{tmp_path}/b.txt", "read"),
    ]


def test_a_program_learning_records_the_new_target_of_a_swapped_link_after_a_change(
    sb: Runner, project: Path
) -> None:
    # Many reads and stats through a link; another process swaps it (unseen); the
    # program then writes a file, which forgets where every name led; more reads: the
    # new target is learned too, whatever the learning run skipped for the repeats.
    (project / "a.txt").write_text("a")
    (project / "b.txt").write_text("b")
    (project / "link").symlink_to("a.txt")
    swap = "import os; os.remove('link'); os.symlink('b.txt', 'link')"
    (project / "app.py").write_text(
        "import os, subprocess, sys\n"
        "for _ in range(300):\n"
        "    open('link').read()\n"
        "    os.stat('link')\n"
        f"subprocess.run([sys.executable, '-c', {swap!r}], check=True)\n"
        "open('out.txt', 'w').close()\n"
        "for _ in range(300):\n"
        "    assert open('link').read() == 'b'\n"
        "    os.stat('link')\n"
        "print('done')\n"
    )
    result = sb("app.py")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "done\n"
    rules = granted(project / ".py-sandboxes")
    assert "expose-ro=./a.txt" in rules
    assert "expose-ro=./b.txt" in rules


def test_an_enforcing_guard_lets_nothing_through_unjudged() -> None:
    from pysandboxes._inside.enforce import Enforcing, Recording

    for enforcer in (Enforcing, Recording):
        assert enforcer.learned == frozenset()
        assert enforcer.learned_modules == frozenset()


class _Counted:
    count = 0


def test_a_variable_read_many_times_is_reported_once_and_another_after_it_is_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reported: list[str] = []
    counted = _Counted()
    environ_class = os.environ.__class__

    def report(name: str) -> _Counted | bool:
        reported.append(name)
        if name == "COUNTED":  # the decision log: its entry counts each read
            counted.count += 1
            return counted
        return name != "LOGGED_EACH_TIME"

    for name in ("FIRST", "SECOND", "LOGGED_EACH_TIME", "COUNTED"):
        monkeypatch.setenv(name, "1")
    try:
        watch_environ(report)
        for _ in range(100):
            assert os.environ.get("FIRST") == "1"
            assert os.environ["LOGGED_EACH_TIME"] == "1"
            assert os.getenv("COUNTED") == "1"
        assert os.environ.get("SECOND") == "1"
        snapshot = dict(os.environ)  # a scan: its reads are no news
        assert snapshot["FIRST"] == "1"
        os.environ.get("FIRST")  # after a scan: asked again (the recorder knows it)
        os.environ.get("FIRST")  # and then no more
        os.environ["COUNTED"] = "set by the program"  # its own: no news from now on
        assert os.environ.get("COUNTED") == "set by the program"
    finally:
        os.environ.__class__ = environ_class
        environb = getattr(os, "environb", None)
        if environb is not None:
            environb.__class__ = environb.__class__.__bases__[0]
    assert reported == ["FIRST", "LOGGED_EACH_TIME", "COUNTED"] + ["LOGGED_EACH_TIME"] * 99 + [
        "SECOND",
        "FIRST",
    ]
    assert counted.count == 100


def test_a_program_repeating_its_accesses_learns_each_once(sb: Runner, project: Path) -> None:
    (project / "data.txt").write_text("d")
    (project / "other.txt").write_text("o")
    (project / "app.py").write_text(
        "import os, sys\n"
        "for _ in range(500):\n"
        "    open('data.txt').read()\n"
        "    os.stat('data.txt')\n"
        "    os.environ.get('FIRST_VAR')\n"
        "for _ in range(50):\n"
        "    sys.modules.pop('colorsys', None)\n"
        "    import colorsys\n"
        "open('other.txt').read()\n"
        "os.environ.get('SECOND_VAR')\n"
        "import shlex\n"  # not among the template's modules
        "print('done')\n"
    )
    result = sb("app.py", env={"FIRST_VAR": "1", "SECOND_VAR": "2"})
    assert result.returncode == 0, result.stderr
    assert result.stdout == "done\n"
    rules = granted(project / ".py-sandboxes")
    assert sorted(rules) == [
        "env=FIRST_VAR=${FIRST_VAR}",
        "env=SECOND_VAR=${SECOND_VAR}",
        "expose-ro=./data.txt",
        "expose-ro=./other.txt",
        "python-import=colorsys",
        "python-import=os",
        "python-import=shlex",
    ]
    text = (project / ".py-sandboxes").read_text()
    assert "expose-ro=./data.txt  # learned: read by app.py:3" in text  # the first read's line
    assert "python-import=colorsys  # learned: imported by app.py:8" in text
