"""A new user's first runs: nothing learns or runs unsandboxed by surprise, secrets seen
while learning are not granted, the plain prompt behaves like python3's, and slips on
the command line get a suggestion."""

from __future__ import annotations

import os
import re
from pathlib import Path

from runner import Runner
from terminal import Terminal, plain_screen

TERMINAL_ENV = {"PATH": os.environ.get("PATH", ""), "TERM": "xterm", "LC_ALL": "C.UTF-8"}
MARKER = "open('ran.txt', 'w').close()"


def test_cant_run_unasked_without_rules_and_without_a_terminal(
    sb: Runner, py: Runner, project: Path
) -> None:
    assert py("-c", MARKER).returncode == 0  # the control: the program would run
    (project / "ran.txt").unlink()
    result = sb("-c", MARKER, stdin="")  # an MCP client, CI, a pipe: no terminal
    assert result.returncode == 255
    assert "no terminal is here to ask" in result.stderr
    assert "python-sb --learn" in result.stderr
    assert not (project / "ran.txt").exists()
    assert not (project / ".py-sandboxes").exists()


def test_a_first_run_at_a_terminal_asks_before_learning(python_sb: str, project: Path) -> None:
    command = [python_sb, "-c", MARKER]
    terminal = Terminal(command, project, TERMINAL_ENV)
    try:
        screen = plain_screen(terminal.read_until(r"Learn now\? \[y/N\]"))
        terminal.type("n")
        terminal.read_until("nothing was run")
        status = terminal.wait()
    finally:
        terminal.close()
    assert "NOTHING refused" in screen
    assert status == 255  # as without a terminal: nothing was run, for want of rules
    assert not (project / "ran.txt").exists()
    assert not (project / ".py-sandboxes").exists()
    terminal = Terminal(command, project, TERMINAL_ENV)
    try:
        terminal.read_until(r"Learn now\? \[y/N\]")
        terminal.type("y")
        terminal.read_until("learned")
    finally:
        terminal.close()
    assert (project / "ran.txt").exists()
    written = (project / ".py-sandboxes").read_text()
    assert written.startswith("# .py-sandboxes: the rights this program runs with")
    assert "expose-rw=./ran.txt" in written or "expose-rw=." in written


def test_a_first_run_at_a_terminal_and_learn_write_the_same_file(
    python_sb: str, project: Path, tmp_path: Path
) -> None:
    # One format, whichever way learning was asked for: the template with the rules
    # learned in its blocks, and the summary says so.
    terminal = Terminal([python_sb, "-c", MARKER], project, TERMINAL_ENV)
    try:
        terminal.read_until(r"Learn now\? \[y/N\]")
        terminal.type("y")
        asked = plain_screen(terminal.read_until("learning blocks"))
        terminal.wait()
    finally:
        terminal.close()
    other = tmp_path / "other"
    other.mkdir()
    learned = Runner([python_sb], other)("--learn", "-c", MARKER)
    assert learned.returncode == 0, learned.stderr

    def rules(text: str) -> list[str]:  # the learned lines' sources differ in time only
        return [line.split("  # learned")[0] for line in text.splitlines() if "20" not in line]

    first = (project / ".py-sandboxes").read_text()
    second = (other / ".py-sandboxes").read_text()
    assert rules(first) == rules(second)
    for summary in (asked, learned.stderr):
        assert "written: the template" in summary.replace("\n", " ")


def test_secrets_seen_while_learning_are_written_commented_out(
    sb: Runner, project: Path, tmp_path: Path
) -> None:
    key = tmp_path / "home" / ".ssh" / "id_ed25519"
    key.parent.mkdir(parents=True)
    key.write_text("PRIVATE KEY")
    probe = (
        "import os\n"
        "print(os.environ.get('STRIPE_API_TOKEN'), os.environ.get('GREETING'))\n"
        f"print(open({str(key)!r}).read())\n"
    )
    (project / "app.py").write_text(probe)
    env = {"STRIPE_API_TOKEN": "tok-1", "GREETING": "hi", "HOME": str(tmp_path / "home")}
    learned = sb("--learn", "app.py", env=env)
    assert learned.returncode == 0, learned.stderr
    assert learned.stdout.splitlines() == ["tok-1 hi", "PRIVATE KEY"]
    text = (project / ".py-sandboxes").read_text()
    assert "env=GREETING=${GREETING}  # learned" in text
    assert "\n# env=STRIPE_API_TOKEN=${STRIPE_API_TOKEN}  # ⚠ SECRET, not granted" in text
    assert "\n# expose-ro=~/.ssh/id_ed25519  # ⚠ SECRET, not granted" in text
    assert "2 secret(s) the program used are written commented out" in learned.stderr
    assert "STRIPE_API_TOKEN, ~/.ssh/id_ed25519" in learned.stderr
    enforced = sb("app.py", env=env)
    assert enforced.stdout.startswith("None hi\n")  # the secret is not granted
    assert "PRIVATE KEY" not in enforced.stdout
    relearned = sb("--learn", "app.py", env=env)
    assert relearned.returncode == 0
    again = (project / ".py-sandboxes").read_text()
    assert again.count("STRIPE_API_TOKEN=${STRIPE_API_TOKEN}") == 1  # not written twice


def test_learning_into_a_named_file_writes_rules_alone_to_include(
    sb: Runner, project: Path
) -> None:
    (project / "app.py").write_text("print(open('/etc/hostname').read() != '')\n")
    learned = sb("--learn=learned.rules", "app.py")
    assert learned.returncode == 0, learned.stderr
    text = (project / "learned.rules").read_text()
    assert "expose-ro=/etc/hostname" in text
    assert "os-sandbox" not in text  # nothing a main rule file sets already
    (project / ".py-sandboxes").write_text('os-sandbox=landlock\ninclude "learned.rules"\n')
    enforced = sb("app.py")
    assert enforced.returncode == 0, enforced.stderr
    assert enforced.stdout == "True\n"


