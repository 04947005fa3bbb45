"""The two distributions move together and install the way users get them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import pysandboxes
import python_sb


def test_versions_move_together() -> None:
    assert python_sb.__version__ == pysandboxes.__version__
    assert metadata.version("pysandboxes") == pysandboxes.__version__
    assert metadata.version("python-sb") == python_sb.__version__


def test_python_sb_pins_exactly_its_own_pysandboxes(repo_root: Path) -> None:
    requires = metadata.requires("python-sb") or []
    pins = [r for r in requires if r.replace(" ", "").startswith("pysandboxes")]
    assert pins == [f"pysandboxes=={pysandboxes.__version__}"]
    # The source pyproject says the same thing (what the next wheel will carry).
    project = tomllib.loads((repo_root / "packages/python-sb/pyproject.toml").read_text())
    assert f"pysandboxes=={pysandboxes.__version__}" in project["project"]["dependencies"]


def test_library_does_not_require_cli_dependencies() -> None:
    requires = metadata.requires("pysandboxes") or []
    always = [r for r in requires if "extra ==" not in r]
    names = {r.split(">")[0].split("=")[0].split(";")[0].strip().lower() for r in always}
    assert names == {"tomlkit"}
    # The MCP helper's SDK is an extra, asked for by name: `pysandboxes[mcp]`.
    extras = {r.split(";")[1].split("==")[1].strip(" \"'") for r in requires if "extra ==" in r}
    assert extras == {"mcp"}


def test_ipython_is_an_optional_extra_of_the_cli() -> None:
    requires = metadata.requires("python-sb") or []
    ipython = [r for r in requires if r.lower().startswith("ipython")]
    assert ipython
    assert all("extra ==" in r for r in ipython)


def test_console_script_prints_all_versions(python_sb: str) -> None:
    out = subprocess.run([python_sb, "--version"], capture_output=True, text=True, check=True)
    python = sys.version.split()[0]
    expected = (
        f"python-sb {python_sb_version()} (pysandboxes {pysandboxes.__version__}, "
        f"Python {python})\n"
    )
    assert out.stdout == expected
    short = subprocess.run([python_sb, "-V"], capture_output=True, text=True, check=True)
    assert short.stdout == expected


def python_sb_version() -> str:
    return python_sb.__version__


def test_help_renders_through_typer(python_sb: str) -> None:
    out = subprocess.run([python_sb, "--help"], capture_output=True, text=True, check=True)
    assert "Usage: python-sb" in out.stdout
    assert "--pysandboxes-config" in out.stdout
    assert "--learn" in out.stdout


def test_python_m_python_sb_is_the_same_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "python_sb", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0
    assert out.stdout.startswith(f"python-sb {python_sb.__version__} ")


def test_uvx_runs_the_built_wheels(wheels_dir: Path, tmp_path: Path) -> None:
    uvx = shutil.which("uvx")
    if uvx is None:
        pytest.skip("uvx is not installed: run scripts/test, which installs uv")
    cli = next(wheels_dir.glob("python_sb-*.whl"))
    lib = next(wheels_dir.glob("pysandboxes-*.whl"))
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_TOOL_DIR": str(tmp_path / "tools")}
    out = subprocess.run(
        [uvx, "--python", sys.executable, "--from", str(cli), "--with", str(lib), "python-sb"]
        + ["--version"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"python-sb {python_sb.__version__} (pysandboxes ")


#: Imports every module of the package, then says which front-end packages came with them.
_IMPORT_EVERY_MODULE = """
import importlib, pkgutil, sys
import pysandboxes
names = [m.name for m in pkgutil.walk_packages(pysandboxes.__path__, "pysandboxes.")]
for name in names:
    importlib.import_module(name)
front = sorted(n for n in sys.modules if n.split(".")[0] in ("python_sb", "typer", "rich"))
print(len(names), front)
"""


def test_library_stands_alone_without_its_command_line(wheels_dir: Path, tmp_path: Path) -> None:
    """Only the pysandboxes wheel (and what it requires) in a fresh venv: every module of
    the package imports, and none brings python-sb, typer or rich along."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed: run scripts/test, which installs uv")
    lib = next(wheels_dir.glob("pysandboxes-*.whl"))
    venv = tmp_path / "venv"
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    env.pop("VIRTUAL_ENV", None)
    subprocess.run(
        [uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True, env=env
    )
    python = str(venv / "bin" / "python")
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", python, str(lib)],
        check=True,
        env=env,
        timeout=300,
    )
    installed = subprocess.run(
        [uv, "pip", "list", "--python", python], capture_output=True, text=True, env=env
    ).stdout.lower()
    assert "pysandboxes" in installed
    assert not {"python-sb", "typer", "rich"} & set(installed.split())
    out = subprocess.run(
        [python, "-c", _IMPORT_EVERY_MODULE], capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    count, front = out.stdout.split(" ", 1)
    assert int(count) > 60  # every module, not a stub package
    assert front.strip() == "[]"
