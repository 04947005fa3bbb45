"""Fixtures of the partial-mode tests (see ``partiallab``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import valuetools  # type: ignore[import-not-found]
from partiallab import App  # type: ignore[import-not-found]

from pysandboxes import sandboxes


@pytest.fixture
def app(project: Path) -> App:
    return App(project)


@pytest.fixture(scope="module")
def sandboxed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sandboxes]:
    """A sandbox for the calls of ``valuetools``, entered in this test process."""
    rules = tmp_path_factory.mktemp("valuetools") / ".py-sandboxes"
    rules.write_text(valuetools.RULES)
    with sandboxes(sandboxes_config=rules) as box:
        yield box
