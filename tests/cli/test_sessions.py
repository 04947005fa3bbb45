"""The interactive session at a real terminal: only what the user did is charged to them.

A pseudo-terminal (the standard library's ``pty``) drives ``python-sb`` as a person would.
The shell's own probes (IPython looking at ``/proc/self``, its profile, the working
directory; the import system searching the working directory) are the framework's: refused
all the same, never summed up at exit as if the user had asked for them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from terminal import Terminal, plain_screen

ENV = {"PATH": os.environ.get("PATH", ""), "TERM": "xterm", "LC_ALL": "C.UTF-8"}


def test_an_empty_ipython_session_ends_with_no_refusal_summary(
    python_sb: str, project: Path
) -> None:
    pytest.importorskip("IPython", reason="IPython is not installed in the test environment")
    terminal = Terminal([python_sb], project, ENV)
    try:
        terminal.read_until(r"⚠ In \[1\]")
        terminal.type("exit")
        status = terminal.wait()
    finally:
        terminal.close()
    screen = plain_screen(terminal.seen)
    assert status == 0, screen
    assert "refused by the sandbox" not in screen, screen


def test_a_refused_shell_command_in_ipython_is_one_line(python_sb: str, project: Path) -> None:
    pytest.importorskip("IPython", reason="IPython is not installed in the test environment")
    terminal = Terminal([python_sb], project, ENV)
    try:
        terminal.read_until(r"⚠ In \[1\]")
        terminal.type("!ls")
        screen = plain_screen(terminal.read_until(r"⚠ In \[2\]"))
        terminal.type("clear")
        cleared = plain_screen(terminal.read_until(r"⚠ In \[3\]"))
    finally:
        terminal.close()
    for shown in (screen, cleared[len(screen) :]):
        refusals = [line for line in shown.splitlines() if "python-api=ALLOW:" in line]
        assert len(refusals) == 1, shown
        assert refusals[0].startswith("RuleApiPermissionError: subprocess.Popen() is denied")
        assert "to .py-sandboxes to allow it" in refusals[0]
        assert "Traceback" not in shown
        assert "subprocess.py" not in shown


def test_an_empty_plain_session_ends_with_no_refusal_summary(python_sb: str, project: Path) -> None:
    # -S: no site directory, so no IPython: the standard console. `import json` searches
    # the working directory (sys.path's first entry), which no rule exposes: the import
    # system goes on, as past an empty directory, and nobody is told of it at exit.
    terminal = Terminal([python_sb, "-S"], project, ENV)
    try:
        terminal.read_until("⚠ >>> ")
        terminal.type("import json")
        terminal.read_until("⚠ >>> .*\n⚠ >>> ")
        terminal.send("\x04")  # Ctrl-D, as python3's prompt ends
        status = terminal.wait()
    finally:
        terminal.close()
    screen = plain_screen(terminal.seen)
    assert status == 0, screen
    assert "Error" not in screen, screen
    assert "refused by the sandbox" not in screen, screen


def test_tab_completes_a_module_attribute_in_the_plain_console(
    python_sb: str, project: Path
) -> None:
    terminal = Terminal([python_sb, "-S"], project, ENV)
    try:
        terminal.read_until("⚠ >>> ")
        terminal.type("import json")
        terminal.send("json.du\t")  # rlcompleter: the common prefix of dump and dumps
        terminal.type("s([1])")
        screen = plain_screen(terminal.read_until(r"'\[1\]'"))
    finally:
        terminal.close()
    assert "json.dumps([1])" in screen.replace("\x07", "")


def test_a_session_without_a_rule_file_runs_under_the_template_and_learns_nothing(
    python_sb: str, project: Path
) -> None:
    terminal = Terminal([python_sb, "-S"], project, ENV)
    try:
        screen = plain_screen(terminal.read_until("⚠ >>> "))
        terminal.type("from pathlib import Path; import re, math, datetime, decimal")
        terminal.type("import os")
        # The next prompt first: a Ctrl-D typed ahead, before readline reads, is lost.
        refused = plain_screen(terminal.read_until(r"python-import=os[^\n]*\n⚠ >>> "))
        terminal.send("\x04")
        status = terminal.wait()
    finally:
        terminal.close()
    assert "Learn now" not in screen
    assert "LEARNING" not in screen
    assert "this session runs under the template's rules" in screen
    assert "python-sb --template > .py-sandboxes" in screen  # how to grant more
    assert "Limited by the template's rules (no '.py-sandboxes' here)" in screen
    assert "RuleModuleNotFoundError: Importing os is refused" in refused
    assert "Importing pathlib" not in refused
    assert status == 0
    assert not (project / ".py-sandboxes").exists()
