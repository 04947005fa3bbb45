"""The corpus of real programs: each learned in one fresh copy of its project, then run
enforced in another fresh copy, where nothing the first run made is left.

``programs/NAME`` is a project as a user would check it out; ``Corpus.learn_then_enforce``
copies it twice (plus any files the case makes first, such as a data folder), learns with
``python-sb --learn`` in the first, hands only the learned ``.py-sandboxes`` to the
second, and runs it there enforced, under the default kernel layer (Landlock).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from runner import Runner

PROGRAMS = Path(__file__).parent / "programs"
#: The active lines of a fresh template: they grant nothing.
TEMPLATE_LINES = frozenset({"py-sandbox=true", "os-sandbox=${OS_SANDBOX:-landlock}"})
#: Grants that only the program may give itself: never learned for these libraries.
NATIVE_OR_DYNAMIC = ("python-api=ALLOW:native", "dynamic-code", "builtins.compile")


def granted(path: Path) -> list[str]:
    """The active rule lines of a rule file, comments and template lines left out."""
    rules: list[str] = []
    for line in path.read_text().splitlines():
        text = line.split("  #", 1)[0].strip()
        if text and not text.startswith("#") and text not in TEMPLATE_LINES:
            rules.append(text)
    return rules


_PYTHON = "expose-ro={python}"


def _interpreter(rule: str) -> str:
    """``{python}`` for the interpreter's own binary, however the rule names it (``~/``,
    ``${PYENV_ROOT:-...}``): where it lives is the machine's, not the program's."""
    return re.sub(r"^expose-ro=\S*/bin/python3(\.\d+)?$", _PYTHON, rule)


class Outcome:
    """The two runs of a program, and the rules the first one learned."""

    def __init__(
        self,
        learned: subprocess.CompletedProcess[str],
        enforced: subprocess.CompletedProcess[str],
        rule_file: Path,
    ) -> None:
        self.learned = learned
        self.enforced = enforced
        self.rule_file = rule_file
        self.rules = granted(rule_file) if rule_file.exists() else []

    def shown(self) -> str:
        """Everything to read when a check fails: both runs and the learned rule file."""
        text = self.rule_file.read_text() if self.rule_file.exists() else "(no rule file)"
        return (
            f"\n--- learning run (exit {self.learned.returncode}) stdout:\n{self.learned.stdout}"
            f"--- stderr:\n{self.learned.stderr}"
            f"--- enforcing run (exit {self.enforced.returncode}) stdout:\n"
            f"{self.enforced.stdout}--- stderr:\n{self.enforced.stderr}"
            f"--- learned {self.rule_file.name}:\n{text}"
        )

    def check(self, expected: set[str], normalise: Callable[[str], str] = str) -> None:
        """Both runs end well with the same output; the rules are the expected ones; and
        nothing grants native code or dynamic code (see the module docstring)."""
        assert self.learned.returncode == 0, self.shown()
        assert self.learned.stdout, self.shown()
        assert self.enforced.returncode == 0, self.shown()
        assert normalise(self.enforced.stdout) == normalise(self.learned.stdout), self.shown()
        # A refusal a library swallows (logging's rotation prints it and goes on) shows
        # on stderr only.
        assert "is refused" not in self.enforced.stderr, self.shown()
        assert "Error" not in self.enforced.stderr, self.shown()
        # Native and dynamic code are checked apart, below: the rest is the program's use.
        rules = {_interpreter(r) for r in self.rules if not r.endswith(NATIVE_OR_DYNAMIC)}
        # The interpreter's binary is one of its own files (granted without a rule) when
        # the venv names it directly, and learned where a link of another venv leads to it.
        assert rules - {_PYTHON} == expected - {_PYTHON}, self.shown()
        wide = [rule for rule in self.rules if any(word in rule for word in NATIVE_OR_DYNAMIC)]
        assert wide == [], self.shown()


class Corpus:
    """Learns a program in one fresh copy of its project, enforces it in another."""

    def __init__(self, python_sb: str, root: Path) -> None:
        self.python_sb = python_sb
        self.root = root

    def copy(self, name: str, where: str, prepare: Callable[[Path], None] | None) -> Path:
        project = self.root / where / name
        shutil.copytree(PROGRAMS / name, project)
        if prepare is not None:
            prepare(project)
        return project

    def learn_then_enforce(
        self,
        name: str,
        *args: str,
        prepare: Callable[[Path], None] | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 240,
    ) -> Outcome:
        first = self.copy(name, "learn", prepare)
        learned = Runner([self.python_sb, "--learn"], first)(*args, env=env, timeout=timeout)
        rule_file = first / ".py-sandboxes"
        second = self.copy(name, "enforce", prepare)
        if rule_file.exists():
            shutil.copy(rule_file, second / ".py-sandboxes")
        enforced = Runner([self.python_sb], second)(*args, env=env, timeout=timeout)
        return Outcome(learned, enforced, rule_file)

    def commands(self, name: str) -> tuple[Path, Path]:
        """Two fresh copies of ``name`` for a case that runs the program itself; hand the
        rule file over with ``hand_over`` once the first has learned."""
        return self.copy(name, "learn", None), self.copy(name, "enforce", None)

    @staticmethod
    def hand_over(first: Path, second: Path) -> Path:
        """Copy the rule file learned in ``first`` (alone) to ``second``; return it."""
        rule_file = first / ".py-sandboxes"
        if rule_file.exists():
            shutil.copy(rule_file, second / ".py-sandboxes")
        return rule_file
