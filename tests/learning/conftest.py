"""Fixtures of the learning tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from learnlab import Server


@pytest.fixture
def server() -> Iterator[Server]:
    """A loopback server the program under test may connect to."""
    running = Server()
    yield running
    running.close()


@pytest.fixture
def other_server() -> Iterator[Server]:
    """A second loopback server, on another port."""
    running = Server()
    yield running
    running.close()
