"""What a hostile (or merely unusual) program cannot make learning write.

Each test is an attack on learning: an event, forged or real, that used to give a rule
wider than what the program visibly did, or that kept every rule from being written.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from learnlab import granted

from pysandboxes._host.learning import places
from pysandboxes._host.learning.rules import Context, learn
from pysandboxes._policy.parser import parse_policy
from pysandboxes._policy.writer import write_rule_file
from pysandboxes._wire.codec import Event

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner


def _context(
    project: Path, home: str = "/root", variables: tuple[tuple[str, str], ...] = ()
) -> Context:
    return Context(
        str(project),
        str(project),
        home,
        variables,
        frozenset(),
        frozenset({str(project / ".py-sandboxes")}),
    )


def _lines(events: list[Event], context: Context) -> list[str]:
    return [rule.line for rule in learn(events, context).rules]


def test_a_forged_network_is_never_learned(tmp_path: Path) -> None:
    # "127.0.0.1/0" reads as loopback and is every IPv4 address; "::ffff:.../96" too.
    events = [
        Event("net", "127.0.0.1/0", "OUT", "tcp", 443),
        Event("net", "::ffff:127.0.0.1/96", "OUT", "tcp", 443),
        Event("net", "10.0.0.0/8", "IN", "tcp", 80),
        Event("net", "127.0.0.1", "OUT", "tcp", 443),
    ]
    assert _lines(events, _context(tmp_path)) == ["net=ALLOW|tcp|127.0.0.1|443|OUT"]


def test_a_forged_subinterpreter_call_is_never_learned(tmp_path: Path) -> None:
    # A new interpreter runs with none of the Python layer: only the user may grant one.
    events = [
        Event("call", "_interpreters.create", "process-exec"),
        Event("call", "_xxsubinterpreters.run_string", "process-exec"),
        Event("call", "concurrent.interpreters.create", "process-exec"),
        Event("call", "os.fork", "process-exec"),
    ]
    learned = learn(events, _context(tmp_path))
    assert [rule.line for rule in learned.rules] == ["python-api=ALLOW:os.fork"]
    assert sum("a subinterpreter is never learned" in note for note in learned.skipped) == 3


def test_making_or_removing_a_sensitive_directory_grants_nothing(tmp_path: Path) -> None:
    # os.makedirs(HOME, exist_ok=True) or a failed rmdir used to grant ~ (or /etc) whole.
    home = tmp_path / "home"
    project = home / "project"
    project.mkdir(parents=True)
    events = [
        Event("file", str(home), "create"),
        Event("file", "/etc", "delete"),
        Event("file", str(tmp_path), "delete"),  # a parent of the working directory
    ]
    learned = learn(events, _context(project, home=str(home)))
    assert learned.rules == ()
    assert any("create of a sensitive directory" in note for note in learned.skipped)


def test_the_rule_files_directory_is_never_writable(tmp_path: Path) -> None:
    # With expose-rw=. a shell the program starts rewrites .py-sandboxes for the next run:
    # the kernel layer cannot keep one file of a writable directory read-only.
    (tmp_path / "out.txt").write_text("result")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "r.txt").write_text("r")
    events = [
        Event("file", str(tmp_path / "out.txt"), "create"),
        Event("file", str(tmp_path / "gone.tmp"), "create"),  # made, then removed: made again
        Event("file", str(tmp_path), "create"),  # forged: the project itself
        Event("file", str(tmp_path / "sub" / "r.txt"), "create"),
    ]
    learned = learn(events, _context(tmp_path))
    assert [rule.line for rule in learned.rules] == [
        "expose-rw=./gone.tmp",
        "expose-rw=./out.txt",
        "expose-rw=./sub",
    ]
    assert any("beside a rule file are granted one by one" in n for n in learned.skipped)


def test_a_script_in_a_home_does_not_make_its_hidden_entries_a_project(tmp_path: Path) -> None:
    # ~/backup.py: the rule file goes to ~, which is no reason to learn ~/.bashrc.
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    for name in (".bashrc", ".profile", ".ssh/authorized_keys", "notes.txt"):
        (home / name).write_text("")
    events = [
        Event("file", str(home / ".bashrc"), "write"),
        Event("file", str(home / ".ssh" / "authorized_keys"), "write"),
        Event("file", str(home / ".profile"), "create"),
        Event("file", str(home / "notes.txt"), "write"),
    ]
    assert _lines(events, _context(home, home=str(home))) == ["expose-rw=./notes.txt"]


def test_a_project_at_the_root_does_not_own_the_system(tmp_path: Path) -> None:
    # /app.py in a container: the rule file goes to /, whose "./etc/..." is still /etc.
    context = Context("/", str(tmp_path), "/root", (), frozenset(), frozenset({"/.py-sandboxes"}))
    events = [Event("file", "/etc/hostname", "write"), Event("file", "/usr/lib", "list")]
    assert _lines(events, context) == ["expose-ro=./etc/hostname"]


@pytest.fixture
def homes_in(tmp_path: Path) -> Iterator[Path]:
    """A directory of homes standing in for /home, each user's home an entry of it."""
    parent = tmp_path / "homes"
    (parent / "bob" / ".ssh").mkdir(parents=True)
    (parent / "bob" / ".bashrc").write_text("")
    saved = places.HOME_PARENTS
    places.HOME_PARENTS = (str(parent),)
    places._homes.cache_clear()  # pyright: ignore[reportPrivateUsage]
    yield parent
    places.HOME_PARENTS = saved
    places._homes.cache_clear()  # pyright: ignore[reportPrivateUsage]


