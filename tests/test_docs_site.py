"""The docs site renders every page as GitHub shows it: the fences that carry the test
suite's tags (```python partial, ```py-sandboxes valid) are code blocks, never raw text,
and a rule file's `#` comments inside them never become headings."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_every_page_renders_its_fences_as_code(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    site = tmp_path / "site"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(site),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert build.returncode == 0, build.stderr
    assert "WARNING" not in build.stderr, build.stderr
    pages = sorted(site.glob("*/index.html"))
    assert len(pages) >= 8
    for page in pages:
        html = page.read_text()
        body = re.sub(r"<pre>.*?</pre>", "", html, flags=re.S)  # code shown as code
        assert "```" not in body, f"{page}: a fence rendered as raw text"
        headings = re.findall(r"<h1[^>]*>(.*?)</h1>", body, flags=re.S)
        assert len(headings) == 1, f"{page}: headings {headings} (a comment made a heading?)"
