"""Permission prompts in complete mode (``python-sb --prompt``), on a real pseudo-terminal.

A refusal of the Python layer becomes a question ``python-sb`` draws on the terminal it
opens itself; the answer is read there, only while its own question is pending, with what
was typed before discarded. What it allows, ``python-sb`` performs (the file opened
outside the sandbox, its descriptor handed over). Each probe is first run without the
sandbox: the positive control.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from runner import Runner

ENV = {"PATH": os.environ.get("PATH", ""), "TERM": "xterm", "LC_ALL": "C.UTF-8"}
QUESTION = r"Allow\? \[o/r/a/d\] "

READ_TWICE = """
import sys
for _ in range(2):
    try:
        with open(sys.argv[1]) as handle:
            print("READ", handle.read().strip(), flush=True)
    except OSError as exc:
        print("REFUSED", type(exc).__name__, exc, flush=True)
"""

NATIVE_RULES = "expose-rw=.\npython-import=ctypes, time\npython-api=ALLOW:native\n"
FAKE_QUESTION = """
import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
# A question of its own, drawn like python-sb's, and an answer typed for it (TIOCSTI).
print("python-sb: the program asks to read " + sys.argv[1], flush=True)
print("Allow? [o/r/a/d] ", end="", flush=True)
typed = [libc.ioctl(0, 0x5412, ctypes.c_char_p(key)) for key in (b"o", b"\\r")]
if typed == [0, 0]:
    print("INJECTED", flush=True)
else:
    print("INJECTION REFUSED", ctypes.get_errno(), flush=True)
time.sleep(1.5)  # the person types 'o' now: it waits in the terminal, read by nobody
try:
    with open(sys.argv[1]) as handle:
        print("READ", handle.read().strip(), flush=True)
except OSError as exc:
    print("REFUSED", type(exc).__name__, flush=True)
