"""The integration tests' shared fixtures."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def mcp1_python(tmp_path_factory: pytest.TempPathFactory, wheels_dir: Path) -> str:
    """The interpreter of a venv with mcp 1.x and the two wheels."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed: run scripts/test, which installs it")
    venv = tmp_path_factory.mktemp("mcp1") / "venv"
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    python = str(venv / "bin" / "python")
    wheels = [str(w) for w in sorted(wheels_dir.glob("*.whl"))]
    install = [uv, "pip", "install", "--quiet", "--python", python, "mcp>=1.2,<2", *wheels]
    subprocess.run(install, check=True)
    return python
