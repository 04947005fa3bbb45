"""Partial mode is driven as an application uses it: a module of ``@sandbox`` functions
(``tools.py``) and a program (``main.py``) run by plain python in a project directory.
The same probe run in the program itself is the positive control."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from runner import Runner  # type: ignore[import-not-found]


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
        runner = Runner(command or [sys.executable], self.project)
        return runner("main.py", env=env, timeout=timeout)
