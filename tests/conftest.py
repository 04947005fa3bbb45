"""Shared fixtures. The suite runs against the installed wheels, never the source tree."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from listener import Listener
from runner import Runner

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The checkout, for reading its files (pyproject, docs); never imported from."""
    return ROOT


@pytest.fixture(scope="session")
def wheels_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two built wheels: those of the test command, or freshly built for a bare pytest."""
    given = os.environ.get("PYSANDBOXES_WHEELS_DIR")
    if given:
        return Path(given)
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed: run scripts/test, which installs it")
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [uv, "build", "--all-packages", "--wheel", "--out-dir", str(out), "--quiet"],
        cwd=ROOT,
        check=True,
    )
    return out


@pytest.fixture(scope="session")
def python_sb() -> str:
    """The installed ``python-sb`` console script of the environment running the tests."""
    script = Path(sys.executable).with_name("python-sb")
    if not script.exists():
        pytest.fail(f"python-sb is not installed next to {sys.executable}")
    return str(script)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty project directory (the cwd of the runs)."""
    root = tmp_path / "project"
    root.mkdir()
    return root


@pytest.fixture
def sb(python_sb: str, project: Path) -> Runner:
    """``python-sb`` run in ``project``; write ``project / '.py-sandboxes'`` first."""
    return Runner([python_sb], project)


@pytest.fixture
def py(project: Path) -> Runner:
    """Plain ``python`` run in ``project``: the positive control of every probe."""
    return Runner([sys.executable], project)


@pytest.fixture
def victims() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Two processes outside the sandbox: the control's target and the sandbox's, which
    must still be alive (or unchanged) after the sandboxed probe."""
    started = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]
    yield started
    for victim in started:
        victim.kill()
        victim.wait()


@pytest.fixture
def tcp() -> Iterator[Listener]:
    """A loopback TCP listener that counts the connections reaching it."""
    listener = Listener()
    yield listener
    listener.close()


@pytest.fixture
def udp() -> Iterator[Listener]:
    """A loopback UDP listener that counts the datagrams reaching it."""
    listener = Listener(socket.SOCK_DGRAM)
    yield listener
    listener.close()
