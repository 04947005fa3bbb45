"""The ``lab`` fixture of the escape tests (see ``escapelab``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from escapelab import Lab


@pytest.fixture
def lab(tmp_path: Path, project: Path, py: Any, sb: Any) -> Lab:
    """A secret outside a fresh project, default rules ``expose-ro=./data``,
    ``expose-rw=./out``."""
    return Lab(tmp_path, project, py, sb)