def test_every_users_home_is_sensitive(tmp_path: Path, homes_in: Path) -> None:
    # Learning as root, HOME=/root: /home/bob used to be a plain directory.
    bob = homes_in / "bob"
    project = tmp_path / "project"
    project.mkdir()
    events = [
        Event("file", str(bob / ".bashrc"), "write"),
        Event("file", str(bob / ".bash_aliases"), "create"),
        Event("file", str(bob / ".ssh" / "authorized_keys"), "create"),
        Event("file", str(bob / "new.txt"), "create"),
    ]
    assert _lines(events, _context(project)) == []


def test_a_variable_path_never_falls_back_to_the_root(tmp_path: Path) -> None:
    # ${VIRTUAL_ENV}/bin expanded to /bin (/usr/bin) on a run without the venv.
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    project = tmp_path / "project"
    project.mkdir()
    context = _context(project, variables=(("VIRTUAL_ENV", str(venv)),))
    lines = _lines([Event("file", str(venv / "bin" / "tool"), "create")], context)
    assert lines == [f"expose-rw=${{VIRTUAL_ENV:-{venv}}}/bin"]
    rule_file = project / ".py-sandboxes"
    rule_file.write_text(lines[0] + "\n")
    for env in ({}, {"VIRTUAL_ENV": str(venv)}):
        policy = parse_policy(str(rule_file), cwd=str(project), env=env)
        assert [rule.path for rule in policy.expose] == [str(venv / "bin")]


def test_an_unprintable_name_is_left_out_and_the_rest_written(tmp_path: Path) -> None:
    # A line separator used to make the writer refuse every rule; a bidi control shows
    # another name than the one granted.
    names = ["a\u2028b.txt", "a\x85b.txt", "\u202etxt.atad", "x\u00a0y.txt", "good.txt"]
    for name in names:
        (tmp_path / name).write_text("")
    events = [Event("file", str(tmp_path / n), "read", where="app.py:1\u202e") for n in names]
    learned = learn(events, _context(tmp_path))
    rule_file = tmp_path / ".py-sandboxes"
    from datetime import datetime

    write_rule_file(rule_file, learned.rules, now=datetime(2026, 1, 1))
    assert granted(rule_file) == ["expose-ro=./good.txt"]
    assert "learned: read by app.py:1?" in rule_file.read_text()
    assert all(text.isprintable() for text in rule_file.read_text().splitlines())


