"""Fixtures of the kernel-layer tests: skipped, with the reason, on a kernel without Landlock."""

from __future__ import annotations

import pytest
from kernelprobes import need_abi


@pytest.fixture(autouse=True)
def _landlock() -> None:
    need_abi(1, "Landlock at all")
