"""The Learning enforcer records and lets through, except what no rule can ever allow."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from learnlab import sent_events

from pysandboxes._inside.enforce import Connection, FileAccess, Messages
from pysandboxes._inside.recorder import Learning
from pysandboxes._policy.judge import PLANTED_RULES
from pysandboxes._policy.model import Access, Origin, Verdict
from pysandboxes.errors import RuleApiPermissionError, RulePermissionError


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    yield read_end, write_end
    os.close(read_end)
    os.close(write_end)


def _learning(write_end: int) -> Learning:
    return Learning(write_end, Messages(".py-sandboxes", "/project"), "/project")


def test_refusals_become_events_and_the_access_goes_on(pipe: tuple[int, int]) -> None:
    learning = _learning(pipe[1])
    report = FileAccess("data.txt", "/project/data.txt", Access.READ, "open")
    learning.refuse_file(report, Verdict(False, None, hidden=True, fix="expose-ro=/x"))
    learning.refuse_file(report, Verdict(False, None, hidden=True, fix="expose-ro=/x"))  # once
    learning.refuse_import("csv", "refused")
    learning.refuse_call("os.system", "process-exec", "refused")
    learning.env_read("HOME")
    target = Connection("tcp", "127.0.0.1", 8080, "OUT", ("127.0.0.1",))
    learning.refuse_connection("refused", "127.0.0.1:8080", None, target)
    events = sent_events(pipe[0])
    assert [(e.family, e.name, e.access) for e in events] == [
        ("file", "/project/data.txt", "read"),
        ("import", "csv", "module"),
        ("call", "os.system", "process-exec"),
        ("env", "HOME", "read"),
        ("net", "127.0.0.1", "OUT"),
    ]
    assert all(event.where.startswith(f"{__file__}:") for event in events)  # this test's line


def test_cant_write_a_rule_file_while_learning(pipe: tuple[int, int]) -> None:
    learning = _learning(pipe[0])
    report = FileAccess(".py-sandboxes", "/project/.py-sandboxes", Access.WRITE, "open")
    protected = Verdict(False, Origin(".py-sandboxes", 0, "the rule file"), hidden=False)
    with pytest.raises(RulePermissionError):
        learning.refuse_file(report, protected)
    with pytest.raises(RulePermissionError):
        learning.refuse_file(report, Verdict(False, None, hidden=False, fix=PLANTED_RULES))


def test_cant_reach_the_guards_while_learning(pipe: tuple[int, int]) -> None:
    learning = _learning(pipe[1])
    with pytest.raises(RuleApiPermissionError):
        learning.refuse_call("sandbox-internals", "introspection", "refused")
    assert sent_events(pipe[0]) == []  # nothing to learn: no rule can allow it


def test_listings_are_shown_whole_while_learning() -> None:
    assert Learning.hides_entries is False