def test_forged_events_on_the_pipe_get_no_network(sb: Runner, project: Path) -> None:
    # The program writes its own events on the pipe it inherited: they are only requests.
    (project / "app.py").write_text(
        "import json, os, sys\n"
        "fd = next(fd for fd in range(3, 64) if os.path.exists(f'/proc/self/fd/{fd}')"
        " and os.readlink(f'/proc/self/fd/{fd}').startswith('pipe:'))\n"
        "for name in ('127.0.0.1/0', '0.0.0.0/0'):\n"
        "    event = {'f': 'net', 'n': name, 'a': 'OUT', 'p': 'tcp', 'port': 443, 'w': 'x'}\n"
        "    os.write(fd, json.dumps(event).encode() + b'\\n')\n"
        f"os.write(fd, json.dumps({{'f': 'file', 'n': {str(project)!r}, 'a': 'create',"
        " 'w': 'x'}).encode() + b'\\n')\n"
    )
    result = sb("app.py")
    assert result.returncode == 0, result.stderr
    rules = granted(project / ".py-sandboxes")
    assert not [rule for rule in rules if rule.startswith(("net=", "expose-rw"))], rules
    assert os.path.exists(project / ".py-sandboxes")


def test_nothing_is_learned_for_writing_in_the_interpreters_trees(tmp_path: Path) -> None:
    # expose-rw=<site-packages>: a .pth file written there ran in the next python-sb
    # itself, outside every sandbox. A venv inside the project is no exception.
    project = tmp_path / "project"
    site = project / ".venv" / "lib" / "python3" / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "mod.py").write_text("")
    (project / ".venv" / "bin").mkdir()
    (project / "out").mkdir()
    context = Context(
        str(project),
        str(project),
        "/root",
        (),
        frozenset(),
        frozenset({str(project / ".py-sandboxes")}),
        frozenset({str(project / ".venv"), str(site)}),
    )
    events = [
        Event("file", str(site / "evil.pth"), "create"),
        Event("file", str(site / "pkg" / "mod.py"), "write"),
        Event("file", str(site / "pkg" / "mod.py"), "read"),
        Event("file", str(project / ".venv" / "bin" / "json.py"), "create"),
        Event("file", str(project / "out" / "r.txt"), "create"),
    ]
    assert _lines(events, context) == ["expose-rw=./out"]
    read = [Event("file", str(site / "pkg" / "mod.py"), "read")]
    assert _lines(read, context) == ["expose-ro=./.venv/lib/python3/site-packages/pkg/mod.py"]


def test_the_waiter_knows_the_interpreters_trees() -> None:
    import site
    import sys

    from pysandboxes._host.learning.conclude import _code_roots  # pyright: ignore[reportPrivateUsage]

    roots = _code_roots()
    assert os.path.realpath(sys.prefix) in roots
    assert all(os.path.realpath(p) in roots for p in site.getsitepackages() if os.path.isdir(p))


def test_a_project_in_a_hidden_directory_still_writes_in_itself(tmp_path: Path) -> None:
    # ~/.local/share/app is a project like any other; ~/.config is not one.
    home = tmp_path / "home"
    app = home / ".local" / "share" / "app"
    (app / "out").mkdir(parents=True)
    (home / ".config" / "autostart").mkdir(parents=True)
    events = [Event("file", str(app / "out" / "r.txt"), "create")]
    assert _lines(events, _context(app, home=str(home))) == ["expose-rw=./out"]
    config = home / ".config"
    events = [Event("file", str(config / "autostart" / "x.desktop"), "create")]
    assert _lines(events, _context(config, home=str(home))) == []


def test_where_the_search_looks_is_never_learned_writable(sb: Runner, project: Path) -> None:
    # Rules in the cwd, the program in ./scripts: the search looks in ./scripts first, so
    # expose-rw=./scripts let a shell plant ./scripts/.py-sandboxes for the next run.
    (project / ".py-sandboxes").write_text("python-import=os\n")
    (project / "scripts").mkdir()
    (project / "scripts" / "app.py").write_text(
        "import os\n"
        "here = os.path.dirname(os.path.abspath(__file__))\n"
        "open(os.path.join(here, 'cache.txt'), 'w').write('x')\n"
    )
    result = sb("--learn", "scripts/app.py")
    assert result.returncode == 0, result.stderr
    assert granted(project / ".py-sandboxes") == [
        "python-import=os",
        "expose-rw=./scripts/cache.txt",
    ]