def test_the_template_is_printed_on_demand(sb: Runner) -> None:
    result = sb("--template")
    assert result.returncode == 0
    assert result.stdout.startswith("# .py-sandboxes")
    assert "expose-ro=" in result.stdout


def test_a_misspelt_option_gets_a_suggestion(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text("expose-ro=.\n")
    result = sb("--show-rule", "app.py")
    assert result.returncode == 2
    assert "unknown option --show-rule: did you mean --show-rules?" in result.stderr


def test_a_rule_option_takes_its_value_after_a_space(sb: Runner, project: Path) -> None:
    (project / "data").mkdir()
    (project / "data" / "x.txt").write_text("x")
    (project / ".py-sandboxes").write_text("python-import=os\n")
    result = sb("--expose-ro", "./data", "-c", "print(open('data/x.txt').read())")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "x\n"


def test_the_plain_prompt_completes_and_chains_no_import_error(
    python_sb: str, project: Path
) -> None:
    (project / ".py-sandboxes").write_text("python-import=os\n")
    # -S: no site directory, so no IPython: the standard console.
    terminal = Terminal([python_sb, "-S"], project, TERMINAL_ENV)
    try:
        terminal.read_until("⚠ >>> ")
        terminal.type("1/0")
        screen = plain_screen(terminal.read_until(r"ZeroDivisionError.*\n⚠ >>> "))
        terminal.type("import os")
        os.write(terminal.fd, b"os.getc\t")  # completes to the common prefix, getcwd
        terminal.type("()")
        completed = plain_screen(terminal.read_until(re.escape(repr(str(project)))))
    finally:
        terminal.close()
    assert "IPython" not in screen
    assert "During handling" not in screen
    assert "os.getcwd" in completed.replace("\x07", "")
    assert "**" not in screen


def test_a_misspelt_include_is_an_error_naming_its_line(sb: Runner, project: Path) -> None:
    (project / "shared.py-sandboxes").write_text("learn=false\n")
    (project / ".py-sandboxes").write_text('include "shraed.py-sandboxes"\nexpose-ro=.\n')
    result = sb("-c", "pass")
    assert result.returncode == 255
    assert ".py-sandboxes(1): 'include \"shraed.py-sandboxes\"'" in result.stderr
    assert "does not exist" in result.stderr
    assert "include-optional" in result.stderr
    (project / ".py-sandboxes").write_text('include-optional "maybe.py-sandboxes"\nexpose-ro=.\n')
    assert sb("-c", "pass").returncode == 0


def test_env_without_a_value_suggests_the_forwarding_rule(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text("env=HOME\n")
    result = sb("-c", "pass")
    assert result.returncode == 255
    assert "did you mean env=HOME=${HOME}?" in result.stderr


def test_an_except_runtimeerror_does_not_swallow_a_refusal() -> None:
    import pysandboxes

    assert not issubclass(pysandboxes.SandBoxError, RuntimeError)
    assert issubclass(pysandboxes.RuleFileNotFoundError, FileNotFoundError)


def test_inspection_without_rules_describes_the_run_that_would_happen(
    sb: Runner, project: Path
) -> None:
    layers = sb("--show-layers", "-c", "pass")
    assert layers.returncode == 0
    assert "no rule file" in layers.stdout
    assert "Landlock" not in layers.stdout
    rules = sb("--show-rules", "-c", "pass")
    assert "nothing is enforced" in rules.stdout
    assert not (project / ".py-sandboxes").exists()


def test_ipython_completes_attributes_under_the_rules(python_sb: str, project: Path) -> None:
    (project / ".py-sandboxes").write_text("python-import=os\n")
    terminal = Terminal([python_sb], project, TERMINAL_ENV)
    try:
        terminal.read_until(r"In \[1\]")
        terminal.type("import os")
        terminal.read_until(r"In \[2\]")
        os.write(terminal.fd, b"os.getc\t")
        completed = plain_screen(terminal.read_until("getcwdb"))
    finally:
        terminal.close()
    assert "getcwd" in completed


def test_a_refusal_names_the_users_path_not_the_sandboxs_route(
    sb: Runner, project: Path, tmp_path: Path
) -> None:
    target = tmp_path / "elsewhere" / "planted.txt"
    target.parent.mkdir()
    (project / ".py-sandboxes").write_text(f"expose-ro={target.parent}\n")
    result = sb("-c", f"open({str(target)!r}, 'w')")
    assert result.returncode == 1
    assert f"Writing to '{target}' is refused" in result.stderr
    assert "/proc/self/fd" not in result.stderr
    assert not target.exists()


def test_both_layers_give_one_answer_to_a_listing(sb: Runner, py: Runner, project: Path) -> None:
    (project / "data").mkdir()
    (project / "data" / "x.txt").write_text("x")
    probe = "import os; print(sorted(os.listdir('.')))"
    assert "'data'" in py("-c", probe).stdout  # the control
    (project / ".py-sandboxes").write_text("expose-ro=./data/x.txt\npython-import=os\n")
    refused = sb("-c", probe)  # Landlock would refuse it: the Python layer says so first
    assert refused.returncode == 1
    assert "RuleFileNotFoundError: Reading '.'" in refused.stderr
    assert "Add 'expose-ro=.'" in refused.stderr
    listed = sb("--os-sandbox=subprocess", "-c", probe)  # no kernel layer: the way shown
    assert listed.stdout == "['data']\n"
