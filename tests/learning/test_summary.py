"""The summary of a learning run: a table on a terminal, plain text on a pipe."""

from __future__ import annotations

import io

from python_sb.summary import show

ROWS = [("files", "expose-ro=./config.toml", "app.py:4"), ("net", "net=ALLOW|tcp|h|1|OUT", "a:1")]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_table() -> None:
    stream = _Terminal()
    show("python-sb learned 2 rule(s)", ROWS, ["a note [not markup]"], stream)
    text = stream.getvalue()
    assert "first seen at" in text
    assert "expose-ro=./config.toml" in text
    assert "a note [not markup]" in text


def test_a_pipe_gets_plain_text() -> None:
    stream = io.StringIO()
    show("python-sb learned 2 rule(s)", ROWS, ["kept"], stream)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "python-sb learned 2 rule(s)"
    assert lines[1].split() == [
        "files",
        "expose-ro=./config.toml",
        "first",
        "seen",
        "at",
        "app.py:4",
    ]
    assert lines[-1] == "  note: kept"
    assert "\x1b[" not in stream.getvalue()


def test_what_the_program_named_is_never_markup() -> None:
    # A file "x[/]" or a forged location "[/]" stopped the table after the file was
    # written ("the learned rules could not be written"); "[conceal]" hid a cell.
    stream = _Terminal()
    rows = [("files", "expose-ro=./x[/]", "[conceal]app.py:1"), ("files", "expose-ro=./y", "[/]")]
    show("python-sb learned 2 rule(s) for [bold]r", rows, [], stream)
    text = stream.getvalue()
    assert "expose-ro=./x[/]" in text
    assert "[conceal]app.py:1" in text
    assert "for [bold]r" in text
