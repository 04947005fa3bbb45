"""Helpers of the learning tests: the rules a learned file grants."""

from __future__ import annotations

import os
from pathlib import Path

from pysandboxes._policy.template import active_lines
from pysandboxes._wire.codec import Event, decode_events

#: The active lines of a fresh template: the layers, and the imports of the standard
#: library's pure modules (no file, variable, connection or call).
TEMPLATE_LINES = frozenset(active_lines())


def granted(path: Path) -> list[str]:
    """The active rule lines of a rule file, comments and template lines left out."""
    rules: list[str] = []
    for line in path.read_text().splitlines():
        text = line.split("  #", 1)[0].strip()
        if text and not text.startswith("#") and text not in TEMPLATE_LINES:
            rules.append(text)
    return rules


def sent_events(read_end: int) -> list[Event]:
    """What a recorder under test has written to its pipe so far, decoded, none dropped."""
    os.set_blocking(read_end, False)
    try:
        data = os.read(read_end, 1 << 20)
    except BlockingIOError:
        data = b""
    events, dropped = decode_events([data])
    assert dropped == 0
    return events
