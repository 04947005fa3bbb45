"""Fixtures of the corpus of real programs (see corpuslab)."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpuslab import Corpus

#: The project sources are run, never collected: pytest_project holds tests of its own.
collect_ignore = ["programs"]


@pytest.fixture
def corpus(python_sb: str, tmp_path: Path) -> Corpus:
    from pysandboxes._kernel.landlock import abi_version

    if abi_version() == 0:
        pytest.skip("the corpus runs under the Landlock kernel layer, which this kernel lacks")
    return Corpus(python_sb, tmp_path)
