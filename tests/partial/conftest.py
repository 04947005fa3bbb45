"""Fixtures of the partial-mode tests (see ``partiallab``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from partiallab import App  # type: ignore[import-not-found]


@pytest.fixture
def app(project: Path) -> App:
    return App(project)
