"""Shared fixtures. The suite runs against the installed wheels, never the source tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
