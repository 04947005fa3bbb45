"""python-sb as a user drives it: argument forms, help, the rules report, the session."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from terminal import Terminal, plain_screen

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner


PROBE = (
    "import json, sys\n"
    "print(json.dumps({'argv': sys.argv, 'name': __name__, 'flags': list(sys.flags),"
    " 'warn': sys.warnoptions, 'x': sorted(sys._xoptions)}))\n"
)


def rules(project: Path, text: str = "expose-ro=.\n") -> None:
    (project / ".py-sandboxes").write_text(text + "env=LC_ALL=${LC_ALL}\npython-import=*\n")


@pytest.mark.parametrize(
    "args",
    [
        ["-c" + PROBE, "a"],
        ["-Im", "this"],
        ["-Bu", "probe.py", "-x"],
        ["-Wdefault", "-Xdev", "probe.py"],
        ["-O", "-m", "probe", "--", "z"],
        ["--", "probe.py", "-m"],
        ["-E", "-s", "-c", PROBE],
    ],
    ids=["glued-c", "glued-Im", "glued-flags", "glued-W-X", "module-args", "dashdash", "E-s"],
)
def test_argument_forms_behave_as_python(
    sb: Runner, py: Runner, project: Path, args: list[str]
) -> None:
    rules(project)
    (project / "probe.py").write_text(PROBE)
    ours, theirs = sb(*args), py(*args)
    assert (ours.returncode, ours.stderr) == (theirs.returncode, theirs.stderr)
    if ours.stdout.startswith("{"):
        assert json.loads(ours.stdout) == json.loads(theirs.stdout)
    else:
        assert ours.stdout == theirs.stdout


def test_glued_module_with_its_own_options(sb: Runner, py: Runner, project: Path) -> None:
    rules(project)
    data = '{"b": 1, "a": [1, 2]}'
    ours, theirs = (
        sb("-mjson.tool", "--sort-keys", stdin=data),
        py("-mjson.tool", "--sort-keys", stdin=data),
    )
    assert (ours.returncode, ours.stdout) == (theirs.returncode, theirs.stdout)


def test_usage_errors_exit_2(sb: Runner, project: Path) -> None:
    for args, message in (
        (["-c"], "Argument expected for the -c option"),
        (["-z"], "Unknown option: -z"),
    ):
        result = sb(*args)
        assert result.returncode == 2
        assert message in result.stderr


def test_rules_on_the_command_line_refused_by_the_lock(sb: Runner, project: Path) -> None:
    rules(project, "expose-ro=.\nlearn=false\n")
    result = sb("--expose-rw=/", "-c", "print('ran')")
    assert result.returncode == 255
    assert result.stdout == ""
    assert (
        "'learn=false' locks the rules: the command line cannot add 'expose-rw=/'" in result.stderr
    )


def test_show_rules_lists_each_rule_with_its_line(sb: Runner, project: Path) -> None:
    rules(project, "# a comment\nexpose-ro=.\nenv=HOME=${HOME}\n")
    result = sb("--show-rules", "--env=EXTRA=1", "app.py")
    assert result.returncode == 0, result.stderr
    lines = [line.split() for line in result.stdout.splitlines()[1:]]
    assert lines == [
        ["<arg>(1)", "env=EXTRA=1"],
        [".py-sandboxes(2)", "expose-ro=."],
        [".py-sandboxes(3)", "env=HOME=${HOME}"],
        [".py-sandboxes(4)", "env=LC_ALL=${LC_ALL}"],
        [".py-sandboxes(5)", "python-import=*"],
    ]


def readme_help(repo_root: Path) -> str:
    text = (repo_root / "README.md").read_text()
    match = re.search(r"## `python-sb --help`\n\n```text\n(.*?)```", text, re.S)
    assert match is not None, "README.md has no python-sb --help section"
    return match.group(1)


def test_help_is_the_one_the_readme_shows(python_sb: str, repo_root: Path) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "COLUMNS": "100", "TERM": "dumb"}
    out = subprocess.run([python_sb, "--help"], capture_output=True, text=True, env=env, check=True)
    shown = "\n".join(line.rstrip() for line in out.stdout.splitlines()).strip("\n") + "\n"
    assert "\x1b[" not in out.stdout  # plain text on a pipe
    assert shown == readme_help(repo_root)


def test_uvx_runs_a_program_from_the_wheels(wheels_dir: Path, tmp_path: Path) -> None:
    uvx = shutil.which("uvx")
    if uvx is None:
        pytest.skip("uvx is not installed: run scripts/test, which installs uv")
    (tmp_path / ".py-sandboxes").write_text("expose-ro=.\npython-import=*\n")
    (tmp_path / "app.py").write_text("import sys; print('ran', sys.argv[1:])\n")
    cli = next(wheels_dir.glob("python_sb-*.whl"))
    lib = next(wheels_dir.glob("pysandboxes-*.whl"))
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_TOOL_DIR": str(tmp_path / "t")}
    out = subprocess.run(
        [uvx, "--python", sys.executable, "--from", str(cli), "--with", str(lib), "python-sb"]
        + ["app.py", "x"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert (out.returncode, out.stdout) == (0, "ran ['x']\n"), out.stderr


def session(python_sb: str, project: Path) -> Terminal:
    rules(project)
    env = {"PATH": os.environ.get("PATH", ""), "TERM": "xterm", "LC_ALL": "C.UTF-8"}
    return Terminal([python_sb], project, env)


def drive(terminal: Terminal, prompt: str) -> str:
    # The default provider on this machine is Landlock, and the banner says so.
    terminal.read_until(
        "Limited by the rules in '.py-sandboxes', enforced by the Python layer "
        "and os-sandbox=landlock"
    )
    terminal.read_until(prompt)
    terminal.type("6 * 7")
    terminal.read_until("42")
    terminal.type("open('/etc/shadow')")
    terminal.read_until("RuleFileNotFoundError")
    terminal.type("import os")
    terminal.type("os.open??" if "In" in prompt else "help(os.open)")
    return terminal.read_until("dir_fd")


def test_session_with_ipython(python_sb: str, project: Path) -> None:
    pytest.importorskip("IPython", reason="IPython is not installed in the test environment")
    terminal = session(python_sb, project)
    try:
        screen = plain_screen(drive(terminal, r"⚠ In \[1\]"))
    finally:
        terminal.close()
    assert "SANDBOXES Python" in screen
    assert "⚠ In [2]" in screen
    assert "Reading '/etc/shadow' is refused" in screen
    assert "pysandboxes" not in screen.split("Reading '/etc/shadow'")[0]  # no guard frame
    assert "Signature" in screen


def test_session_without_ipython(wheels_dir: Path, project: Path, tmp_path: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed: run scripts/test, which installs it")
    venv = tmp_path / "no-ipython"
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True, env=env)
    wheels = [str(w) for w in wheels_dir.glob("*.whl")]
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), *wheels],
        check=True,
        env=env,
        timeout=300,
    )
    terminal = session(str(venv / "bin" / "python-sb"), project)
    try:
        screen = plain_screen(drive(terminal, "⚠ >>> "))
    finally:
        terminal.close()
    assert "SANDBOXES Python" in screen
    assert "⚠ >>> 6 * 7" in screen
    assert "Reading '/etc/shadow' is refused" in screen
    assert "open(path, flags, mode=511, *, dir_fd=None)" in screen


def test_a_refusal_at_the_standard_prompt_shows_no_guard_frame(
    python_sb: str, project: Path
) -> None:
    # -S: no site directory, so no IPython: the standard console prints the error.
    rules(project)
    env = {"PATH": os.environ.get("PATH", ""), "TERM": "xterm", "LC_ALL": "C.UTF-8"}
    terminal = Terminal([python_sb, "-S"], project, env)
    try:
        terminal.read_until("⚠ >>> ")
        terminal.type("open('/etc/shadow')")
        screen = plain_screen(terminal.read_until(r"learning\.md#secrets\.\n⚠ >>> "))
    finally:
        terminal.close()
    assert "IPython" not in screen
    assert 'File "<console>", line 1, in <module>' in screen
    assert "RuleFileNotFoundError: Reading '/etc/shadow' is refused" in screen
    assert "pysandboxes/" not in screen
    assert "<pysandboxes" not in screen


def test_config_error_on_a_terminal_shows_the_line(python_sb: str, project: Path) -> None:
    (project / ".py-sandboxes").write_text("expose-ro=.\nbogus-key=1\nenv=A=1\n")
    env = {"PATH": os.environ.get("PATH", ""), "TERM": "xterm", "LC_ALL": "C.UTF-8"}
    terminal = Terminal([python_sb, "-c", "print('ran')"], project, env)
    try:
        screen = plain_screen(terminal.read_until(r"env=A=1"))
    finally:
        terminal.close()
    assert "Syntax error in config files." in screen
    assert ".py-sandboxes(2): unknown key 'bogus-key'" in screen
    assert "→    2 │ bogus-key=1" in screen
    assert "ran" not in screen


def test_a_start_up_refusal_has_its_own_heading(sb: Runner, python_sb: str, project: Path) -> None:
    # The rules read well, but a writable rule over this interpreter's own site-packages
    # would let the sandbox plant code for the next run: not a syntax error.
    (project / ".py-sandboxes").write_text(f"expose-ro=.\nexpose-rw={sys.prefix}\n")
    result = sb("-c", "print('ran')")
    assert result.returncode == 255
    lines = result.stderr.splitlines()
    assert lines[0] == "Refused at start-up: the rules cannot be used as they are."
    assert lines[1].startswith(f"  .py-sandboxes(2): 'expose-rw={sys.prefix}' lets the sandbox")
    assert "where python-sb's own interpreter loads code from" in lines[1]
    assert "Syntax error" not in result.stderr
    env = {"PATH": os.environ.get("PATH", ""), "TERM": "xterm", "LC_ALL": "C.UTF-8"}
    terminal = Terminal([python_sb, "-c", "print('ran')"], project, env)
    try:
        screen = plain_screen(terminal.read_until(rf"→    2 │ expose-rw={re.escape(sys.prefix)}"))
    finally:
        terminal.close()
    assert "Refused at start-up: the rules cannot be used as they are." in screen
    assert "Syntax error" not in screen


def test_the_banner_names_the_kernel_provider() -> None:
    from pysandboxes._inside.repl import banner

    assert "the Python layer and os-sandbox=landlock" in banner(
        ".py-sandboxes", provider="landlock"
    )
    assert "by the Python layer alone" in banner(".py-sandboxes", provider="subprocess")
    assert "NOT SANDBOXED" in banner(".py-sandboxes", provider="none")
    alone = banner(".py-sandboxes", provider="landlock", python_layer=False)
    assert "enforced by os-sandbox=landlock alone (py-sandbox=false: no Python layer)" in alone
    assert "NOT SANDBOXED" in banner(".py-sandboxes", python_layer=False)
    # Plain text: a terminal shows no markup.
    assert "**" not in banner(".py-sandboxes", provider="landlock")


def test_a_learning_session_says_it_learns(python_sb: str, project: Path) -> None:
    # Asked with --learn (a session never learns unasked): it refuses nothing, and the
    # banner says so rather than claiming limits.
    env = {"PATH": os.environ.get("PATH", ""), "TERM": "xterm", "LC_ALL": "C.UTF-8"}
    terminal = Terminal([python_sb, "--learn"], project, env)
    try:
        terminal.read_until("LEARNING: nothing is refused")
        screen = plain_screen(terminal.read_until("⚠ "))
    finally:
        terminal.close()
    assert "Limited by the rules" not in screen


def test_the_prompt_after_a_program_run_with_i_is_marked(python_sb: str, project: Path) -> None:
    rules(project)
    (project / "app.py").write_text("x = 41\n")
    env = {"PATH": os.environ.get("PATH", ""), "TERM": "xterm", "LC_ALL": "C.UTF-8"}
    terminal = Terminal([python_sb, "-i", "app.py"], project, env)
    try:
        terminal.read_until("⚠ >>> ")
        terminal.type("print(x + 1)")
        screen = plain_screen(terminal.read_until("42"))
    finally:
        terminal.close()
    assert "⚠ >>> print(x + 1)" in screen


def test_the_prompt_after_i_needs_no_rule_of_its_own(python_sb: str, project: Path) -> None:
    """CPython's prompt after ``-i`` imports for itself (3.13: linecache for every line,
    and its new prompt, _pyrepl, which the sandbox replaces by the basic one): none of it
    is the program's to be refused, and the user's lines are judged as before."""
    (project / ".py-sandboxes").write_text("expose-ro=.\nenv=LC_ALL=${LC_ALL}\n")
    (project / "app.py").write_text("x = 41\n")
    env = {"PATH": os.environ.get("PATH", ""), "TERM": "xterm", "LC_ALL": "C.UTF-8"}
    terminal = Terminal([python_sb, "-i", "app.py"], project, env)
    try:
        terminal.read_until("⚠ >>> ")
        terminal.type("print(x + 1)")
        terminal.read_until("42")
        terminal.type("import csv")
        screen = plain_screen(terminal.read_until("python-import=csv"))
    finally:
        terminal.close()
    assert "Importing csv is refused by the import guard" in screen
    assert "linecache" not in screen, screen
    assert "_pyrepl" not in screen, screen


def test_a_learning_session_learns_what_the_user_typed_not_the_shell(
    python_sb: str, project: Path
) -> None:
    # IPython and prompt_toolkit read variables and load ctypes for themselves; with no
    # line typed by the user on the stack, that is the shell's, not the user's to grant.
    env = {"PATH": os.environ.get("PATH", ""), "TERM": "xterm", "LC_ALL": "C.UTF-8"}
    env["HOME"] = str(project)
    terminal = Terminal([python_sb, "--learn"], project, env)
    try:
        terminal.read_until("⚠ ")
        terminal.type("import shlex")  # not among the template's modules
        terminal.type("exit()")
        terminal.read_until("learned")
        os.waitpid(terminal.pid, 0)
    finally:
        os.close(terminal.fd)

    def active(text: str) -> list[str]:
        lines = (line.split("  #", 1)[0].strip() for line in text.splitlines())
        return [line for line in lines if line and not line.startswith("#")]

    template = subprocess.run([python_sb, "--template"], capture_output=True, text=True)
    given = set(active(template.stdout))  # the layers, the standard library's pure modules
    learned = [line for line in active((project / ".py-sandboxes").read_text())]
    assert [line for line in learned if line not in given] == ["python-import=shlex"]


def test_help_lists_every_option_the_messages_point_to(python_sb: str) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "COLUMNS": "80", "TERM": "dumb"}
    out = subprocess.run([python_sb, "--help"], capture_output=True, text=True, env=env, check=True)
    options = out.stdout.split("Examples:")[0]
    for option in ("--template", "--audit-log", "--quiet-refusals", "--learn", "--replay"):
        assert f"│ {option} " in options, option
    # The examples fit 80 columns: each command on a line of its own, none wrapped.
    examples = out.stdout.split("Examples:")[1].splitlines()
    assert all(len(line.rstrip()) <= 80 for line in examples)
    commands = [line.strip() for line in examples if line.strip().startswith("python-sb")]
    assert len(commands) == 9
    assert "python-sb --template > .py-sandboxes" in commands
