"""python-sb behaves like python for everything the rules allow."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

PROBE = """\
import json, os, sys
print(json.dumps({
    "argv": sys.argv,
    "path0": sys.path[0],
    "name": __name__,
    "file": globals().get("__file__"),
    "flags": list(sys.flags),
    "warnoptions": sys.warnoptions,
    "xoptions": sorted(sys._xoptions),
}))
"""


def probe(result: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def rules(project: Path, text: str) -> None:
    # The runners set LC_ALL; forwarding it keeps CPython's UTF-8 mode the same both ways.
    (project / ".py-sandboxes").write_text(text + "env=LC_ALL=${LC_ALL}\npython-import=*\n")


@pytest.mark.parametrize(
    "args",
    [
        ["app.py", "a", "--flag", "-c", "x"],
        ["-O", "-B", "app.py", "b"],
        ["-X", "dev", "-W", "error", "app.py"],
        ["-c", PROBE, "a", "-m", "b"],
        ["-OO", "-c", PROBE],
        ["-m", "probe_mod", "x", "y"],
        ["-u", "-m", "pkg", "z"],
    ],
    ids=["script", "flags", "dev-warnings", "command", "optimize2", "module", "package"],
)
def test_same_argv_path_flags_and_name_as_python(
    sb: Runner, py: Runner, project: Path, args: list[str]
) -> None:
    rules(project, "expose-ro=.\n")
    (project / "app.py").write_text(PROBE)
    (project / "probe_mod.py").write_text(PROBE)
    (project / "pkg").mkdir()
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "__main__.py").write_text(PROBE)
    assert probe(sb(*args)) == probe(py(*args))


def test_piped_stdin_runs_as_a_program(sb: Runner, py: Runner, project: Path) -> None:
    rules(project, "expose-ro=.\n")
    assert probe(sb(stdin=PROBE)) == probe(py(stdin=PROBE))
    assert probe(sb("-", "arg", stdin=PROBE)) == probe(py("-", "arg", stdin=PROBE))


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("import sys; sys.exit(7)", 7),
        ("import sys; sys.exit('bye')", 1),
        ("raise SystemExit(None)", 0),
        ("raise ValueError('boom')", 1),
        ("import os; os._exit(5)", 5),
    ],
)
def test_exit_status_and_messages_as_python(
    sb: Runner, py: Runner, project: Path, code: str, status: int
) -> None:
    rules(project, "expose-ro=.\n")
    ours, theirs = sb("-c", code), py("-c", code)
    assert (ours.returncode, ours.stdout, ours.stderr) == (status, theirs.stdout, theirs.stderr)


def test_uncaught_exception_printed_once_without_our_frames(
    sb: Runner, py: Runner, project: Path
) -> None:
    rules(project, "expose-ro=.\n")
    (project / "app.py").write_text("def f():\n    raise KeyError('k')\n\nf()\n")
    ours, theirs = sb("app.py"), py("app.py")
    assert ours.returncode == theirs.returncode == 1
    assert ours.stderr == theirs.stderr
    assert "pysandboxes" not in ours.stderr


def test_script_file_readable_without_a_rule_its_neighbours_not(
    sb: Runner, py: Runner, project: Path
) -> None:
    # A learned rule file names no expose-ro= for the script itself: its traceback still
    # shows its lines, and multiprocessing's spawn children can run it again by its path.
    rules(project, "")
    (project / "secret.txt").write_text("s\n")
    (project / "app.py").write_text(
        "import os\n"
        "print(open(__file__).read().count('\\n'), os.path.exists('secret.txt'))\n"
        "def f():\n    raise KeyError('k')\n\nf()\n"
    )
    # The hidden secret.txt is a refusal os.path.exists swallows: the summary at exit
    # would say so after the traceback (see test_audit_log); this test compares tracebacks.
    ours, theirs = sb("--quiet-refusals", "app.py"), py("app.py")
    assert ours.returncode == theirs.returncode == 1
    assert ours.stdout == "6 False\n"
    assert ours.stderr == theirs.stderr
    assert "raise KeyError('k')" in ours.stderr


def test_syntax_error_reported_as_python(sb: Runner, py: Runner, project: Path) -> None:
    rules(project, "expose-ro=.\n")
    (project / "bad.py").write_text("x = (\n")
    for args in (["bad.py"], ["-c", "1 +"]):
        ours, theirs = sb(*args), py(*args)
        assert (ours.returncode, ours.stderr) == (theirs.returncode, theirs.stderr)


def test_missing_script(sb: Runner, project: Path) -> None:
    rules(project, "expose-ro=.\n")
    result = sb("nope.py")
    assert result.returncode == 2
    assert "can't open file 'nope.py': [Errno 2] No such file or directory" in result.stderr


def test_refusal_traceback_ends_at_the_program_line(sb: Runner, project: Path) -> None:
    rules(project, "expose-ro=.\n")
    (project / "app.py").write_text("open('/etc/hostname').read()\n")
    result = sb("app.py")
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[-4].endswith('app.py", line 1, in <module>')
    assert lines[-3].strip() == "open('/etc/hostname').read()"
    assert "pysandboxes/_inside" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith("pysandboxes.errors.RuleFileNotFoundError:")


def test_death_by_signal_is_reported_as_that_signal(sb: Runner, project: Path) -> None:
    rules(project, "expose-ro=.\n")
    result = sb("-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert result.returncode == -signal.SIGTERM
    result = sb("-c", "raise KeyboardInterrupt")
    assert result.returncode == -signal.SIGINT
    assert "KeyboardInterrupt" in result.stderr


@pytest.mark.parametrize(
    "signum",
    [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2],
    ids=lambda s: signal.Signals(s).name,
)
def test_signals_sent_to_python_sb_reach_the_program(
    python_sb: str, project: Path, signum: int
) -> None:
    rules(project, "expose-ro=.\n")
    code = (
        "import os, signal, sys, time\n"
        # os.write: a print() in the handler could re-enter the print of 'ready'.
        f"signal.signal({signum}, lambda *a: (os.write(1, b'got {signum}\\n'), sys.exit(3)))\n"
        "print('ready', flush=True)\n"
        # Short sleeps: a signal landing between print() and one long sleep() would wait
        # for the sleep to end (CPython runs handlers between instructions).
        "for _ in range(600): time.sleep(0.05)\n"
    )
    proc = subprocess.Popen(
        [python_sb, "-c", code], cwd=project, stdout=subprocess.PIPE, text=True, env={}
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signum)
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()  # and close the pipe here, not in a later test's garbage collection
        proc.communicate()
        pytest.fail(f"the program did not get signal {signum} within 20 s")
    assert out == f"got {signum}\n"
    assert proc.returncode == 3


def test_nothing_left_behind(sb: Runner, project: Path, tmp_path: Path) -> None:
    rules(project, "expose-ro=.\n")
    temp = tmp_path / "tmp"
    temp.mkdir()
    result = sb(
        "-c",
        "import tempfile; f = tempfile.NamedTemporaryFile(delete=False); f.write(b'x')",
        env={"TMPDIR": str(temp)},
    )
    assert result.returncode == 0, result.stderr
    assert list(temp.iterdir()) == []


REAL_PROGRAM = """\
import json, os, sqlite3, tempfile
from pathlib import Path

