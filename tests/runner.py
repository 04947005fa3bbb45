"""Runs a command in a project directory: ``python-sb``, plain ``python``, or an
application of partial mode. Shared by the fixtures (tests/ is on sys.path)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


class Runner:
    """Runs a command in a project directory: ``python-sb`` or plain ``python``.

    Security tests run the same probe both ways: the plain run shows the probe works (the
    test can fail), the sandboxed run shows it is refused.
    """

    def __init__(self, command: list[str], project: Path) -> None:
        self.command = command
        self.project = project

    def __call__(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        stdin: str | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"}
        return subprocess.run(
            [*self.command, *args],
            cwd=self.project,
            env={**base, **(env or {})},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