"""

NATIVE_REWRITE = """
import ctypes, sys
# Native code: the Python layer does not see it, and the kernel lets it write in ".".
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.open(b".py-sandboxes", 0o2001)  # O_WRONLY | O_APPEND
print("REWROTE", libc.write(fd, b"expose-rw=/\\n", 12), flush=True)
open(sys.argv[1]).close()
"""


@pytest.fixture
def hidden(tmp_path: Path) -> Path:
    """A file no rule exposes, outside the project."""
    place = tmp_path / "elsewhere"
    place.mkdir()
    notes = place / "notes.txt"
    notes.write_text("hidden text\n")
    return notes


def spawn(python_sb: str, project: Path, *args: str) -> pexpect.spawn[str]:
    return pexpect.spawn(
        python_sb, list(args), cwd=str(project), env=ENV, encoding="utf-8", timeout=30
    )


def screen(child: pexpect.spawn[str]) -> str:
    child.expect(pexpect.EOF)
    child.close()
    return (child.before or "").replace("\r", "")


def test_the_probe_reads_the_file_without_the_sandbox(
    py: Runner, project: Path, hidden: Path
) -> None:
    (project / "probe.py").write_text(READ_TWICE)
    result = py("probe.py", str(hidden))
    assert result.stdout == "READ hidden text\nREAD hidden text\n"


def test_cant_read_a_hidden_file_without_a_prompt(sb: Runner, project: Path, hidden: Path) -> None:
    (project / ".py-sandboxes").write_text("")
    (project / "probe.py").write_text(READ_TWICE)
    result = sb("probe.py", str(hidden))
    assert result.stdout.count("REFUSED RuleFileNotFoundError") == 2


def test_once_reads_the_file_and_the_next_read_asks_again_then_deny_refuses(
    python_sb: str, project: Path, hidden: Path
) -> None:
    (project / ".py-sandboxes").write_text("")
    (project / "probe.py").write_text(READ_TWICE)
    child = spawn(python_sb, project, "--prompt", "probe.py", str(hidden))
    child.expect(QUESTION)
    question = (child.before or "").replace("\r", "") + "Allow? [o/r/a/d] "
    assert question == (
        "\n"
        f"python-sb: the program asks to read {hidden} (at probe.py:5)\n"
        f"  the rule that allows it: expose-ro={hidden}\n"
        "  o = once, r = for this run, a = always (writes it to .py-sandboxes), d = deny\n"
        "Allow? [o/r/a/d] "
    )
    child.send("o")
    child.expect(QUESTION)  # once: the next read asks again
    assert "READ hidden text" in (child.before or "")
    child.send("d")
    shown = screen(child)
    assert shown.startswith("denied\nREFUSED RuleFileNotFoundError")
    assert f"Add 'expose-ro={hidden}' to .py-sandboxes to allow it" in shown
    assert child.exitstatus == 0


def test_deny_of_a_write_is_todays_permission_error(
    python_sb: str, project: Path, hidden: Path
) -> None:
    (project / ".py-sandboxes").write_text(f"expose-ro={hidden}\n")
    write = "open(__import__('sys').argv[1], 'a').write('x')"
    child = spawn(python_sb, project, "--prompt", "-c", write, str(hidden))
    child.expect(QUESTION)
    assert f"the program asks to write {hidden}" in (child.before or "")
    child.send("d")
    assert "RulePermissionError" in screen(child)
    assert hidden.read_text() == "hidden text\n"


def test_always_writes_the_rule_and_the_next_run_does_not_ask(
    python_sb: str, project: Path, hidden: Path
) -> None:
    rules = project / ".py-sandboxes"
    rules.write_text("prompt=tty\n")  # the key in the rule file, not --prompt
    before = rules.read_text()
    (project / "probe.py").write_text(READ_TWICE)
    child = spawn(python_sb, project, "probe.py", str(hidden))
    child.expect(QUESTION)
    child.send("a")
    shown = screen(child)  # allowed for the run: the second read does not ask
    assert shown.count("READ hidden text") == 2
    assert "Allow?" not in shown
    after = rules.read_text().splitlines(True)
    diff = "".join(difflib.unified_diff(before.splitlines(True), after))
    added = [line[1:] for line in diff.splitlines() if line.startswith("+") and line[1:2] != "+"]
    assert added[-1] == f"expose-ro={hidden}  # allowed at a prompt, {time.strftime('%Y-%m-%d')}"
    assert added[-2].startswith("# Add rules ("), diff  # the learning writer's block
    assert (project / ".py-sandboxes.old").read_text() == before
    child = spawn(python_sb, project, "probe.py", str(hidden))
    assert screen(child).count("READ hidden text") == 2  # no question: the rule allows it


def test_always_survives_the_rule_watcher_of_a_writable_exposure(
    python_sb: str, project: Path, hidden: Path
) -> None:
    rules = project / ".py-sandboxes"
    # The rule file lies in a read-write exposure: at exit the waiter sets back what the
    # program changed in it, never what python-sb wrote at a prompt.
    rules.write_text("expose-rw=.\n")
    (project / "probe.py").write_text(READ_TWICE)
    child = spawn(python_sb, project, "--prompt", "probe.py", str(hidden))
    child.expect(QUESTION)
    child.send("a")
    shown = screen(child)
    assert "was changed while the program ran" not in shown
    assert f"expose-ro={hidden}  # allowed at a prompt" in rules.read_text()


def test_the_program_rewriting_its_rule_file_is_still_set_back(
    python_sb: str, project: Path, hidden: Path
) -> None:
    rules = project / ".py-sandboxes"
    rules.write_text(NATIVE_RULES)
    (project / "probe.py").write_text(NATIVE_REWRITE)
    # subprocess: no read-only bind keeps the rule file from native code.
    options = ("--prompt", "--os-sandbox=subprocess")
    child = spawn(python_sb, project, *options, "probe.py", str(hidden))
    child.expect(QUESTION)
    child.send("a")  # written to a file the program changed: not built upon
    shown = screen(child)
    assert "allowed for this run only" in shown
    assert "was changed while the program ran" in shown
    assert rules.read_text() == NATIVE_RULES


def test_cant_answer_its_own_fake_question(python_sb: str, project: Path, hidden: Path) -> None:
    (project / ".py-sandboxes").write_text(NATIVE_RULES)
    (project / "probe.py").write_text(FAKE_QUESTION)
    child = spawn(python_sb, project, "--prompt", "probe.py", str(hidden))
    child.expect(r"INJECT\w* ?\w*")
    assert child.after in ("INJECTION REFUSED", "INJECTED")
    if child.after == "INJECTED":
        pytest.fail("the sandbox typed into the terminal (TIOCSTI)")
    child.send("o")  # answers the fake question: typed ahead of the real one
    child.expect(QUESTION)  # the real question: what was typed before is discarded
    assert "READ" not in (child.before or "")
    time.sleep(0.5)
    assert child.isalive()  # the 'o' answered nothing: the question is still pending
    child.send("d")
    shown = screen(child)
    assert "REFUSED RuleFileNotFoundError" in shown
    assert "READ hidden" not in shown


def test_prompt_without_a_terminal_says_so_and_refuses(
    python_sb: str, project: Path, hidden: Path
) -> None:
    (project / ".py-sandboxes").write_text("")
    (project / "probe.py").write_text(READ_TWICE)
    result = subprocess.run(
        [python_sb, "--prompt", "probe.py", str(hidden)],
        cwd=project,
        env=ENV,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,  # no controlling terminal: nobody to ask
        check=False,
    )
    assert result.stderr.startswith(
        "python-sb: --prompt: nobody can be asked (/dev/tty cannot be opened"
    ), result.stderr
    assert "refusals are not asked about in this run" in result.stderr
    assert result.stdout.count("REFUSED RuleFileNotFoundError") == 2


def test_a_learning_run_asks_nothing(python_sb: str, project: Path, hidden: Path) -> None:
    (project / "probe.py").write_text(READ_TWICE)
    child = spawn(python_sb, project, "--prompt", "--learn", "probe.py", str(hidden))
    shown = screen(child)
    assert "Allow?" not in shown
    assert shown.count("READ hidden text") == 2


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("python-sb runs on Linux")


def _asked_at_a_terminal(request: object, keys: list[bytes]) -> tuple[object, str]:
    """The ``TtyDecider``'s answer to ``request`` on a pseudo-terminal of its own, each of
    ``keys`` typed once the question is on it; the answer and the screen."""
    import select
    import threading

    from pysandboxes._host.deciders import TtyDecider

    master, slave = os.openpty()
    held: list[str] = []
    decider = TtyDecider(
        lambda: held.append("held") or [], held.append, ".py-sandboxes", os.ttyname(slave)
    )
    answer: list[object] = []
    thread = threading.Thread(target=lambda: answer.append(decider.decide(request, 0)))  # type: ignore[arg-type]
    thread.start()
    seen = b""
    try:
        while b"Allow?" not in seen:
            select.select([master], [], [], 10)
            seen += os.read(master, 4096)
        time.sleep(0.2)
        for key in keys:
            os.write(master, key)
            time.sleep(0.1)
        thread.join(10)
        while select.select([master], [], [], 0.2)[0]:
            seen += os.read(master, 4096)
    finally:
        os.close(master)
        os.close(slave)
    assert held == ["held", []]  # the program was held, then continued
    return answer[0], seen.decode()


def test_always_is_not_an_answer_for_a_secret() -> None:
    from pysandboxes import Decision, PermissionRequest

    request = PermissionRequest("file", "/home/me/.ssh/id_ed25519", "read", "a.py:1", "", True)
    answer, seen = _asked_at_a_terminal(request, [b"a", b"o"])
    assert answer is Decision.ONCE  # the 'a' was ignored (a bell), the 'o' answered
    assert "it holds a secret: 'always' is not offered" in seen
    assert "Allow? [o/r/d] \a" in seen


def test_cant_redraw_the_question_with_a_path_of_escape_codes() -> None:
    from pysandboxes import Decision, PermissionRequest

    path = "/tmp/\x1b[2J\x1b[Hfake\rAllow? [o/r/a/d] o"
    request = PermissionRequest("file", path, "read", "a.py:1\x1b[1A", "expose-ro=/tmp/x")
    answer, seen = _asked_at_a_terminal(request, [b"\x03"])  # ^C: deny
    assert answer is Decision.DENY
    assert "\x1b" not in seen.replace("\x1b[", "")  # nothing but what the test sends
    assert "/tmp/\\x1b[2J\\x1b[Hfake\\rAllow? [o/r/a/d] o" in seen


LIST_AND_REMOVE = """
import os, sys
place = sys.argv[1]
print("LISTED", sorted(os.listdir(place)), flush=True)
try:
    os.remove(os.path.join(place, "notes.txt"))
    print("REMOVED", flush=True)
