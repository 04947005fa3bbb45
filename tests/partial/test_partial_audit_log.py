"""Partial mode keeps the same decision log, and the replay reads it as it reads complete
mode's."""

from __future__ import annotations

import json
from pathlib import Path

from partiallab import App  # type: ignore[import-not-found]

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

TOOLS = """
    from pysandboxes import sandbox

    @sandbox
    def read(path):
        try:
            with open(path) as handle:
                return handle.read()
        except OSError as exc:
            return type(exc).__name__
"""


def test_partial_mode_logs_decisions_and_sums_up_refusals(
    app: App, project: Path, sb: Runner
) -> None:
    (project / "data").mkdir()
    (project / "data" / "in.txt").write_text("hello")
    (project / ".py-sandboxes").write_text("expose-ro=./data\n")
    result = app.run(
        """
        import tools
        from pysandboxes import sandboxes
        with sandboxes(audit_log="audit.jsonl"):
            print(tools.read("data/in.txt"), tools.read("/etc/hostname"))
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello RuleFileNotFoundError\n"
    assert "1 access was refused by the sandbox (1 file)" in result.stderr
    log = [json.loads(line) for line in (project / "audit.jsonl").read_text().splitlines()]
    assert {line["mode"] for line in log} == {"partial"}
    seen = {(line["target"], line["verdict"], line["rule"]) for line in log}
    assert (str((project / "data" / "in.txt").resolve()), "allowed", ".py-sandboxes:1") in seen
    assert ("/etc/hostname", "refused", "no rule") in seen
    replay = sb("--replay=audit.jsonl", "--expose-ro=/etc/hostname")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "file /etc/hostname (read) at tools.py:" in replay.stdout


VARIABLES = """
    import os
    from pysandboxes import sandbox

    @sandbox
    def read():
        return os.environ.get("STRIPE_API_TOKEN"), os.environ.get("GREETING")
"""


def test_the_summary_names_a_secret_variable_without_a_grant_to_paste(
    app: App, project: Path
) -> None:
    (project / ".py-sandboxes").write_text("python-import=os\n")
    result = app.run(
        """
        import tools
        from pysandboxes import sandboxes
        with sandboxes(audit_log="audit.jsonl"):
            print(tools.read())
        """,
        VARIABLES,
        env={"STRIPE_API_TOKEN": "tok-1", "GREETING": "hi"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "(None, None)\n"  # the control is the application: it has both
    token = next(line for line in result.stderr.splitlines() if "STRIPE_API_TOKEN" in line)
    assert "a secret, no grant suggested (see docs/learning.md#secrets)" in token
    assert "env=STRIPE_API_TOKEN" not in result.stderr
    assert "add 'env=GREETING=${GREETING}' to .py-sandboxes" in result.stderr
