"""The documentation tells the truth: its code examples run, its links resolve."""

from __future__ import annotations

import re
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
            if lang == "python" and "no-run" not in info:
                line = text.count("\n", 0, match.start()) + 1
                found.append((page.name, line, body))
    return found


def test_doc_python_examples_run() -> None:
    for page, line, code in python_blocks():
        exec(compile(code, f"docs/{page}:{line}", "exec"), {"__name__": "__doc_example__"})


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