def test_a_working_directory_searched_after_the_rule_file_stays_writable(
    sb: Runner, project: Path, tmp_path: Path
) -> None:
    # The rule file next to the program is found first: one planted in the cwd is never
    # read, so the cwd the program writes in is learned as before.
    program = tmp_path / "prog"
    program.mkdir()
    (program / "app.py").write_text("open('out.txt', 'w').write('x')\n")
    result = sb(str(program / "app.py"))
    assert result.returncode == 0, result.stderr
    assert granted(program / ".py-sandboxes") == [f"expose-rw={project}"]


def test_nothing_is_learned_for_writing_in_the_commands_path(
    sb: Runner, project: Path, tmp_path: Path
) -> None:
    # expose-rw=~/bin: a command dropped there runs as the user, outside any sandbox.
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    (project / "app.py").write_text(
        "import os\nopen(os.path.expanduser('~/bin/helper'), 'w').write('#!/bin/sh')\n"
    )
    env = {"HOME": str(home), "PATH": f"{home / 'bin'}:{os.environ.get('PATH', '/usr/bin')}"}
    result = sb("app.py", env=env)
    assert result.returncode == 0, result.stderr
    assert not [r for r in granted(project / ".py-sandboxes") if r.startswith("expose-rw")]
    assert "the PATH or a home's hidden entries is never learned" in result.stderr


def test_making_a_directory_that_is_there_grants_nothing(
    sb: Runner, project: Path, tmp_path: Path
) -> None:
    # os.makedirs(~/Documents, exist_ok=True) changes nothing: it gave expose-rw=~/Documents.
    home = tmp_path / "home"
    (home / "Documents" / "taxes").mkdir(parents=True)
    (project / "app.py").write_text(
        "import os\n"
        "os.makedirs(os.path.expanduser('~/Documents'), exist_ok=True)\n"
        "os.makedirs('new', exist_ok=True)\n"
    )
    result = sb("app.py", env={"HOME": str(home)})
    assert result.returncode == 0, result.stderr
    files = [r for r in granted(project / ".py-sandboxes") if r.startswith("expose")]
    assert files == ["expose-rw=./new/"]
    assert f"{home / 'Documents'}: a directory looked at, not listed" in result.stderr


def test_removing_what_is_not_there_grants_nothing(
    sb: Runner, project: Path, tmp_path: Path
) -> None:
    # unlink(missing_ok=True) of a stale lock that is gone gave expose-rw=~/Documents.
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    code = "import pathlib\n"
    code += "pathlib.Path('~/Documents/app.lock').expanduser().unlink(missing_ok=True)\n"
    (project / "app.py").write_text(code)
    env = {"HOME": str(home)}
    result = sb("app.py", env=env)
    assert result.returncode == 0, result.stderr
    assert not [r for r in granted(project / ".py-sandboxes") if r.startswith("expose")]
    again = sb("app.py", env=env)  # the rules refuse it as "not found": missing_ok holds
    assert again.returncode == 0, again.stderr


def test_a_variable_line_learned_before_is_not_contradicted(tmp_path: Path) -> None:
    from pysandboxes._host.learning.rules import drop_contradictions

    venv = tmp_path / "venv"
    (venv / "data").mkdir(parents=True)
    context = _context(tmp_path / "p", variables=(("VIRTUAL_ENV", str(venv)),))
    learned = learn([Event("file", str(venv / "data" / "f"), "create")], context)
    assert [rule.line for rule in learned.rules] == [f"expose-rw=${{VIRTUAL_ENV:-{venv}}}/data"]
    for old in ("expose-ro=${VIRTUAL_ENV}/data", f"expose-ro=${{VIRTUAL_ENV:-{venv}}}/data"):
        assert drop_contradictions(learned, old + "\n").rules == ()
