"""A realistic program learned on its first run, then run under what was learned."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from learnlab import granted

from listener import Listener
from pysandboxes._kernel import landlock

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

APP = """\
import json, os, socket, subprocess, sys
import tomlkit

config = tomlkit.parse(open("config.toml").read())
user = os.environ["APP_USER"]
token = os.getenv("APP_TOKEN", "")
with socket.create_connection(("127.0.0.1", int(sys.argv[1]))) as conn:
    conn.sendall(b"ping")
    reply = conn.recv(16).decode().strip()
os.makedirs("out", exist_ok=True)
with open("out/report.json", "w") as handle:
    json.dump({"name": str(config["name"]), "user": user, "reply": reply}, handle)
echo = subprocess.run(["echo", "child ran"], capture_output=True, text=True, check=True)
print(echo.stdout.strip(), user, len(token), reply)
"""
ENV = {"APP_USER": "alice", "APP_TOKEN": "s3cr3t-t0ken-value"}


def _project(project: Path, extra: str = "") -> None:
    (project / "app.py").write_text(APP + extra)
    (project / "config.toml").write_text('name = "demo"\n')


def test_first_run_learns_and_the_second_does_the_same_work(
    sb: Runner, project: Path, tcp: Listener
) -> None:
    _project(project)
    first = sb("app.py", str(tcp.port), env=ENV)
    assert first.returncode == 0, first.stderr
    assert first.stdout == "child ran alice 18 hello\n"
    rule_file = project / ".py-sandboxes"
    assert rule_file.is_file()
    assert oct(rule_file.stat().st_mode & 0o777) == "0o644"
    assert "python-sb learned" in first.stderr
    if landlock.unavailable_reason() is None:
        assert "the kernel layer (landlock) was relaxed for this learning run only" in (
            first.stderr
        )
    (project / "out" / "report.json").unlink()

    second = sb("app.py", str(tcp.port), env=ENV)
    assert second.returncode == 0, second.stderr
    # The same work, but the token: a secret is learned commented out, never granted.
    assert second.stdout == "child ran alice 0 hello\n"
    assert "refused" not in second.stderr
    assert "learned" not in second.stderr  # an enforcing run: nothing is learned
    assert (project / "out" / "report.json").is_file()


def test_the_learned_rules_are_exactly_the_observed_accesses(
    sb: Runner, project: Path, tcp: Listener
) -> None:
    _project(project)
    assert sb("app.py", str(tcp.port), env=ENV).returncode == 0
    rule_file = project / ".py-sandboxes"
    assert sorted(granted(rule_file)) == sorted(
        [
            "env=APP_USER=${APP_USER}",
            "env=PATH=${PATH}",  # subprocess looks "echo" up
            "expose-ro=./config.toml",  # the file, not its directory
            "expose-rw=./out/",  # the directory it created and writes in, made again if missing
            f"net=ALLOW|tcp|127.0.0.1|{tcp.port}|OUT",
            "python-import=os",  # json: the template grants the pure standard library
            "python-import=socket",
            "python-import=subprocess",
            "python-import=tomlkit",
            "python-api=ALLOW:subprocess.Popen",
        ]
    )
    text = rule_file.read_text()
    assert ENV["APP_TOKEN"] not in text
    assert "\n# env=APP_TOKEN=${APP_TOKEN}  # ⚠ SECRET, not granted" in text
    assert "alice" not in text
    assert "expose-ro=./config.toml  # learned: read by app.py:4" in text
    # Imports are grouped: dangerous first, then the standard library, then the others.
    assert text.index("# ⚠ Dangerous!") < text.index("\npython-import=subprocess")
    assert text.index("\npython-import=subprocess") < text.index("# Standard Python")
    assert text.index("# Standard Python") < text.index("\npython-import=os")
    assert text.index("\npython-import=socket") < text.index("# External modules")
    assert text.index("# External modules") < text.index("\npython-import=tomlkit")


def test_cant_read_a_file_the_learning_run_did_not_read(
    sb: Runner, py: Runner, project: Path, tcp: Listener
) -> None:
    _project(project)
    assert sb("app.py", str(tcp.port), env=ENV).returncode == 0
    (project / "extra.txt").write_text("more")
    _project(project, extra='print(open("extra.txt").read())\n')
    assert py("app.py", str(tcp.port), env=ENV).stdout.endswith("more\n")  # the probe works
    result = sb("app.py", str(tcp.port), env=ENV)
    assert result.returncode == 1
    assert "RuleFileNotFoundError" in result.stderr
    assert "extra.txt" in result.stderr


def test_cant_connect_to_a_port_the_learning_run_did_not_use(
    sb: Runner, py: Runner, project: Path, tcp: Listener, other_tcp: Listener
) -> None:
    _project(project)
    assert sb("app.py", str(tcp.port), env=ENV).returncode == 0
    extra = (
        f"socket.create_connection(('127.0.0.1', {other_tcp.port})).close()\n"
        "print('connected again')\n"
    )
    _project(project, extra=extra)
    assert py("app.py", str(tcp.port), env=ENV).stdout.endswith("connected again\n")
    before = other_tcp.received
    result = sb("app.py", str(tcp.port), env=ENV)
    assert result.returncode == 1
    assert "RuleSocketConnectionRefusedError" in result.stderr
    assert str(other_tcp.port) in result.stderr
    assert other_tcp.received == before  # nothing reached it


def test_a_program_killed_by_sigkill_still_gets_its_rules(sb: Runner, project: Path) -> None:
    (project / "data.txt").write_text("data")
    (project / "app.py").write_text(
        "import shlex, os, signal\nopen('data.txt').read()\nos.kill(os.getpid(), signal.SIGKILL)\n"
    )
    result = sb("app.py")
    assert result.returncode == -signal.SIGKILL
    rules = granted(project / ".py-sandboxes")
    assert "expose-ro=./data.txt" in rules
    assert "python-import=shlex" in rules
    assert "python-import=signal" in rules


def test_learning_does_not_leave_the_environment_to_the_waiter(
    python_sb: str, project: Path
) -> None:
    # The trusted side waits as a process with an empty environment, learning or not.
    # The program cannot name it (a pid namespace of its own): it is read from outside.
    (project / "app.py").write_text("import sys\nsys.stdin.read()\n")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **ENV}
    run = subprocess.Popen(
        [python_sb, "--learn", "app.py"],
        cwd=project,
        env=env,
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        environ = b"-"
        for _ in range(200):  # until python-sb became the waiter (its argv says so)
            with open(f"/proc/{run.pid}/cmdline", "rb") as handle:
                if b"pysandboxes._host.waiter" in handle.read():
                    with open(f"/proc/{run.pid}/environ", "rb") as handle:
                        environ = handle.read()
                    break
            time.sleep(0.05)
    finally:
        run.communicate(b"", timeout=60)
    assert run.returncode == 0
    assert environ == b""
    assert os.environ.get("APP_TOKEN") != ENV["APP_TOKEN"]


def test_only_the_variables_read_by_name_are_learned(sb: Runner, project: Path) -> None:
    (project / "app.py").write_text(
        "import os\n"
        "snapshot = dict(os.environ)\n"  # a full scan names no variable in particular
        "for name, value in os.environ.items():\n"
        "    pass\n"
        "os.environ['SET_HERE'] = '1'\n"
        "print(os.environ['SET_HERE'], os.getenv('WANTED'), 'ABSENT' in os.environ)\n"
    )
    result = sb("app.py", env={"WANTED": "yes", "UNUSED": "no", "ABSENT_NOT": "x"})
    assert result.returncode == 0, result.stderr
    assert result.stdout == "1 yes False\n"  # the host's variables, as without a sandbox
    assert granted(project / ".py-sandboxes") == ["env=WANTED=${WANTED}", "python-import=os"]


def test_accesses_from_many_threads_are_all_learned(sb: Runner, project: Path) -> None:
    for number in range(8):
        (project / f"part{number}.txt").write_text(str(number))
    (project / "app.py").write_text(
        "import threading\n"
        "def read(n):\n"
        "    for _ in range(50):\n"
        "        open(f'part{n}.txt').read()\n"
        "threads = [threading.Thread(target=read, args=(n,)) for n in range(8)]\n"
        "for t in threads: t.start()\n"
        "for t in threads: t.join()\n"
        "print('read all')\n"
    )
    result = sb("app.py")
    assert result.returncode == 0, result.stderr
    learned = granted(project / ".py-sandboxes")
    assert [f"expose-ro=./part{n}.txt" for n in range(8)] == [
        rule for rule in learned if rule.startswith("expose-ro=./part")
    ]
    assert sb("app.py").stdout == "read all\n"


def test_a_module_run_with_m_learns_its_own_import(sb: Runner, project: Path) -> None:
    (project / "data.txt").write_text("x")
    (project / "tool").mkdir()
    (project / "tool" / "__init__.py").write_text("")
    (project / "tool" / "__main__.py").write_text("import shlex\nprint(open('data.txt').read())\n")
    first = sb("-m", "tool")
    assert first.returncode == 0, first.stderr
    rule_file = project / "tool" / ".py-sandboxes"  # next to the module, as discovery says
    assert sorted(granted(rule_file)) == [
        f"expose-ro={project / 'data.txt'}",
        "python-import=shlex",
        "python-import=tool",  # asked for by the command line
    ]
    assert "python-import=tool  # learned: imported by the command line" in rule_file.read_text()
    second = sb("-m", "tool")
    assert second.returncode == 0, second.stderr
    assert second.stdout == "x\n"


def test_a_program_stopped_by_sigterm_still_gets_its_rules(python_sb: str, project: Path) -> None:
    (project / "data.txt").write_text("data")
    (project / "app.py").write_text(
        "import sys, time\nopen('data.txt').read()\nprint('ready', flush=True)\ntime.sleep(60)\n"
    )
    env = {"PATH": os.environ.get("PATH", "")}
    with subprocess.Popen(
        [python_sb, "--learn", "app.py"], cwd=project, env=env, stdout=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"
        process.send_signal(signal.SIGTERM)  # to python-sb, which passes it on
        assert process.wait(timeout=30) == -signal.SIGTERM
    assert "expose-ro=./data.txt" in granted(project / ".py-sandboxes")


def test_a_sibling_module_learned_is_importable_next_run(sb: Runner, project: Path) -> None:
    (project / "helper.py").write_text("def answer():\n    return 42\n")
    (project / "app.py").write_text("import helper\nprint(helper.answer())\n")
    assert sb("app.py").stdout == "42\n"
    assert sorted(granted(project / ".py-sandboxes")) == [
        "expose-ro=./helper.py",  # the file, not the project directory
        "python-import=helper",
    ]
    second = sb("app.py")
    assert second.stdout == "42\n", second.stderr


def test_what_the_program_leaves_running_cannot_edit_the_learned_rules(
    sb: Runner, project: Path
) -> None:
    # A detached process (setsid, double fork) outliving the run would otherwise edit the
    # rules after the trusted side wrote them: the learning run ends it first.
    marker = project / "leftover-ran"
    (project / "app.py").write_text(
        "import subprocess\n"
        "subprocess.Popen(['setsid', 'sh', '-c', "
        f"'sleep 1; echo os-sandbox=none >> .py-sandboxes; touch {marker}'])\n"
    )
    result = sb("app.py")
    assert result.returncode == 0, result.stderr
    import time

    time.sleep(2)
    assert not marker.exists(), "the leftover process outlived the learning run"
    assert "os-sandbox=none" not in (project / ".py-sandboxes").read_text()


def test_a_call_the_sandbox_judges_itself_is_learned(sb: Runner, project: Path) -> None:
    # setpriority is reported by a judged copy of the sandbox's own, whose frame the
    # recorder reads like any other: learning it once ended in a RecursionError. The
    # program's own child stands for another process (the sandbox sees no other).
    code = (
        "import os, subprocess\n"
        "child = subprocess.Popen(['sleep', '30'])\n"
        "os.setpriority(os.PRIO_PROCESS, child.pid, 19)\n"
        "print(os.getpriority(os.PRIO_PROCESS, child.pid))\n"
        "child.kill()\n"
    )
    result = sb("--learn", "-c", code)
    assert result.stdout == "19\n", result.stderr
    assert "python-api=ALLOW:os.setpriority" in granted(project / ".py-sandboxes")


def test_a_learning_run_uses_the_private_temporary_directory(sb: Runner, project: Path) -> None:
    # The import guard asks every finder whether a module it would refuse exists: that
    # question must not use up the adjustment giving tempfile the private directory, or
    # the learning run writes in /tmp and learns a rule naming a random file there.
    (project / "app.py").write_text(
        "import tempfile\n"
        "with tempfile.NamedTemporaryFile('w', delete=False) as handle:\n"
        "    handle.write('x')\n"
        "print('done')\n"
    )
    first = sb("app.py")
    assert first.returncode == 0, first.stderr
    rules = (project / ".py-sandboxes").read_text()
    assert "expose-rw=/tmp" not in rules, rules
    second = sb("app.py")
    assert (second.returncode, second.stdout) == (0, first.stdout), second.stderr


def test_a_database_opened_through_the_adjusted_sqlite3_is_learned(
    sb: Runner, project: Path
) -> None:
    # sqlite3.connect is adjusted by the runner: its wrapper acts for the program, whose
    # line the learned rule names, like any other wrapper's.
    (project / "out").mkdir()
    (project / "out" / "db.sqlite").touch()
    (project / "app.py").write_text(
        "import sqlite3\n"
        "db = sqlite3.connect('out/db.sqlite')\n"
        "db.execute('create table if not exists t(x)')\n"
        "db.commit()\n"
        "print('done')\n"
    )
    first = sb("app.py")
    assert first.returncode == 0, first.stderr
    rules = (project / ".py-sandboxes").read_text()
    assert "expose-rw=./out/db.sqlite  # learned: written by app.py:2" in rules, rules
    second = sb("app.py")
    assert (second.returncode, second.stdout) == (0, "done\n"), second.stderr
