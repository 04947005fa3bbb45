"""The documentation tells the truth: its code examples run, its links resolve."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"
README = DOCS.parent / "README.md"
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.M | re.S)


def python_blocks() -> list[tuple[str, int, str]]:
    """Every ```python block of docs/, unless its fence says `no-run`."""
    found: list[tuple[str, int, str]] = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        for match in FENCE.finditer(text):
            lang, info, body = match.groups()
            if (
                lang == "python"
                and not {"no-run", "partial"} & set(info.split())
                and ("file=" not in info)
            ):
                line = text.count("\n", 0, match.start()) + 1
                found.append((page.name, line, body))
    return found


def test_doc_python_examples_run() -> None:
    for page, line, code in python_blocks():
        exec(compile(code, f"docs/{page}:{line}", "exec"), {"__name__": "__doc_example__"})


def test_doc_partial_mode_examples_run_as_applications(tmp_path: Path) -> None:
    """A page's ```python partial blocks run as an application's main module, in a
    directory holding the page's `file=NAME` blocks (the module of @sandbox functions,
    the rule file)."""
    ran = 0
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        blocks = [match.groups() for match in FENCE.finditer(text)]
        files = {
            info.split("file=")[1].split()[0]: body for _, info, body in blocks if "file=" in info
        }
        where = tmp_path / page.stem  # one directory a page: its examples run in turn
        where.mkdir()
        for name, content in files.items():
            (where / name).write_text(content)
        for number, (lang, info, body) in enumerate(blocks):
            if lang != "python" or "partial" not in info.split():
                continue
            (where / "main.py").write_text(body)
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"}
            result = subprocess.run(
                [sys.executable, "main.py"], cwd=where, env=env, capture_output=True, text=True
            )
            assert result.returncode == 0, f"docs/{page.name} block {number}: {result.stderr}"
            ran += 1
    assert ran >= 2


def test_every_relative_link_resolves() -> None:
    for page in [README, *DOCS.glob("*.md")]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


def test_readme_starts_with_exactly_two_commands() -> None:
    text = README.read_text()
    first = FENCE.search(text)
    assert first is not None
    assert text[: first.start()].strip().startswith("# ")
    commands = [ln.split("#")[0].strip() for ln in first.group(3).splitlines() if ln.strip()]
    assert commands == ["./scripts/demo", "./scripts/test"]
    ci = (README.parent / ".ci" / "run").read_text()
    assert "exec ./scripts/test\n" in ci


#: Words that once marked unbuilt features: a page must say what exists, not what is to come.
STALE = ("not built yet", "later release", "| planned |", "comes later", "enforcement comes with")


def test_no_page_calls_a_feature_planned() -> None:
    for page in [README, *DOCS.glob("*.md")]:
        text = page.read_text().lower()
        for stale in STALE:
            assert stale not in text, f"{page.name} says {stale!r}"


def test_every_public_name_is_documented() -> None:
    import pysandboxes

    text = "\n".join(page.read_text() for page in DOCS.glob("*.md"))
    for name in pysandboxes.__all__:
        if name != "__version__":
            assert f"`{name}" in text, f"pysandboxes.{name} appears nowhere in docs/"


def test_the_supported_versions_are_the_tested_ones() -> None:
    """The packages, the README, the test command and CI name the same CPython versions."""
    root = README.parent
    supported = ["3.11", "3.12", "3.13"]
    for package in ("pysandboxes", "python-sb"):
        metadata = (root / "packages" / package / "pyproject.toml").read_text()
        assert 'requires-python = ">=3.11"' in metadata
    classifiers = (root / "packages" / "pysandboxes" / "pyproject.toml").read_text()
    assert all(f"Programming Language :: Python :: {v}" in classifiers for v in supported)
    assert "CPython 3.11, 3.12 or 3.13" in README.read_text()
    script = (root / "scripts" / "test").read_text()
    assert "PYSANDBOXES_TEST_PYTHONS:-3.11 3.12 3.13" in script
    workflow = (root / ".github" / "workflows" / "ci.yml").read_text()
    assert "run: .ci/run" in workflow
    listed = re.search(r"python-version: \|\n((?:\s+3\.\d+\n)+)", workflow)
    assert listed is not None
    assert sorted(listed.group(1).split()) == supported
