"""Many files below one folder are one rule; companions and files to be made again are
learned with the file the program named; the summary stays short and says the truth."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pysandboxes._host.learning.conclude import Summary, _summary
from pysandboxes._host.learning.filerules import GROUP_AT
from pysandboxes._host.learning.rules import Context, learn
from pysandboxes._wire.codec import Event, read_events
from pysandboxes._wire.events import MAX_EVENTS, encode_event


def _context(tmp_path: Path, home: str = "/nonexistent-home") -> Context:
    return Context(
        str(tmp_path),
        str(tmp_path),
        home,
        (),
        frozenset(),
        frozenset({str(tmp_path / ".py-sandboxes")}),
    )


def _folder(root: Path, count: int, name: str = "d") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    for i in range(count):
        (folder / f"f{i}.txt").write_text(str(i))
    return folder


def _reads(folder: Path, count: int) -> list[Event]:
    return [
        Event("file", str(folder / f"f{i}.txt"), "read", "", 0, (), "app.py:3")
        for i in range(count)
    ]


def test_reading_a_data_folder_learns_the_folder_with_its_count(tmp_path: Path) -> None:
    folder = _folder(tmp_path, 2000)
    learned = learn(_reads(folder, 2000), _context(tmp_path))
    assert [rule.line for rule in learned.rules] == ["expose-ro=./d"]
    assert learned.rules[0].note.startswith("learned: 2000 files below it read, first read by")


def test_a_few_files_of_a_folder_stay_files(tmp_path: Path) -> None:
    folder = _folder(tmp_path, GROUP_AT - 1)
    lines = [r.line for r in learn(_reads(folder, GROUP_AT - 1), _context(tmp_path)).rules]
    assert len(lines) == GROUP_AT - 1
    assert all(line.startswith("expose-ro=./d/f") for line in lines)


def test_a_tree_of_many_folders_is_one_rule(tmp_path: Path) -> None:
    events: list[Event] = []
    for part in range(GROUP_AT):
        events += _reads(_folder(tmp_path / "data", GROUP_AT, f"p{part}"), GROUP_AT)
    learned = learn(events, _context(tmp_path))
    assert [rule.line for rule in learned.rules] == ["expose-ro=./data"]
    assert f"{GROUP_AT * GROUP_AT} files below it" in learned.rules[0].note


def test_reading_many_files_never_makes_their_folder_writable(tmp_path: Path) -> None:
    folder = _folder(tmp_path, 40)
    events = [*_reads(folder, 40), Event("file", str(folder / "f0.txt"), "write")]
    lines = [rule.line for rule in learn(events, _context(tmp_path)).rules]
    assert lines == ["expose-ro=./d", "expose-rw=./d/f0.txt"]


def test_cant_learn_a_home_or_the_system_through_many_files(tmp_path: Path) -> None:
    # A home's files read one by one stay files: the home is never learned whole.
    home = _folder(tmp_path, 30, "home")
    context = _context(tmp_path / "project", home=str(home))
    (tmp_path / "project").mkdir()
    lines = [rule.line for rule in learn(_reads(home, 30), context).rules]
    assert len(lines) == 30
    assert "expose-ro=~" not in lines
    etc = [Event("file", f"/etc/{name}", "read") for name in ("passwd", "group", "hostname")]
    etc += [Event("file", str(p), "read") for p in sorted(Path("/etc").glob("*.conf"))[:20]]
    assert "expose-ro=/etc" not in [rule.line for rule in learn(etc, context).rules]


def test_cant_learn_a_folder_holding_a_secret_through_many_files(tmp_path: Path) -> None:
    folder = _folder(tmp_path, 30)
    (folder / "id_rsa").write_text("key")
    lines = [rule.line for rule in learn(_reads(folder, 30), _context(tmp_path)).rules]
    assert "expose-ro=./d" not in lines
    assert len(lines) == 30


def test_the_folder_of_the_rule_file_is_never_learned_whole(tmp_path: Path) -> None:
    for i in range(30):
        (tmp_path / f"in{i}.csv").write_text("1")
    events = [Event("file", str(tmp_path / f"in{i}.csv"), "read") for i in range(30)]
    lines = [rule.line for rule in learn(events, _context(tmp_path)).rules]
    assert "expose-ro=." not in lines
    assert len(lines) == 30


def test_a_database_is_learned_with_its_journal_wal_and_shared_memory(tmp_path: Path) -> None:
    # SQLite makes them in C, where the Python layer sees nothing.
    with sqlite3.connect(tmp_path / "app.db") as db:
        db.execute("CREATE TABLE t (x)")
    db.close()
    events = [Event("file", str(tmp_path / "app.db"), "create", where="app.py:4")]
    lines = [rule.line for rule in learn(events, _context(tmp_path)).rules]
    assert lines == [
        "expose-rw=./app.db",
        "expose-rw=./app.db-journal",
        "expose-rw=./app.db-shm",
        "expose-rw=./app.db-wal",
    ]


def test_a_file_that_is_not_a_database_gets_no_journal(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("SQLite format 2, not 3")
    events = [Event("file", str(tmp_path / "notes.txt"), "create")]
    assert [r.line for r in learn(events, _context(tmp_path)).rules] == ["expose-rw=./notes.txt"]


def test_a_dbm_file_is_learned_with_its_companions(tmp_path: Path) -> None:
    for suffix in (".dat", ".dir"):
        (tmp_path / f"cache{suffix}").write_text("")
    events = [Event("file", str(tmp_path / f"cache{s}"), "create") for s in (".dat", ".dir")]
    lines = [rule.line for rule in learn(events, _context(tmp_path)).rules]
    assert lines == ["expose-rw=./cache.bak", "expose-rw=./cache.dat", "expose-rw=./cache.dir"]


def test_files_made_then_removed_beside_the_rule_file_are_learned(tmp_path: Path) -> None:
    # A clean checkout has neither: the next run makes them again.
    events = [
        Event("file", str(tmp_path / "app.log"), "create"),
        Event("file", str(tmp_path / "lock.tmp"), "create"),
        Event("file", str(tmp_path / "lock.tmp"), "delete"),
    ]
    lines = [rule.line for rule in learn(events, _context(tmp_path)).rules]
    assert lines == ["expose-rw=./app.log", "expose-rw=./lock.tmp"]


def test_a_semaphore_learns_shared_memory(tmp_path: Path) -> None:
    events = [Event("file", "/dev/shm/sem.mp", "create", where="app.py:9")]
    assert [r.line for r in learn(events, _context(tmp_path)).rules] == ["expose-rw=/dev/shm"]


def test_the_summary_shows_a_few_rules_of_each_kind(tmp_path: Path) -> None:
    events = [Event("import", f"module{i}", "module") for i in range(40)]
    summary: Summary = _summary(learn(events, _context(tmp_path)), [], ".py-sandboxes")
    assert len(summary.rows) == 13
    assert summary.rows[-1][1] == "... and 28 more import rules"
    assert summary.title == "python-sb learned 40 rule(s) for .py-sandboxes"


def test_events_past_the_limit_are_counted_apart_from_malformed_ones() -> None:
    line = encode_event(Event("import", "csv", "module"))
    events, malformed, beyond = read_events([line * (MAX_EVENTS + 7) + b"{nonsense}\n"])
    assert (len(events), malformed, beyond) == (MAX_EVENTS, 0, 8)
    events, malformed, beyond = read_events([line + b"{nonsense}\n"])
    assert (len(events), malformed, beyond) == (1, 1, 0)
