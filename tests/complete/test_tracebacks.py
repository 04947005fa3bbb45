"""No frame of the sandbox in a traceback the user sees.

A refusal is raised inside the guards, so its raw traceback ends in their frames (a
wrapper's file under ``pysandboxes/``, the sealed hook's ``<pysandboxes audit hook>``).
Printed, they would bury the program's own line and show the guards' code, and with
``capture_locals`` their locals. Each test first shows the raw traceback holds them (the
test can fail), then that what is printed does not.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner


RULES = "expose-ro=.\nenv=LC_ALL=${LC_ALL}\npython-import=*\n"


@pytest.fixture
def secret(project: Path, tmp_path: Path) -> Path:
    """A file outside the rules, in a project whose rules are written."""
    (project / ".py-sandboxes").write_text(RULES)
    path = tmp_path / "secret.txt"
    path.write_text("TOP-SECRET")
    return path


def no_guard_frame(text: str) -> None:
    assert "pysandboxes/" not in text, text
    assert "<pysandboxes" not in text, text


#: The program: a refused open(), caught; ``{show}`` prints its traceback.
CAUGHT = """\
import logging, sys, traceback
try:
    open({secret!r})
except OSError as exc:
    raw = len(list(traceback.walk_tb(exc.__traceback__)))
    {show}
print("raw frames:", raw)
"""

SHOWS = {
    "print_exc": "traceback.print_exc()",
    "format_exc": "sys.stderr.write(traceback.format_exc())",
    "print_exception": "traceback.print_exception(exc)",
    "logging": "logging.exception('failed')",
    "capture_locals": "sys.stderr.writelines("
    "traceback.TracebackException.from_exception(exc, capture_locals=True).format())",
    "chained": "try:\n        raise ValueError('wrapped') from exc\n"
    "    except ValueError:\n        traceback.print_exc()",
}


@pytest.mark.parametrize("show", SHOWS.values(), ids=SHOWS.keys())
def test_a_refusal_the_program_prints_shows_no_guard_frame(
    sb: Runner, project: Path, secret: Path, show: str
) -> None:
    (project / "app.py").write_text(CAUGHT.format(secret=str(secret), show=show))
    result = sb("app.py")
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.split(":")[1]) > 1  # the guards' frames were there
    assert 'app.py", line 3, in <module>' in result.stderr
    assert f"open({str(secret)!r})" in result.stderr
    assert "RuleFileNotFoundError: Reading" in result.stderr
    no_guard_frame(result.stderr)


THREAD = """\
import threading, traceback
def work():
    {body}
worker = threading.Thread(target=work, name="worker")
worker.start()
worker.join()
"""


def test_a_refusal_in_a_thread_shows_no_guard_frame(
    sb: Runner, project: Path, secret: Path
) -> None:
    (project / "app.py").write_text(THREAD.format(body=f"open({str(secret)!r})"))
    result = sb("app.py")
    assert result.stderr.startswith("Exception in thread worker:\nTraceback"), result.stderr
    assert f"    open({str(secret)!r})\n" in result.stderr
    assert "RuleFileNotFoundError: Reading" in result.stderr
    no_guard_frame(result.stderr)


def test_a_thread_error_is_printed_as_python_prints_it(
    sb: Runner, py: Runner, project: Path
) -> None:
    # The thread hook prints through the traceback module instead of CPython's C one.
    (project / ".py-sandboxes").write_text(RULES)
    (project / "app.py").write_text(THREAD.format(body="raise KeyError('k')"))
    ours, theirs = sb("app.py"), py("app.py")
    assert ours.returncode == theirs.returncode == 0
    assert ours.stderr == theirs.stderr
    assert "Exception in thread worker:" in ours.stderr


def test_the_prompt_after_a_program_shows_no_guard_frame(
    sb: Runner, project: Path, secret: Path
) -> None:
    (project / "app.py").write_text("x = 1\n")
    typed = f"import traceback\nopen({str(secret)!r})\nprint('after')\n"
    result = sb("-i", "app.py", stdin=typed)
    assert "after" in result.stdout
    assert 'File "<stdin>", line 1, in <module>' in result.stderr  # one per statement
    assert "RuleFileNotFoundError: Reading" in result.stderr
    no_guard_frame(result.stderr)


HOLDINGS = """\
import sys, threading, traceback
def held(function):
    cells = [cell.cell_contents for cell in function.__closure__ or ()]
    found = [getattr(c, "__module__", None) or getattr(c, "__name__", "") for c in cells]
    found += [type(v).__module__ for v in (function.__defaults__ or ())]
    found += [type(v).__module__ for v in (function.__kwdefaults__ or {{}}).values()]
    found.append(type(getattr(function, "__wrapped__", None)).__module__)
    found.append(type(getattr(function, "__self__", None)).__module__)
    found += [getattr(v, "__module__", "") or "" for v in function.__globals__.values()]
    return found

installed = [
    traceback.StackSummary._extract_from_extended_frame_gen.__func__,
    threading.excepthook,
    {prompt}
]
print(sorted({{name for f in installed for name in held(f) if "pysandboxes" in name}}))
"""


def test_the_traceback_adjustments_hold_no_guard(sb: Runner, project: Path) -> None:
    # What a program can read of them (closures, defaults, __wrapped__, __self__, their
    # module's globals) holds standard functions and the filter: never a guard.
    (project / ".py-sandboxes").write_text(RULES)
    (project / "app.py").write_text(HOLDINGS.format(prompt=""))
    result = sb("app.py")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "['pysandboxes._inside.tracebacks']\n"  # the filter, nothing else
    result = sb("-i", "-c", "x = 1", stdin=HOLDINGS.format(prompt="sys.excepthook,"))
    assert result.stdout.splitlines()[-1] == "['pysandboxes._inside.tracebacks']", result.stderr
