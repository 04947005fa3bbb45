"""Fixtures of the kernel-layer tests: skipped, with the reason, on a kernel without Landlock."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from kernelprobes import Listener, need_abi


@pytest.fixture(autouse=True)
def _landlock() -> None:
    need_abi(1, "Landlock at all")


@pytest.fixture
def tcp() -> Iterator[Listener]:
    listener = Listener(socket.SOCK_STREAM)
    yield listener
    listener.close()


@pytest.fixture
def udp() -> Iterator[Listener]:
    listener = Listener(socket.SOCK_DGRAM)
    yield listener
    listener.close()
