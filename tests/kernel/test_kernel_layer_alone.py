"""``py-sandbox=false``: the Python layer is off, and the kernel layer alone is the wall.

Each probe calls plain Python APIs (no ctypes: nothing steps around a guard, there is
none). It works under plain python (the test can fail), and under python-sb with
``py-sandbox=false`` meets the kernel's own refusal: a built-in ``OSError``, never one of
the ``Rule*Error`` refusals the Python layer raises. Where no layer is left
(``subprocess``, ``none``) the run says so on standard error.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from kernelprobes import Listener, need_abi

from pysandboxes._host.select import unavailable_reason

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

#: Code every probe starts with: ``outcome`` runs an action and prints DONE, or REFUSED
#: with the exception's module, class and errno name.
OUTCOME = """
import errno, os, socket, subprocess, sys
def outcome(action):
    try:
        action()
    except OSError as exc:
        kind = type(exc)
        print("REFUSED", kind.__module__, kind.__name__, errno.errorcode.get(exc.errno))
    else:
        print("DONE")
    sys.stdout.flush()
"""

RULES = "expose-ro=.\npython-import=json\npy-sandbox=false\n"
PROVIDERS = ["landlock", "bwrap", "unshare"]
#: What reading a path outside the rules gives: bwrap's mount view does not have it.
HIDDEN = {
    "landlock": "builtins PermissionError EACCES",
    "bwrap": "builtins FileNotFoundError ENOENT",
    "unshare": "builtins PermissionError EACCES",
}


def sandboxed(project: Path, provider: str, body: str, rules: str = RULES) -> str:
    reason = unavailable_reason(provider)
    if reason is not None:
        pytest.skip(f"{provider} cannot run here: {reason}")
    (project / ".py-sandboxes").write_text(rules + f"os-sandbox={provider}\n")
    (project / "probe.py").write_text(OUTCOME + body)
    return "probe.py"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_kernel_alone_refuses_reading_outside_exposed_paths(
    sb: Runner, py: Runner, project: Path, tmp_path: Path, provider: str
) -> None:
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("TOP-SECRET")
    script = sandboxed(project, provider, f"outcome(lambda: open({str(secret)!r}).read())\n")
    assert py(script).stdout == "DONE\n"
    result = sb(script)
    assert result.stdout == f"REFUSED {HIDDEN[provider]}\n", result.stderr


@pytest.mark.parametrize("provider", PROVIDERS)
def test_kernel_alone_refuses_writing_in_a_read_only_exposure(
    sb: Runner, py: Runner, project: Path, provider: str
) -> None:
    data = project / "data"
    data.mkdir()
    (data / "kept.txt").write_text("original")
    body = "outcome(lambda: open('data/kept.txt', 'w'))\noutcome(lambda: open('data/new', 'x'))\n"
    script = sandboxed(project, provider, body)
    assert py(script).stdout == "DONE\nDONE\n"
    (data / "new").unlink()
    (data / "kept.txt").write_text("original")
    result = sb(script)
    # bwrap binds the exposure read-only: its mount refuses before Landlock is asked.
    refusal = "builtins OSError EROFS" if provider == "bwrap" else "builtins PermissionError EACCES"
    assert result.stdout == f"REFUSED {refusal}\n" * 2, result.stderr
    assert (data / "kept.txt").read_text() == "original"
    assert not (data / "new").exists()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_kernel_alone_refuses_a_connection_no_rule_allows(
    sb: Runner, py: Runner, project: Path, tcp: Listener, provider: str
) -> None:
    need_abi(4, "TCP port rules")
    other = 1 if tcp.port != 1 else 2
    rules = RULES + f"net=ALLOW|tcp|127.0.0.1|{other}|OUT\n"
    body = f"outcome(lambda: socket.create_connection(('127.0.0.1', {tcp.port}), timeout=5))\n"
    script = sandboxed(project, provider, body, rules)
    assert py(script).stdout == "DONE\n"
    time.sleep(0.3)
    assert tcp.received == 1
    result = sb(script)
    assert result.stdout == "REFUSED builtins PermissionError EACCES\n", result.stderr
    time.sleep(0.3)
    assert tcp.received == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_kernel_alone_refuses_a_connection_without_network_rules(
    sb: Runner, py: Runner, project: Path, tcp: Listener, provider: str
) -> None:
    body = f"outcome(lambda: socket.create_connection(('127.0.0.1', {tcp.port}), timeout=5))\n"
    script = sandboxed(project, provider, body)
    assert py(script).stdout == "DONE\n"
    result = sb(script)
    # Landlock's port rules (EACCES), or a network namespace of its own with no route.
    assert result.stdout.startswith("REFUSED builtins "), result.stderr
    assert "Rule" not in result.stdout
    time.sleep(0.3)
    assert tcp.received == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_kernel_alone_refuses_starting_a_program(
    sb: Runner, py: Runner, project: Path, provider: str
) -> None:
    # The interpreter itself: present in every provider's view, yet not to be executed.
    body = "outcome(lambda: subprocess.run([sys.executable, '-c', 'pass'], check=True))\n"
    script = sandboxed(project, provider, body)
    assert py(script).stdout == "DONE\n"
    result = sb(script)
    assert result.stdout == "REFUSED builtins PermissionError EACCES\n", result.stderr


@pytest.mark.parametrize("provider", PROVIDERS)
def test_kernel_alone_refuses_signalling_a_process_outside(
    sb: Runner,
    py: Runner,
    project: Path,
    victims: list[subprocess.Popen[bytes]],
    provider: str,
) -> None:
    if provider == "landlock":
        need_abi(6, "signal scoping")
    body = f"outcome(lambda: os.kill(int(sys.argv[1]), {int(signal.SIGTERM)}))\n"
    script = sandboxed(project, provider, body)
    assert py(script, str(victims[0].pid)).stdout == "DONE\n"
    assert victims[0].wait(timeout=10) == -signal.SIGTERM
    result = sb(script, str(victims[1].pid))
    # The program's own process namespace, where the victim is not (ESRCH), under every
    # provider; Landlock's scope (EPERM) behind it where no namespace can be made.
    assert result.stdout in (
        "REFUSED builtins ProcessLookupError ESRCH\n",
        "REFUSED builtins PermissionError EPERM\n",
    ), result.stderr
    time.sleep(0.2)
    assert victims[1].poll() is None, "the victim died"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_kernel_alone_refuses_an_af_unix_socket(
    sb: Runner, py: Runner, project: Path, provider: str
) -> None:
    # No rule may need one: the seccomp filter makes none, and nothing explains it.
    body = "outcome(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())\n"
    script = sandboxed(project, provider, body)
    assert py(script).stdout == "DONE\n"
    result = sb(script)
    assert result.stdout == "REFUSED builtins PermissionError EPERM\n", result.stderr


def test_without_the_python_layer_only_the_kernel_judges(
    sb: Runner, py: Runner, project: Path
) -> None:
    # What only the Python layer enforces (imports, eval, sensitive calls) is let through:
    # py-sandbox=false installs no guard, no audit hook, no import guard. The one finder
    # left gives tempfile the private directory (the only one writable) and refuses nothing.
    body = (
        "import csv, sys\n"
        "print(eval('6 * 7'), sys.modules['csv'].__name__)\n"
        "print(sorted(type(f).__module__ for f in sys.meta_path if 'pysandboxes' in repr(f)))\n"
    )
    script = sandboxed(project, "landlock", body)
    assert py(script).stdout.startswith("42 csv\n")
    result = sb(script)
    assert result.stdout == "42 csv\n['pysandboxes._inside.adjust']\n", result.stderr
    with_layer = sb("--py-sandbox=true", "-c", "import csv")
    assert "RuleModuleNotFoundError" in with_layer.stderr  # the same rules, the layer on


def test_the_environment_filter_stays_without_the_python_layer(
    sb: Runner, py: Runner, project: Path
) -> None:
    script = sandboxed(project, "landlock", "print(os.environ.get('SECRET'))\n")
    assert py(script, env={"SECRET": "s3cr3t"}).stdout == "s3cr3t\n"
    result = sb(script, env={"SECRET": "s3cr3t"})
    assert result.stdout == "None\n", result.stderr


def test_cant_rewrite_its_own_rules_without_the_python_layer(
    sb: Runner, py: Runner, project: Path
) -> None:
    # Landlock cannot keep one file of a writable tree read-only: only the Python layer
    # did. Such rules are refused before anything runs, naming the rule.
    script = sandboxed(project, "landlock", "open('.py-sandboxes', 'a').write('expose-rw=/\\n')\n")
    rules = (project / ".py-sandboxes").read_text().replace("expose-ro=.", "expose-rw=.")
    (project / ".py-sandboxes").write_text(rules)
    assert py(script).returncode == 0
    (project / ".py-sandboxes").write_text(rules)
    result = sb(script)
    assert result.returncode == 255
    lines = result.stderr.splitlines()
    assert lines[0] == "Refused at start-up: the rules cannot be used as they are."
    assert lines[1].startswith("  .py-sandboxes(1): 'expose-rw=.' lets the sandbox write ")
    assert "py-sandbox=false" in lines[1]
    assert (project / ".py-sandboxes").read_text() == rules
    kept = sb("--py-sandbox=true", "--python-import=*", script)  # the layer keeps it
    assert "RulePermissionError" in kept.stderr, kept.stderr
    assert (project / ".py-sandboxes").read_text() == rules


@pytest.mark.parametrize("provider", ["subprocess", "none"])
def test_no_layer_left_is_said_loudly(
    sb: Runner, py: Runner, project: Path, tmp_path: Path, provider: str
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    script = sandboxed(project, provider, f"print(open({str(secret)!r}).read())\n")
    assert py(script).stdout == "TOP-SECRET\n"
    result = sb(script)
    assert result.stdout == "TOP-SECRET\n"  # nothing enforces the rules: and it says so
    warning = [line for line in result.stderr.splitlines() if "NOT SANDBOXED" in line]
    assert warning == [
        "python-sb: NOT SANDBOXED: py-sandbox=false (.py-sandboxes(3)) and "
        f"os-sandbox={provider} leave no layer to enforce the rules; only the "
        "environment is filtered."
    ]
    report = json.loads(sb("--show-layers=json").stdout)
    assert str(report["detail"]).startswith("NOT SANDBOXED")
    rows = {row["rule"]: row for row in report["rules"]}
    assert rows["expose-ro=."]["note"] == "files are not enforced with py-sandbox=false"


def test_the_layer_report_says_the_kernel_is_alone(sb: Runner, project: Path) -> None:
    sandboxed(project, "landlock", "")
    result = sb("--show-layers=json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert "py-sandbox=false: the Python layer is off" in str(report["detail"])
    rows = {row["rule"]: row for row in report["rules"]}
    assert {row["python"] for row in rows.values()} == {""}
    assert rows["expose-ro=."]["kernel"] == "Landlock"
    assert rows["python-import=json"]["note"] == "imports are not enforced with py-sandbox=false"
