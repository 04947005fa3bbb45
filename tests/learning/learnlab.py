"""Helpers of the learning tests: the rules a learned file grants."""

from __future__ import annotations

from pathlib import Path

#: The active lines of a fresh template: they grant nothing.
TEMPLATE_LINES = frozenset({"py-sandbox=true", "os-sandbox=${OS_SANDBOX:-landlock}"})


def granted(path: Path) -> list[str]:
    """The active rule lines of a rule file, comments and template lines left out."""
    rules: list[str] = []
    for line in path.read_text().splitlines():
        text = line.split("  #", 1)[0].strip()
        if text and not text.startswith("#") and text not in TEMPLATE_LINES:
            rules.append(text)
    return rules
