"""The escape tests' laboratory: a secret outside the project, probes run both ways.

Every escape test follows the same four steps:

1. ``lab.control(code)``: the probe runs under plain ``python`` on a fresh tree and must
   succeed (the secret is printed, the file is written): the test can fail.
2. ``lab.refused(code, refusal)``: the tree is rebuilt, photographed, and the same probe
   runs under ``python-sb``. It must print ``REFUSED <refusal class>`` (or die with it),
   the secret must appear nowhere in its output, and the tree must be unchanged.

Probes are small programs built with ``attempt()``: the body runs inside a ``try`` and
prints ``GOT ...`` or ``DONE``; an exception prints ``REFUSED <class> <message>``.

The tree (rebuilt before each run by ``lab.reset()``)::

    tmp_path/
      outside/              never exposed
        secret.txt          holds lab.secret
        sub/other.txt       holds lab.secret too
      project/              the cwd of both runs
        .py-sandboxes       written by lab.rules()
        data/config.txt     exposed read-only by the default rules
        data/a/b/           a deeper read-only directory
        out/                exposed read-write by the default rules
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import textwrap
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_RULES = ("expose-ro=./data", "expose-rw=./out")
CONFIG = "name = demo\n"

Result = subprocess.CompletedProcess[str]


def attempt(body: str, *, imports: str = "os, sys") -> str:
    """A probe: ``body`` inside ``try``; any exception prints ``REFUSED <class> <message>``."""
    inner = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
    return (
        f"import {imports}\n"
        "try:\n"
        f"{inner}\n"
        "except Exception as exc:\n"
        "    print('REFUSED', type(exc).__name__, exc)\n"
    )


def tree(root: Path) -> dict[str, tuple[Any, ...]]:
    """Everything observable about a tree: names, kinds, contents, link targets, modes,
    modification times. Reads never change it; any write, rename or removal does."""
    found: dict[str, tuple[Any, ...]] = {}
    if not os.path.lexists(root):
        return found
    info = os.lstat(root)
    found["."] = ("root", info.st_mode, info.st_mtime_ns)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted([*dirnames, *filenames]):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                found[rel] = ("dir", info.st_mode, info.st_mtime_ns)
            elif stat.S_ISREG(info.st_mode):
                found[rel] = (
                    "file",
                    Path(path).read_bytes(),
                    info.st_mode,
                    info.st_mtime_ns,
                )
            else:
                found[rel] = ("other", info.st_mode, info.st_mtime_ns)
    return found


class Lab:
    """A secret outside the project and the runners that probe it."""

    def __init__(self, tmp_path: Path, project: Path, py: Any, sb: Any) -> None:
        self.tmp = tmp_path
        self.project = project
        self.outside = tmp_path / "outside"
        self.secret = f"SECRET-{uuid.uuid4().hex}"
        self.secret_file = self.outside / "secret.txt"
        self.data = project / "data"
        self.out = project / "out"
        self.py = py
        self.sb = sb
        self.rule_lines: tuple[str, ...] = DEFAULT_RULES
        self._setups: list[Callable[[], None]] = []
        self.env: dict[str, str] | None = None
        self.reset()

    # -- the tree ----------------------------------------------------------------------

    def setup(self, prepare: Callable[[], None]) -> None:
        """Run ``prepare`` after every rebuild of the tree (extra links, files...)."""
        self._setups.append(prepare)
        prepare()

    def reset(self) -> None:
        """Rebuild the tree from scratch: what a previous run changed is gone."""
        if os.path.lexists(self.outside):
            _make_writable(self.outside)
            shutil.rmtree(self.outside)
        self.project.mkdir(exist_ok=True)  # a control may have moved or removed it
        _make_writable(self.project)
        for entry in os.scandir(self.project):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.remove(entry.path)
        self.outside.mkdir()
        self.secret_file.write_text(self.secret + "\n")
        (self.outside / "sub").mkdir()
        (self.outside / "sub" / "other.txt").write_text(self.secret + "\n")
        (self.data / "a" / "b").mkdir(parents=True)
        (self.data / "config.txt").write_text(CONFIG)
        self.out.mkdir()
        self.rules(*self.rule_lines)
        for prepare in self._setups:
            prepare()

    def rules(self, *lines: str) -> None:
        """Write the rule file (kept for every later rebuild).

        The probes here attack other guards, so every import is allowed (after the
        given lines, which keep their line numbers) unless a line says otherwise; the
        import guard has its own tests.
        """
        self.rule_lines = lines
        if not any(line.startswith("python-import") for line in lines):
            lines = (*lines, "python-import=*")
        (self.project / ".py-sandboxes").write_text("\n".join(lines) + "\n")

    def state(self) -> dict[str, dict[str, tuple[Any, ...]]]:
        """The outside tree and the project tree."""
        return {"outside": tree(self.outside), "project": tree(self.project)}

    # -- the runs ----------------------------------------------------------------------

    def probe(self, body: str, *, imports: str = "os, sys") -> str:
        """``attempt(body)`` with the lab's paths as constants: ``SECRET_FILE``,
        ``OUTSIDE``, ``PROJECT``, ``DATA``, ``OUT`` (absolute ``str`` paths)."""
        names = {
            "SECRET_FILE": self.secret_file,
            "OUTSIDE": self.outside,
            "PROJECT": self.project,
            "DATA": self.data,
            "OUT": self.out,
        }
        constants = "".join(f"{name} = {str(path)!r}\n" for name, path in names.items())
        return constants + attempt(body, imports=imports)

    def _args(self, code: str, mode: str, args: tuple[str, ...]) -> list[str]:
        if mode == "command":
            return ["-c", code, *args]
        (self.project / "app.py").write_text(code)
        if mode == "script":
            return ["app.py", *args]
        return ["-m", "app", *args]

    def control(self, code: str, *args: str, mode: str = "command") -> Result:
        """Plain ``python`` on a fresh tree: the probe must work there."""
        self.reset()
        return self.py(*self._args(code, mode, args), env=self.env)

    def run_sandboxed(self, code: str, *args: str, mode: str = "command") -> Result:
        """``python-sb`` on a fresh tree, with the rules of ``rules()``."""
        self.reset()
        return self.sb(*self._args(code, mode, args), env=self.env)

    def refused(
        self,
        code: str,
        refusal: str | tuple[str, ...],
        *args: str,
        mode: str = "command",
        watch: Callable[[], object] | None = None,
    ) -> Result:
        """Run under ``python-sb`` and check the refusal, the silence and the tree.

        ``refusal`` is the class name expected (or several accepted ones); ``watch``
        photographs what must not change (default: both trees).
        """
        accepted = (refusal,) if isinstance(refusal, str) else refusal
        self.reset()
        argv = self._args(code, mode, args)
        look = watch or self.state
        before = look()
        result = self.sb(*argv, env=self.env)
        output = result.stdout + result.stderr
        assert self.secret not in output, f"the secret got out under python-sb:\n{output}"
        printed = any(f"REFUSED {name} " in result.stdout for name in accepted)
        died = result.returncode != 0 and any(name in result.stderr for name in accepted)
        assert printed or died, (
            f"python-sb did not refuse with {refusal} (status {result.returncode}):\n{output}"
        )
        assert "DONE" not in result.stdout, f"the action went through:\n{output}"
        assert look() == before, f"python-sb changed the tree:\n{output}"
        return result


def shape(root: Path) -> dict[str, tuple[Any, ...]]:
    """``tree(root)`` without modification times: the same for two fresh builds."""
    return {
        name: tuple(v for v in value if not (isinstance(v, int) and v > 10**15))
        for name, value in tree(root).items()
    }


def _make_writable(root: Path) -> None:
    """Undo chmod probes so the tree can be removed."""
    for dirpath, dirnames, _ in os.walk(root):
        for name in dirnames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, 0o755)
    if not os.path.islink(root):
        os.chmod(root, 0o755)


def got(result: Result, text: str) -> bool:
    """Whether the probe printed ``text`` (a control's success)."""
    return text in result.stdout
