"""The README's install section works as written, on a fresh copy of the packages."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pysandboxes

BLOCK = re.compile(r"^```bash install\n(.*?)^```", re.M | re.S)


def test_the_readme_install_commands_work_on_a_fresh_copy(repo_root: Path, tmp_path: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed: run scripts/test, which installs uv")
    shutil.copytree(
        repo_root / "packages",
        tmp_path / "packages",
        ignore=shutil.ignore_patterns(".venv*", "__pycache__", "*.egg-info", "dist"),
    )
    for name in ("pyproject.toml", "uv.lock"):  # the workspace, as a clone has it
        shutil.copy(repo_root / name, tmp_path / name)
    blocks = BLOCK.findall((repo_root / "README.md").read_text())
    assert len(blocks) == 2
    base = os.path.dirname(sys.base_prefix + "/bin/python3")  # not this test's venv
    # The machine's own settings (index, certificates, proxies) as a user has them; only
    # the test's virtual environment is left out.
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(PATH=f"{os.path.dirname(uv)}:{base}:/usr/bin:/bin", UV_PYTHON_DOWNLOADS="never")
    for line in "\n".join(blocks).splitlines():
        result = subprocess.run(
            ["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=900,
        )  # fmt: skip
        assert result.returncode == 0, f"{line}\n{result.stdout}\n{result.stderr}"
    expected = f"python-sb {pysandboxes.__version__} (pysandboxes {pysandboxes.__version__}"
    assert result.stdout.startswith(expected)  # the last line: uvx from the wheels
    for venv in (".venv", ".venv-uv"):
        version = subprocess.run(
            [str(tmp_path / venv / "bin" / "python-sb"), "--version"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert version.stdout.startswith(expected)
        ipython = subprocess.run(
            [str(tmp_path / venv / "bin" / "python"), "-c", "import IPython"], check=False
        )
        assert ipython.returncode == 0  # the [ipython] extra came along


def test_the_version_supersedes_the_unrelated_release_on_the_index() -> None:
    major, minor, _ = (int(part) for part in pysandboxes.__version__.split("."))
    assert (major, minor) > (0, 7)