config = json.loads(Path("config.json").read_text())
out = Path(config["output"])
os.makedirs(out, exist_ok=True)
with tempfile.TemporaryDirectory() as scratch:
    (Path(scratch) / "part").write_text("scratch ok")
    scratch_text = (Path(scratch) / "part").read_text()
db = sqlite3.connect(out / "db.sqlite")
db.execute("create table if not exists t (x)")
db.execute("insert into t values (?)", (config["value"],))
db.commit()
rows = db.execute("select count(*), sum(x) from t").fetchone()
db.close()
(out / "result.txt").write_text(f"{rows} {scratch_text}")
print(sorted(os.listdir(out)), (out / "result.txt").read_text(), os.environ.get("GREETING"))
"""


def test_a_real_program_gives_the_same_output(
    sb: Runner, py: Runner, project: Path, tmp_path: Path
) -> None:
    (project / "app.py").write_text(REAL_PROGRAM)
    (project / "config.json").write_text(json.dumps({"output": "out/run", "value": 21}))
    rules(project, "expose-ro=.\nexpose-rw=./out\nenv=GREETING=${GREETING}\n")
    (project / "out").mkdir()
    env = {"GREETING": "hello", "SECRET": "s3cr3t"}
    ours = sb("app.py", env=env)
    assert ours.returncode == 0, ours.stderr
    for path in sorted((project / "out").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    theirs = py("app.py", env=env)
    assert ours.stdout == theirs.stdout
    assert "hello" in ours.stdout


def test_makedirs_exist_ok_works_under_hidden_parents(
    sb: Runner, project: Path, tmp_path: Path
) -> None:
    """The established implementation refused this (its parents looked absent)."""
    deep = tmp_path / "hidden" / "deeper" / "exposed"
    deep.mkdir(parents=True)
    rules(project, f"expose-rw={deep}\n")
    code = (
        f"import os; os.makedirs({str(deep)!r}, exist_ok=True)\nprint(os.path.isdir({str(deep)!r}))"
    )
    result = sb("-c", code)
    assert (result.returncode, result.stdout) == (0, "True\n"), result.stderr
    # A directory above an exposure lists only the way there, nothing else of it; under
    # Landlock the kernel refuses the listing outright (it would grant the whole tree),
    # and the Python layer says so first, naming the rule.
    (tmp_path / "hidden" / "private.txt").write_text("not for the sandbox")
    listed = sb("-c", f"import os; print(os.listdir({str(tmp_path / 'hidden')!r}))")
    assert "private.txt" not in listed.stdout + listed.stderr
    layered_refusal = "RuleFileNotFoundError: Reading" in listed.stderr
    assert listed.stdout == "['deeper']\n" or layered_refusal, listed.stderr


def test_is_in_sandbox(sb: Runner, py: Runner, project: Path) -> None:
    rules(project, "expose-ro=.\n")
    code = "import pysandboxes; print(pysandboxes.is_in_sandbox())"
    assert sb("-c", code).stdout == "True\n"
    assert py("-c", code).stdout == "False\n"


def test_config_errors_exit_255_with_every_problem(sb: Runner, project: Path) -> None:
    rules(project, "bogus=1\nexpose-rw=./nope/x\n")
    result = sb("-c", "print('ran')")
    assert result.returncode == 255
    assert result.stdout == ""
    assert ".py-sandboxes(1): unknown key 'bogus'" in result.stderr
    assert ".py-sandboxes(2): 'expose-rw=./nope/x'" in result.stderr


def test_no_rule_file_learns_only_when_asked(sb: Runner, project: Path) -> None:
    refused = sb("-c", "print('ran')")  # no terminal to ask: nothing runs
    assert refused.returncode == 255
    assert refused.stdout == ""
    assert not (project / ".py-sandboxes").exists()
    result = sb("--learn", "-c", "print('ran')")
    assert result.returncode == 0
    assert result.stdout == "ran\n"  # stdout stays the program's: the summary is on stderr
    assert "python-sb learned" in result.stderr
    assert (project / ".py-sandboxes").is_file()


def test_interpreter_files_readable_without_rules(sb: Runner, project: Path) -> None:
    rules(project, "env=X=1\n")
    code = (
        "import os, json, email.parser\n"
        "print(os.path.exists(os.__file__), len(open(json.__file__).read()) > 0)"
    )
    result = sb("-c", code)
    assert (result.returncode, result.stdout) == (0, "True True\n"), result.stderr


def test_start_is_quick_enough_to_notice_hangs(sb: Runner, project: Path) -> None:
    """Not a benchmark (see benchmarks/): only that a run cannot hang on the launcher."""
    rules(project, "expose-ro=.\n")
    start = time.monotonic()
    assert sb("-c", "pass", timeout=30).returncode == 0
    assert time.monotonic() - start < 30


def test_environment_is_exactly_the_rules(sb: Runner, project: Path) -> None:
    rules(project, "env=KEEP=${KEEP}\nenv=FIXED=1\nenv=*_ID=${*_ID}\nunenv=DROP_ID\n")
    code = "import os, json; print(json.dumps(dict(sorted(os.environ.items()))))"
    result = sb("-c", code, env={"KEEP": "k", "SECRET": "s", "A_ID": "a", "DROP_ID": "d"})
    env = json.loads(result.stdout)
    env.pop("LC_CTYPE", None)  # CPython's own locale coercion, not a forwarded variable
    assert env == {"KEEP": "k", "FIXED": "1", "A_ID": "a", "LC_ALL": "C.UTF-8"}


def test_inspect_flag_enters_the_prompt_after_the_program(
    sb: Runner, py: Runner, project: Path
) -> None:
    rules(project, "expose-ro=.\n")
    (project / "app.py").write_text("x = 41\n")
    typed = "print(x + 1)\nimport os\nprint(os.path.exists('/etc/hostname'))\n"
    ours, theirs = sb("-i", "app.py", stdin=typed), py("-i", "app.py", stdin=typed)
    assert ours.returncode == theirs.returncode == 0
    assert ours.stdout == "42\nFalse\n"  # the prompt runs under the rules too
    assert theirs.stdout == "42\nTrue\n"


def test_standard_library_works_under_the_default_rules(sb: Runner, project: Path) -> None:
    """asyncio, typing, dataclasses... rebuild or generate code: that is not the program's."""
    rules(project, "expose-ro=.\n")
    code = (
        "import asyncio, dataclasses, typing, enum, collections, json, decimal, fractions\n"
        "async def main():\n    await asyncio.sleep(0)\n    return 'async ok'\n"
        "print(asyncio.run(main()))\n"
    )
    result = sb("-c", code)
    assert (result.returncode, result.stdout) == (0, "async ok\n"), result.stderr
