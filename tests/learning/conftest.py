"""Fixtures of the learning tests (the first listener is tests/conftest.py's ``tcp``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from listener import Listener


@pytest.fixture
def other_tcp() -> Iterator[Listener]:
    """A second loopback TCP listener, on another port."""
    listener = Listener()
    yield listener
    listener.close()
