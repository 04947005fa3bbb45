"""Fixtures of the egress tests: a test-only hosts file and loopback listeners behind names.

``api.example.test`` is ``127.0.0.2`` and ``evil.example.test`` is ``127.0.0.3``, each with
a listener counting what reaches it; ``metadata.example.test`` is ``169.254.169.254``,
which no test connects to (the judge refuses it first). Loopback is a defaulted class, so
the judges of these tests that must let a name reach ``127.0.0.2`` take ``PLAYS_PUBLIC``:
the defaulted classes with ``127.0.0.2`` alone taken out of loopback (``127.0.0.3`` stays
loopback). Other tests show the real defaults refuse ``127.0.0.2`` too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from egresslab import Hosts, Upstream

from listener import Listener


@pytest.fixture
def hosts(tmp_path: Path) -> Hosts:
    return Hosts(tmp_path / "hosts")


@pytest.fixture
def api() -> Iterator[Listener]:
    listener = Listener(host="127.0.0.2")
    yield listener
    listener.close()


@pytest.fixture
def evil() -> Iterator[Listener]:
    listener = Listener(host="127.0.0.3")
    yield listener
    listener.close()


@pytest.fixture
def api_http() -> Iterator[Upstream]:
    upstream = Upstream("127.0.0.2")
    yield upstream
    upstream.close()


@pytest.fixture
def evil_http() -> Iterator[Upstream]:
    upstream = Upstream("127.0.0.3")
    yield upstream
    upstream.close()
