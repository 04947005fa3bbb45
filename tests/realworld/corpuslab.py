"""The corpus of real programs: each learned once, then replayed, enforced, elsewhere.

``programs/NAME`` is a project as a user would check it out. ``Corpus.learn_then_enforce``
runs it with plain Python in one fresh copy (the output to match), learns it with
``python-sb --learn`` in a second, then hands only the learned ``.py-sandboxes`` to a
fresh copy at another path (another depth, another name above it) for each kernel
provider the machine has (``landlock``, ``unshare``, ``bwrap``), and runs it there
enforced. Nothing the earlier runs made is left in a replay's copy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from pysandboxes._policy.template import SAFE_MODULES, active_lines
from runner import Runner

PROGRAMS = Path(__file__).parent / "programs"
#: The active lines of a fresh template: the layers, and the imports of the standard
#: library's pure modules (no file, variable, connection or call).
TEMPLATE_LINES = frozenset(active_lines())
#: What the template grants already: a learned line for one of these is not written.
TEMPLATE_IMPORTS = frozenset(f"python-import={name}" for name in SAFE_MODULES)
#: Grants that only the program may give itself: never learned for these libraries.
NATIVE_OR_DYNAMIC = ("python-api=ALLOW:native", "dynamic-code", "builtins.compile")


def providers() -> list[str]:
    """The kernel providers this machine can run, ``landlock`` first."""
    from pysandboxes._host.select import unavailable_reason

    return [name for name in ("landlock", "unshare", "bwrap") if unavailable_reason(name) is None]


def granted(path: Path) -> list[str]:
    """The active rule lines of a rule file, comments and template lines left out."""
    rules: list[str] = []
    for line in path.read_text().splitlines():
        text = line.split("  #", 1)[0].strip()
        if text and not text.startswith("#") and text not in TEMPLATE_LINES:
            rules.append(text)
    return rules


def machine_paths() -> dict[str, str]:
    """The absolute places no portable rule names: the home, the venv, the interpreter."""
    found = {
        "the home directory": os.path.expanduser("~"),
        "the venv": sys.prefix,
        "the interpreter's installation": sys.base_prefix,
    }
    return {what: os.path.realpath(path) for what, path in found.items()} | {
        f"{what} (as named)": path for what, path in found.items()
    }


class Outcome:
    """The runs of a program: plain, learning, and one enforced replay per provider."""

    def __init__(
        self,
        learned: subprocess.CompletedProcess[str],
        enforced: dict[str, subprocess.CompletedProcess[str]],
        rule_file: Path,
        plain: subprocess.CompletedProcess[str] | None = None,
    ) -> None:
        self.plain = plain
        self.learned = learned
        self.enforced = enforced
        self.rule_file = rule_file
        self.rules = granted(rule_file) if rule_file.exists() else []

    def shown(self) -> str:
        """Everything to read when a check fails: every run and the learned rule file."""
        text = self.rule_file.read_text() if self.rule_file.exists() else "(no rule file)"
        runs = [("plain", self.plain), ("learning", self.learned)]
        runs += [(f"enforced under {name}", run) for name, run in self.enforced.items()]
        shown = [
            f"\n--- {what} run (exit {run.returncode}) stdout:\n{run.stdout}"
            f"--- stderr:\n{run.stderr}"
            for what, run in runs
            if run is not None
        ]
        return "".join(shown) + f"--- learned {self.rule_file.name}:\n{text}"

    def check(self, expected: set[str], normalise: Callable[[str], str] = str) -> None:
        """Every run ends well with plain Python's output; no replay refuses anything; the
        rules are the expected ones, portable, and grant no native or dynamic code."""
        reference = self.plain if self.plain is not None else self.learned
        assert reference.returncode == 0, self.shown()
        assert reference.stdout, self.shown()
        assert self.learned.returncode == 0, self.shown()
        assert normalise(self.learned.stdout) == normalise(reference.stdout), self.shown()
        assert self.enforced, self.shown()
        for run in self.enforced.values():
            assert run.returncode == 0, self.shown()
            assert normalise(run.stdout) == normalise(reference.stdout), self.shown()
            # Silent: no refusal, not even one a library swallowed (the summary says it).
            assert "refused" not in run.stderr, self.shown()
            assert "Error" not in run.stderr, self.shown()
        rules = {rule for rule in self.rules if not rule.endswith(NATIVE_OR_DYNAMIC)}
        # Which files of /sys a library reads depends on the machine (pandas reads the
        # cgroup's CPU quota, by v1 or v2 names): each is learned, read-only, by name.
        rules = {rule for rule in rules if not rule.startswith("expose-ro=/sys/")}
        assert rules == expected - TEMPLATE_IMPORTS, self.shown()
        wide = [rule for rule in self.rules if any(word in rule for word in NATIVE_OR_DYNAMIC)]
        assert wide == [], self.shown()
        self.check_portable()

    def check_portable(self) -> None:
        """No rule names this machine's home, venv or interpreter by its absolute path
        (a colleague's are elsewhere), nor the directories above the project."""
        project = os.path.realpath(self.rule_file.parent)
        above = {str(parent) for parent in Path(project).parents}
        for rule in self.rules:
            key, _, value = rule.partition("=")
            if key not in ("expose-ro", "expose-rw"):
                continue
            for what, path in machine_paths().items():
                assert path not in value, f"{rule} names {what}{self.shown()}"
            assert value.rstrip("/") not in above, f"{rule} is above the project{self.shown()}"
            assert not value.startswith(".."), f"{rule} is above the project{self.shown()}"


class Corpus:
    """Runs a program plain, learns it, replays it enforced elsewhere (see the module)."""

    def __init__(self, python_sb: str, root: Path) -> None:
        self.python_sb = python_sb
        self.root = root
        self.providers = providers()

    def copy(self, name: str, where: str, prepare: Callable[[Path], None] | None) -> Path:
        project = self.root / where / name
        shutil.copytree(PROGRAMS / name, project)
        if prepare is not None:
            prepare(project)
        return project

    def replay_copy(self, name: str, provider: str, prepare: Callable[[Path], None] | None) -> Path:
        """A fresh copy at another path than the learning one: deeper, under other names."""
        return self.copy(name, f"elsewhere/{provider}/checkout", prepare)

    def learn_then_enforce(
        self,
        name: str,
        *args: str,
        prepare: Callable[[Path], None] | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 240,
        plain: bool = True,
        launcher: list[str] | None = None,
        replayer: list[str] | None = None,
    ) -> Outcome:
        """Run ``name`` plain, learn it, replay it per provider (see the module);
        ``launcher`` starts python-sb another way (``python3 -m python_sb``), ``replayer``
        the replays only (another venv's)."""
        sandbox = launcher if launcher is not None else [self.python_sb]
        replay = replayer if replayer is not None else sandbox
        reference = None
        if plain:
            control = self.copy(name, "plain", prepare)
            reference = Runner([sys.executable], control)(*args, env=env, timeout=timeout)
        first = self.copy(name, "learn", prepare)
        learned = Runner([*sandbox, "--learn"], first)(*args, env=env, timeout=timeout)
        rule_file = first / ".py-sandboxes"
        enforced: dict[str, subprocess.CompletedProcess[str]] = {}
        for provider in self.providers:
            second = self.replay_copy(name, provider, prepare)
            self.hand_over(first, second)
            run_env = {**(env or {}), "OS_SANDBOX": provider}
            enforced[provider] = Runner(replay, second)(*args, env=run_env, timeout=timeout)
        return Outcome(learned, enforced, rule_file, reference)

    @staticmethod
    def hand_over(first: Path, second: Path) -> Path:
        """Copy the rule file learned in ``first`` (alone) to ``second``; return it."""
        rule_file = first / ".py-sandboxes"
        if rule_file.exists():
            shutil.copy(rule_file, second / ".py-sandboxes")
        return rule_file
