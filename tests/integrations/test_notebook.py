"""`%load_ext pysandboxes` in a real Jupyter kernel (ipykernel, driven by nbclient)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


def cell_outputs(cell: object) -> str:
    outputs = getattr(cell, "outputs", [])
    return "".join(
        str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs
    )


def execute(cells: list[str], where: Path) -> list[str]:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(where)}},
    )
    client.km_kwargs = {
        "kernel_cmd": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    }  # type: ignore[attr-defined]
    client.execute()
    return [cell_outputs(cell) for cell in notebook.cells]


def test_a_tools_module_imported_after_the_sandbox_opened_is_found(tmp_path: Path) -> None:
    (tmp_path / "nbtools.py").write_text(
        "from pysandboxes import sandbox, is_in_sandbox\n\n\n"
        "@sandbox\ndef double(n):\n    return n * 2, is_in_sandbox()\n"
    )
    (tmp_path / ".py-sandboxes").write_text("python-import=pysandboxes\n")
    cells = [
        "%load_ext pysandboxes",
        "%sandbox_open",
        "import nbtools",  # a later cell: the sandbox started without it
        "print(nbtools.double(21))",
        "print(nbtools.double(4))",
        "%sandbox_close",
    ]
    shown = execute(cells, tmp_path)
    assert "(42, True)" in shown[3], shown
    assert "(8, True)" in shown[4], shown


def test_a_sandboxed_cell_reads_its_file_is_refused_another_and_the_notebook_goes_on(
    tmp_path: Path,
) -> None:
    (tmp_path / "allowed.txt").write_text("the allowed text\n")
    (tmp_path / "secret.txt").write_text("TOKEN-9f2\n")
    # The rules grant one file; no dynamic code: a cell is the program's text, as a script
    # is, while what a cell evaluates or hands the cell runner itself stays refused.
    (tmp_path / ".py-sandboxes").write_text("expose-ro=./allowed.txt\npython-import=pysandboxes\n")
    # Control: the kernel itself reads the secret.
    cells = [
        "%load_ext pysandboxes",
        "print(open('secret.txt').read().strip())",
        "%%sandbox\nopen('allowed.txt').read().strip()",
        "%%sandbox\nopen('secret.txt').read()",
        "%%sandbox\nimport os\nprint('token seen:', os.environ.get('NB_TOKEN'))",
        "%%sandbox\neval('6 * 7')",
        "%%sandbox\nimport pysandboxes.notebook as nb\nnb.run_cell('6 * 7')",
        "print('still running')",
    ]
    os.environ["NB_TOKEN"] = "tok-kernel-only"
    try:
        shown = execute(cells, tmp_path)
    finally:
        del os.environ["NB_TOKEN"]
    assert "TOKEN-9f2" in shown[1]  # the kernel has every right
    assert "the allowed text" in shown[2]
    assert "TOKEN-9f2" not in shown[3]
    assert "Reading 'secret.txt'" in shown[3]
    assert "Add 'expose-ro=./secret.txt'" in shown[3]
    assert "token seen: None" in shown[4] or "python-import=os" in shown[4]
    for refused in shown[5:7]:
        assert "42" not in refused
        assert "dynamic-code" in refused, refused
    assert "still running" in shown[7]
