"""Repeated decisions are counted cheaply, each under the rule that decided it.

The sandboxed side remembers, per connection allowed and per variable forwarded, which
rule allowed it (judged once, not at each repeat): a different port or variable after
many repeats must still be logged under its own rule, and every repeat still counted.
"""

from __future__ import annotations

import json
from pathlib import Path

from listener import Listener

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner


def _counts(log: Path, kind: str) -> dict[tuple[str, str], int]:
    """``(target, rule) -> count`` of the allowed decisions of ``kind``, summed."""
    counts: dict[tuple[str, str], int] = {}
    for text in log.read_text().splitlines():
        line = json.loads(text)
        if line["kind"] == kind and line["verdict"] == "allowed":
            key = (str(line["target"]), str(line["rule"]))
            counts[key] = counts.get(key, 0) + int(line["count"])
    return counts


def test_connections_and_reads_repeated_are_each_counted_under_their_own_rule(
    sb: Runner, project: Path, tcp: Listener
) -> None:
    other = Listener()
    try:
        (project / ".py-sandboxes").write_text(
            "python-import=os, socket\n"  # 1
            f"net=ALLOW|tcp|127.0.0.1|{tcp.port}|OUT\n"  # 2
            f"net=ALLOW|tcp|127.0.0.1|{other.port}|OUT\n"  # 3
            "env=GIVEN=yes\n"  # 4
            "env=ALSO=too\n"  # 5
            "audit-log=audit.jsonl\n"
        )
        (project / "app.py").write_text(
            "import os, socket\n"
            f"for port in [{tcp.port}] * 5 + [{other.port}] * 5 + [{tcp.port}] * 2:\n"
            "    socket.create_connection(('127.0.0.1', port)).close()\n"
            "for _ in range(100):\n"
            "    os.environ.get('GIVEN')\n"
            "print(os.environ['ALSO'], os.environ['ALSO'], os.environ['ALSO'])\n"
        )
        result = sb("app.py")
    finally:
        other.close()
    assert result.returncode == 0, result.stderr
    assert result.stdout == "too too too\n"
    log = project / "audit.jsonl"
    assert _counts(log, "net") == {
        (f"tcp:127.0.0.1:{tcp.port}", ".py-sandboxes:2"): 7,
        (f"tcp:127.0.0.1:{other.port}", ".py-sandboxes:3"): 5,
    }
    env = _counts(log, "env")
    assert env[("GIVEN", ".py-sandboxes:4")] == 100
    assert env[("ALSO", ".py-sandboxes:5")] == 3
