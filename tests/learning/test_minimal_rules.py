"""Learned rules are minimal: no directory collapse, one net rule per name, no values."""

from __future__ import annotations

import os
from pathlib import Path

from pysandboxes._host.learning.filerules import display_path
from pysandboxes._host.learning.rules import Context, import_group, learn
from pysandboxes._wire.codec import Event


def _context(tmp_path: Path, home: str = "/root", names: tuple[str, ...] = ()) -> Context:
    return Context(
        str(tmp_path),
        str(tmp_path),
        home,
        (("VIRTUAL_ENV", "/opt/venv"),),
        frozenset(names),
        frozenset({str(tmp_path / ".py-sandboxes")}),
    )


def _lines(events: list[Event], context: Context) -> list[str]:
    return [rule.line for rule in learn(events, context).rules]


def test_a_file_read_grants_that_file_only(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    events = [
        Event("file", str(tmp_path / "a.txt"), "read"),
        Event("file", "/etc/hostname", "read"),
    ]
    assert _lines(events, _context(tmp_path)) == ["expose-ro=/etc/hostname", "expose-ro=./a.txt"]


def test_never_a_sensitive_directory_even_when_listed(tmp_path: Path) -> None:
    events = [
        Event("file", "/etc", "list"),
        Event("file", "/", "list"),
        Event("file", os.path.dirname(str(tmp_path)), "list"),  # a parent of the cwd
        Event("file", "/root/.ssh/id_rsa", "create"),  # in ~/.ssh: never the directory
    ]
    learned = learn(events, _context(tmp_path))
    assert [rule.line for rule in learned.rules] == []
    assert any("/etc: listed, but a sensitive directory" in note for note in learned.skipped)


def test_a_listed_or_created_in_directory_is_granted(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "r.txt").write_text("r")
    (tmp_path / "in" / "x.txt").write_text("x")
    events = [
        Event("file", str(tmp_path / "in"), "list"),
        Event("file", str(tmp_path / "in" / "x.txt"), "read"),  # covered by the listing
        Event("file", str(tmp_path / "out" / "r.txt"), "create"),
    ]
    assert _lines(events, _context(tmp_path)) == ["expose-ro=./in", "expose-rw=./out"]


def test_paths_are_written_as_what_they_are(tmp_path: Path) -> None:
    context = _context(tmp_path, home="/home/ann")
    assert display_path(str(tmp_path / "d" / "f"), context) == "./d/f"
    assert display_path("/opt/venv/lib/x", context) == "${VIRTUAL_ENV:-/opt/venv}/lib/x"
    assert display_path("/home/ann/notes.txt", context) == "~/notes.txt"
    assert display_path("/srv/data", context) == "/srv/data"


def test_missing_files_and_rule_files_are_never_granted(tmp_path: Path) -> None:
    (tmp_path / ".py-sandboxes").write_text("")
    events = [
        Event("file", str(tmp_path / "absent.txt"), "read"),  # a probe: it stays absent
        Event("file", str(tmp_path / ".py-sandboxes"), "write"),
        Event("file", "/proc/self/environ", "read"),
    ]
    assert _lines(events, _context(tmp_path)) == []


def test_one_net_rule_per_name_with_the_ports_seen(tmp_path: Path) -> None:
    events = [
        Event("net", "localhost", "OUT", "tcp", 8080, ("127.0.0.1",)),
        Event("net", "localhost", "OUT", "tcp", 8080, ("::1",)),
        Event("net", "localhost", "OUT", "tcp", 9090, ("127.0.0.1",)),
        Event("net", "127.0.0.1", "IN", "tcp", 0, ("127.0.0.1",)),  # ephemeral: no rule
        Event("net", "0.0.0.0", "IN", "udp", 5353, ("0.0.0.0",)),
    ]
    assert _lines(events, _context(tmp_path)) == [
        "net=ALLOW|tcp|localhost|8080,9090|OUT",
        "net=ALLOW|udp|0.0.0.0|5353|IN",
    ]


def test_env_rules_name_host_variables_and_never_hold_a_value(tmp_path: Path) -> None:
    events = [Event("env", "TOKEN", "read"), Event("env", "NOT_ON_HOST", "read")]
    assert _lines(events, _context(tmp_path, names=("TOKEN",))) == ["env=TOKEN=${TOKEN}"]


def test_imports_are_told_apart() -> None:
    assert import_group("ctypes") == "⚠ Dangerous!"
    assert import_group("json") == "Standard Python"
    assert import_group("telnetlib") == "⚠ Deprecated Python module"
    assert import_group("tomlkit") == "External modules (Are you sure about the origin?)"
    assert import_group("_json") == "Standard Python"
    # A leading underscore does not make a module standard (it listed a planted _helpers,
    # or setuptools' _distutils_hack, under "Standard Python").
    assert import_group("_helpers") == "External modules (Are you sure about the origin?)"


def test_calls_by_function_never_by_a_whole_category(tmp_path: Path) -> None:
    # The guards report registered functions; any other name is forged or stale, and a
    # whole category would grant far more than was seen.
    events = [
        Event("call", "os.system", "process-exec"),
        Event("call", "sandbox-internals", "introspection"),
        Event("call", "bogus.name", "process-exec"),
        Event("call", "builtins.compile", "dynamic-code"),
        Event("call", "code.__new__", "dynamic-code"),
    ]
    learned = learn(events, _context(tmp_path))
    assert [(r.line, r.group) for r in learned.rules] == [
        ("python-api=ALLOW:builtins.compile", "⚠ dynamic-code"),
        ("python-api=ALLOW:os.system", "⚠ process-exec"),
    ]
    assert any("'bogus.name'" in note for note in learned.skipped)
    assert any("'code.__new__'" in note for note in learned.skipped)


def test_each_rule_says_where_it_came_from(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    rules = learn(
        [Event("file", str(tmp_path / "a.txt"), "read", where="app/db.py:12")], _context(tmp_path)
    ).rules
    assert rules[0].note == "learned: read by app/db.py:12"


def test_paths_under_a_variable_are_granted_with_it(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "lib").mkdir(parents=True)
    (venv / "lib" / "data.bin").write_text("x")
    context = Context(
        str(tmp_path / "project"),
        str(tmp_path / "project"),
        "",
        (("VIRTUAL_ENV", str(venv)),),
        frozenset(),
        frozenset(),
    )
    events = [Event("file", str(venv / "lib" / "data.bin"), "read")]
    assert _lines(events, context) == [f"expose-ro=${{VIRTUAL_ENV:-{venv}}}/lib/data.bin"]


def test_names_a_rule_line_cannot_hold_are_not_granted(tmp_path: Path) -> None:
    odd = tmp_path / "a#b"
    odd.write_text("x")
    dollar = tmp_path / "${HOME}"
    dollar.write_text("x")
    events = [Event("file", str(odd), "read"), Event("file", str(dollar), "read")]
    learned = learn(events, _context(tmp_path))
    assert learned.rules == ()
    assert len(learned.skipped) == 2


def test_the_bytecode_cache_is_not_learned(tmp_path: Path) -> None:
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    events = [Event("file", str(cache), "create"), Event("file", str(cache / "m.pyc"), "create")]
    assert _lines(events, _context(tmp_path)) == []


def test_a_path_with_two_leading_slashes_grants_nothing(tmp_path: Path) -> None:
    # normpath keeps a leading "//", which the parser later reads as "/".
    events = [Event("file", "//x", "create"), Event("file", "//etc", "list")]
    assert _lines(events, _context(tmp_path)) == []


def test_a_link_the_program_planted_is_judged_where_it_leads(tmp_path: Path) -> None:
    # "data" -> "/" and "docs" -> "/root" look harmless as rules; they are not.
    (tmp_path / "data").symlink_to("/")
    (tmp_path / "docs").symlink_to("/root")
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    events = [
        Event("file", str(tmp_path / "data"), "list"),
        Event("file", str(tmp_path / "docs" / "x"), "create"),
        Event("file", str(tmp_path / "alias"), "list"),
    ]
    assert _lines(events, _context(tmp_path)) == ["expose-ro=./real"]


def test_no_port_zero_and_only_host_names_a_rule_can_hold(tmp_path: Path) -> None:
    events = [
        Event("net", "example.com", "OUT", "tcp", 0),
        Event("net", "a..b", "OUT", "tcp", 443),
        Event("net", "-x", "OUT", "tcp", 443),
        Event("net", "api.example.com", "OUT", "tcp", 443),
    ]
    assert _lines(events, _context(tmp_path)) == ["net=ALLOW|tcp|api.example.com|443|OUT"]


def test_a_name_leading_to_a_defaulted_address_learns_that_address_too(tmp_path: Path) -> None:
    # The name's rule alone would not reach the LAN next run (the SSRF-safe defaults).
    events = [
        Event("net", "db.corp.example", "OUT", "tcp", 5432, ("10.0.0.5",)),
        Event("net", "api.example.com", "OUT", "tcp", 443, ("192.0.2.10",)),
        Event("net", "localhost", "OUT", "tcp", 8000, ("127.0.0.1",)),
    ]
    assert sorted(_lines(events, _context(tmp_path))) == [
        "net=ALLOW|tcp|10.0.0.5|5432|OUT",
        "net=ALLOW|tcp|api.example.com|443|OUT",
        "net=ALLOW|tcp|db.corp.example|5432|OUT",
        "net=ALLOW|tcp|localhost|8000|OUT",
    ]


def test_thousands_of_grants_under_one_directory_give_one_rule(tmp_path: Path) -> None:
    # Minimising walks each grant's ancestors (it used to compare every pair).
    deep = tmp_path / "d"
    deep.mkdir()
    events = [Event("file", str(deep), "create")]
    events += [Event("file", str(deep / f"f{i}"), "write") for i in range(4000)]
    for i in range(4000):
        (deep / f"f{i}").write_text("")
    assert _lines(events, _context(tmp_path)) == [
        "expose-rw=./d/"
    ]  # made by the program: made again next time


def test_nothing_is_learned_for_writing_in_the_systems_trees(tmp_path: Path) -> None:
    # /bin is /usr/bin on merged-/usr systems; /etc/cron.d is not /etc, but as dangerous.
    events = [
        Event("file", "/bin/evil", "create"),
        Event("file", "/usr/lib", "list"),
        Event("file", "/etc/hostname", "write"),
        Event("file", "/etc/hostname", "read"),
        Event("file", "/root/.bashrc", "write"),
    ]
    lines = _lines(events, _context(tmp_path))
    assert lines == ["expose-ro=/etc/hostname"]


def test_a_home_reached_through_a_link_is_still_sensitive(tmp_path: Path) -> None:
    real = tmp_path / "realhome"
    (real / ".ssh").mkdir(parents=True)
    (tmp_path / "homelink").symlink_to(real)
    project = tmp_path / "project"
    project.mkdir()
    context = _context(project, home=str(tmp_path / "homelink"))
    events = [Event("file", str(real), "list"), Event("file", str(real / ".ssh"), "list")]
    assert _lines(events, context) == []
