"""Fixtures of the learning tests (the first listener is tests/conftest.py's ``tcp``).

With no rule file, python-sb learns only when asked: at a terminal the user answers yes,
elsewhere ``--learn`` says it. These tests run without a terminal, so ``sb`` here adds
``--learn`` to a run that finds no rule file in the project (the first run); the runs
after it enforce what was learned, as a user's would.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from listener import Listener

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner


class FirstRunLearns:
    """``python-sb`` in the project, asked to learn when there is no rule file yet."""

    def __init__(self, runner: Runner, project: Path) -> None:
        self.runner = runner
        self.project = project

    def __call__(self, *args: str, **options: object) -> subprocess.CompletedProcess[str]:
        fresh = not (self.project / ".py-sandboxes").exists()
        if fresh and not any(a.startswith(("--learn", "--pysandboxes-config")) for a in args):
            args = ("--learn", *args)
        return self.runner(*args, **options)  # type: ignore[arg-type]


@pytest.fixture
def sb(sb: Runner, project: Path) -> FirstRunLearns:
    return FirstRunLearns(sb, project)


@pytest.fixture
def other_tcp() -> Iterator[Listener]:
    """A second loopback TCP listener, on another port."""
    listener = Listener()
    yield listener
    listener.close()
