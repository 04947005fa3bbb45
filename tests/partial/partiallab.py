"""Partial mode is driven as an application uses it: a module of ``@sandbox`` functions
(``tools.py``) and a program (``main.py``) run by plain python in a project directory.
The same probe run in the program itself is the positive control."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path


class App:
    """Writes ``tools.py`` and ``main.py`` into the project and runs ``main.py``."""

    def __init__(self, project: Path) -> None:
        self.project = project

    def run(
        self,
        main: str,
        tools: str = "",
        *,
        env: dict[str, str] | None = None,
        timeout: float = 60,
        command: list[str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        if tools:
            (self.project / "tools.py").write_text(textwrap.dedent(tools))
        (self.project / "main.py").write_text(textwrap.dedent(main))
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"}
        return subprocess.run(
            [*(command or [sys.executable]), "main.py"],
            cwd=self.project,
            env={**base, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
