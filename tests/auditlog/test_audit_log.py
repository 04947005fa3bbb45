"""The decision log: every decision of the Python layer, written by the trusted side only.

A program that hides a refusal (a library swallowing the ``OSError``) still leaves it in
the log and in the summary at exit; the program itself can neither forge nor erase what
was logged, and a run killed at any point leaves only whole lines.
"""

from __future__ import annotations

import json
import signal
import textwrap
from pathlib import Path

import pytest

from listener import Listener
from runner import Runner


def read_log(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def find(log: list[dict[str, object]], kind: str, target: str, verdict: str) -> dict[str, object]:
    for line in log:
        if line["kind"] == kind and line["target"] == target and line["verdict"] == verdict:
            return line
    raise AssertionError(f"no {verdict} {kind} {target} in {json.dumps(log, indent=1)}")


EVERY_KIND = """
import os, pickle, socket, collections
open("data/in.txt").read()                                   # 2: file allowed
try: open("/etc/hostname").read()                            # 3: file refused
except OSError: pass
os.environ.get("GIVEN"); os.environ.get("NOT_GIVEN")         # 5: env allowed, refused
import colorsys                                              # 6: import allowed
try: import xml                                              # 7: import refused
except ImportError: pass
socket.getaddrinfo("localhost", {port})                      # 9: lookup allowed
try: socket.getaddrinfo("example.invalid", 80)               # 10: lookup refused
except OSError: pass
socket.create_connection(("127.0.0.1", {port})).close()      # 12: net allowed
try: socket.create_connection(("127.0.0.1", {port} + 1))     # 13: net refused
except OSError: pass
pickle.loads(pickle.dumps(collections.OrderedDict()))        # 15: call allowed
try: os.system("true")                                       # 16: call refused
except OSError: pass
"""


def test_the_log_records_allowed_and_refused_accesses_of_each_kind_with_the_deciding_line(
    sb: Runner, project: Path, tcp: Listener
) -> None:
    (project / "data").mkdir()
    (project / "data" / "in.txt").write_text("x")
    (project / ".py-sandboxes").write_text(
        "expose-ro=./data\n"  # 1
        "env=GIVEN=yes\n"  # 2
        "python-import=os, pickle, socket, collections, colorsys\n"  # 3
        f"net=ALLOW|tcp|localhost|{tcp.port}|OUT\n"  # 4
        "python-api=ALLOW:pickle.loads\n"  # 5
        "audit-log=audit.jsonl\n"
    )
    (project / "app.py").write_text("\n" + EVERY_KIND.strip().format(port=tcp.port) + "\n")
    result = sb("app.py")
    assert result.returncode == 0, result.stderr
    log = read_log(project / "audit.jsonl")
    data = str((project / "data" / "in.txt").resolve())
    # Under landlock the broker connects (issue 37), by the name the rule pins: its line
    # names both, with the same rule and program line as the child's own lines.
    brokered = f"tcp:localhost:{tcp.port} (127.0.0.1)"
    routed = any(line["target"] == brokered for line in log)
    connected = brokered if routed else f"tcp:127.0.0.1:{tcp.port}"
    expected = [
        ("file", data, "allowed", ".py-sandboxes:1", "app.py:3"),
        ("file", "/etc/hostname", "refused", "no rule", "app.py:4"),
        ("env", "GIVEN", "allowed", ".py-sandboxes:2", "app.py:6"),
        ("env", "NOT_GIVEN", "refused", "no rule", "app.py:6"),
        ("import", "colorsys", "allowed", ".py-sandboxes:3", ""),
        ("import", "xml", "refused", "no rule", "app.py:8"),
        ("lookup", "localhost", "allowed", ".py-sandboxes:4", "app.py:10"),
        ("lookup", "example.invalid", "refused", "no rule", "app.py:11"),
        ("net", connected, "allowed", ".py-sandboxes:4", "app.py:13"),
        ("net", f"tcp:127.0.0.1:{tcp.port + 1}", "refused", "no rule", "app.py:14"),
        ("call", "pickle.loads", "allowed", ".py-sandboxes:5", "app.py:16"),
        ("call", "os.system", "refused", "no rule", "app.py:17"),
    ]
    for kind, target, verdict, rule, where in expected:
        line = find(log, kind, target, verdict)
        assert (line["rule"], line["where"]) == (rule, where), line
        assert line["v"] == 1
        assert line["mode"] == "complete"
        assert int(str(line["count"])) >= 1
        if verdict == "refused":
            assert line["fix"], line  # the rule line that would allow it
        else:
            assert line["rule_text"], line
    assert find(log, "env", "NOT_GIVEN", "refused")["fix"] == "env=NOT_GIVEN=${NOT_GIVEN}"


def test_repeated_decisions_are_counted_not_repeated(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text("expose-ro=.\naudit-log=audit.jsonl\n")
    (project / "in.txt").write_text("x")
    code = "for _ in range(5000):\n    open('in.txt').read()\n"
    result = sb("-c", code)
    assert result.returncode == 0, result.stderr
    lines = [
        line
        for line in read_log(project / "audit.jsonl")
        if line["target"] == str((project / "in.txt").resolve())
    ]
    assert sum(int(str(line["count"])) for line in lines) == 5000
    assert len(lines) < 10


def test_audit_log_level_refused_keeps_only_refusals(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text(
        "expose-ro=.\naudit-log=audit.jsonl\naudit-log-level=refused\n"
    )
    (project / "in.txt").write_text("x")
    code = "open('in.txt').read()\ntry: open('/etc/hostname')\nexcept OSError: pass\n"
    result = sb("-c", code)
    assert result.returncode == 0, result.stderr
    log = read_log(project / "audit.jsonl")
    assert log
    assert all(line["verdict"] == "refused" for line in log)
    find(log, "file", "/etc/hostname", "refused")


TAMPER = """
import os
def attempt(name, fn):
    try:
        fn()
        print(name, "DONE")
    except OSError as exc:
        print(name, "REFUSED", type(exc).__name__)
attempt("write", lambda: open("audit.jsonl", "w").write("forged\\n"))
attempt("append", lambda: open("audit.jsonl", "a").write("forged\\n"))
attempt("truncate", lambda: os.truncate("audit.jsonl", 0))
open("other", "w").write("forged\\n")
attempt("replace", lambda: os.replace("other", "audit.jsonl"))
attempt("rename", lambda: os.rename("audit.jsonl", "moved"))
if os.path.exists("moved"):  # plain python: put it back for the last probe
    os.rename("moved", "audit.jsonl")
attempt("remove", lambda: os.remove("audit.jsonl"))
"""


@pytest.mark.parametrize("provider", ["subprocess", "landlock", "bwrap"])
def test_a_sandboxed_program_cannot_write_delete_or_replace_the_log(
    sb: Runner, py: Runner, project: Path, provider: str
) -> None:
    (project / "audit.jsonl").write_text("")
    control = py("-c", TAMPER)
    assert control.stdout.count("DONE") == 6, control.stdout + control.stderr  # plain python
    for leftover in ("audit.jsonl", "moved", "other"):
        (project / leftover).unlink(missing_ok=True)
    (project / ".py-sandboxes").write_text(
        f"expose-rw=.\npython-import=os\naudit-log=audit.jsonl\nos-sandbox={provider}\n"
    )
    result = sb("--quiet-refusals", "-c", TAMPER)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("REFUSED") == 6, result.stdout + result.stderr
    assert not (project / "moved").exists()
    text = (project / "audit.jsonl").read_text()
    assert "forged" not in text
    log = read_log(project / "audit.jsonl")  # every line parses
    target = str((project / "audit.jsonl").resolve())
    assert find(log, "file", target, "refused")["where"] == "<string>:9"


def test_a_program_killed_by_sigkill_leaves_a_log_whose_every_line_parses(
    sb: Runner, project: Path
) -> None:
    (project / ".py-sandboxes").write_text(
        "expose-rw=.\npython-import=os, signal\naudit-log=audit.jsonl\n"
    )
    code = textwrap.dedent(
        """
        import os, signal
        for i in range(1000):
            with open(f"f{i % 300}.txt", "w") as out:
                out.write("x")
            try:
                open(f"/etc/nothing-{i}")
            except OSError:
                pass
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    result = sb("-c", code)
    assert result.returncode == -signal.SIGKILL, result.stderr
    lines = (project / "audit.jsonl").read_text().splitlines()
    assert len(lines) > 100
    decisions = [json.loads(line) for line in lines]  # every line parses
    assert all(line["v"] == 1 for line in decisions)
    find(decisions, "file", "/etc/nothing-999", "refused")  # sent at once, before the kill


SWALLOWED = """
try:
    open("/etc/hostname").read()
except OSError:
    pass  # a library hiding the refusal
print("the program's own output")
"""


def test_the_exit_summary_appears_when_a_refusal_was_swallowed(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text("expose-ro=.\n")
    result = sb("-c", SWALLOWED)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "the program's own output\n"
    summary = result.stderr
    assert "1 access was refused by the sandbox (1 file)" in summary
    assert "file /etc/hostname (read) at <string>:3" in summary
    assert "add 'expose-ro=/etc/hostname' to .py-sandboxes to allow it" in summary
    assert "--audit-log=FILE" in summary  # how to get the full log


def test_the_exit_summary_names_the_log_when_there_is_one(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text("expose-ro=.\naudit-log=audit.jsonl\n")
    result = sb("-c", SWALLOWED)
    assert f"the full log: {project / 'audit.jsonl'}" in result.stderr, result.stderr


def test_no_exit_summary_when_the_refusal_ended_the_program_with_its_traceback(
    sb: Runner, project: Path
) -> None:
    (project / ".py-sandboxes").write_text("expose-ro=.\naudit-log=audit.jsonl\n")
    result = sb("-c", "open('/etc/hostname')")
    assert result.returncode == 1
    assert "RuleFileNotFoundError" in result.stderr
    assert "python-sb:" not in result.stderr, result.stderr
    find(read_log(project / "audit.jsonl"), "file", "/etc/hostname", "refused")  # logged


def test_the_summary_lists_the_swallowed_refusal_not_the_one_that_ended_the_program(
    sb: Runner, project: Path
) -> None:
    (project / ".py-sandboxes").write_text("expose-ro=.\n")
    code = SWALLOWED + "open('/etc/passwd')\n"
    result = sb("-c", code)
    assert result.returncode == 1
    assert "2 accesses were refused by the sandbox (2 file)" in result.stderr, result.stderr
    assert "file /etc/hostname (read)" in result.stderr
    assert "file /etc/passwd (read) at" not in result.stderr


def test_no_exit_summary_when_nothing_was_refused(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text("expose-ro=.\n")
    result = sb("-c", "print('fine')")
    assert result.returncode == 0
    assert "refused" not in result.stderr, result.stderr


@pytest.mark.parametrize("how", ["--quiet-refusals", "--quiet-refusals=true", "rule"])
def test_quiet_refusals_turns_the_summary_off(sb: Runner, project: Path, how: str) -> None:
    rules = "expose-ro=.\n" + ("quiet-refusals=true\n" if how == "rule" else "")
    (project / ".py-sandboxes").write_text(rules)
    result = sb(*([how] if how != "rule" else []), "-c", SWALLOWED)
    assert result.returncode == 0, result.stderr
    assert "refused" not in result.stderr, result.stderr


def test_an_unwritable_log_is_a_configuration_error(sb: Runner, project: Path) -> None:
    (project / "log").mkdir()
    (project / ".py-sandboxes").write_text("expose-ro=.\naudit-log=log\n")
    result = sb("-c", "print('ran')")
    assert result.returncode == 255
    assert "ran" not in result.stdout
    assert "audit-log=log" in result.stderr
    assert "cannot be written" in result.stderr


NATIVE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.open(b"audit.jsonl", os.O_WRONLY | os.O_TRUNC)
print("open", "refused" if fd < 0 else "DONE")
print("unlink", "refused" if libc.unlink(b"audit.jsonl") else "DONE")
"""


@pytest.mark.parametrize("provider", ["landlock", "bwrap"])
def test_native_code_cannot_truncate_or_remove_the_log_under_a_kernel_layer(
    sb: Runner, py: Runner, project: Path, provider: str
) -> None:
    (project / "audit.jsonl").write_text("x\n")
    assert py("-c", NATIVE).stdout == "open DONE\nunlink DONE\n"  # plain python
    (project / ".py-sandboxes").write_text(
        f"expose-rw=.\npython-import=os, ctypes\npython-api=ALLOW:native\n"
        f"audit-log=audit.jsonl\nos-sandbox={provider}\n"
    )
    result = sb("--quiet-refusals", "-c", NATIVE)
    assert result.stdout == "open refused\nunlink refused\n", result.stdout + result.stderr
    assert read_log(project / "audit.jsonl")  # the lines written survive, each parses


def test_a_log_and_rule_file_named_with_commas_and_colons_are_still_the_ones_written(
    sb: Runner, project: Path
) -> None:
    # The trusted side hands the waiter the log's path and the rule file's name in one
    # argument: a name that looks like its separators must not shift what it reads.
    folder = project / "a,1:b"
    folder.mkdir()
    (folder / ".py-sandboxes").write_text("expose-ro=.\naudit-log=./x,2:y.jsonl\n")
    result = Runner(sb.command, folder)("-c", SWALLOWED)
    assert result.returncode == 0, result.stderr
    log = read_log(folder / "x,2:y.jsonl")
    find(log, "file", "/etc/hostname", "refused")
    assert "x,2:y.jsonl" in result.stderr  # the summary points at the log