except OSError as exc:
    print("REFUSED", type(exc).__name__, flush=True)
"""


def test_a_listing_and_a_removal_are_asked_and_done_by_python_sb(
    py: Runner, python_sb: str, project: Path, hidden: Path
) -> None:
    place = hidden.parent
    (project / "probe.py").write_text(LIST_AND_REMOVE)
    spare = place.parent / "spare"
    spare.mkdir()
    (spare / "notes.txt").write_text("x")
    control = py("probe.py", str(spare))  # the positive control: unsandboxed, both work
    assert control.stdout == "LISTED ['notes.txt']\nREMOVED\n"
    (project / ".py-sandboxes").write_text("python-import=os\n")
    child = spawn(python_sb, project, "--prompt", "probe.py", str(place))
    child.expect(QUESTION)
    assert f"python-sb: the program asks to list {place} (at probe.py:4)" in (child.before or "")
    child.send("o")
    child.expect(QUESTION)
    asked = (child.before or "").replace("\r", "")
    assert "LISTED ['notes.txt']" in asked  # listed by python-sb, sent as data
    assert f"python-sb: the program asks to delete {hidden} (at probe.py:6)" in asked
    assert f"the rule that allows it: expose-rw={place}" in asked
    child.send("d")
    shown = screen(child)
    assert "REFUSED RuleFileNotFoundError" in shown  # deny: today's refusal
    assert hidden.exists()
