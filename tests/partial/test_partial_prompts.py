"""Permission prompts in partial mode: ``sandboxes(on_request=...)``.

A refusal of the Python layer becomes a question to the application's callback. What it
allows is performed by the trusted side (the file opened there, its descriptor handed
over), so the kernel wall does not widen: native code is refused as before. Each probe
of a refused access is first run by the application itself (the positive control).
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

import pytest
from partiallab import App  # type: ignore[import-not-found]

TOOLS = """
    from pysandboxes import sandbox

    @sandbox
    def read(path):
        with open(path) as handle:
            return handle.read()

    @sandbox
    def read_natively(path):
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.open(path.encode(), 0)
        return fd, ctypes.get_errno()

    @sandbox
    def load(name):
        import importlib
        return importlib.import_module(name).__name__

    @sandbox
    def forge(message):
        # A hostile child: its own request, written to every socket it holds.
        import json, os, socket, stat
        answers = []
        for fd in range(3, 64):
            try:
                if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                    continue
                with socket.socket(fileno=os.dup(fd)) as found:
                    if found.type != socket.SOCK_SEQPACKET:
                        continue  # the calls' own connection
                os.write(fd, json.dumps(message).encode())
                answers.append(os.read(fd, 4096).decode())
            except OSError:
                continue
        return answers
"""

MAIN = """
    import json, sys
    from pysandboxes import Decision, sandboxes
    import tools

    asked = []
    answers = {answers!r}

    def on_request(request):
        asked.append([request.kind, request.resource, request.operation, request.location,
                      request.rule, request.secret])
        answer = answers[min(len(asked), len(answers)) - 1]
        if answer == "raise":
            raise RuntimeError("the callback broke")
        return Decision[answer]

    outcomes = []
    with sandboxes(on_request=on_request, {rules}) as box:
{calls}
    print(json.dumps({{"asked": asked, "outcomes": outcomes}}))
"""


def _call(expression: str) -> str:
    return (
        f"        try:\n            outcomes.append(repr({expression}))\n"
        "        except Exception as exc:\n"
        "            outcomes.append(type(exc).__name__ + ': ' + str(exc))\n"
    )


def _run(app: App, answers: list[str], calls: list[str], rules: str = "") -> dict[str, list]:
    import json

    main = MAIN.format(
        answers=answers,
        rules=rules or "python_import='importlib'",
        calls="".join(_call(c) for c in calls),
    )
    done = app.run(main, TOOLS)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture
def hidden(tmp_path: Path) -> Path:
    """A file no rule exposes, outside the project; readable by the application."""
    place = tmp_path / "elsewhere"
    place.mkdir()
    secret = place / "notes.txt"
    secret.write_text("hidden text")
    return secret


@pytest.fixture
def ruled(app: App) -> Path:
    rules = app.project / ".py-sandboxes"
    rules.write_text("python-import=importlib\n")
    return rules


def test_application_reads_the_file_itself(hidden: Path) -> None:
    assert hidden.read_text() == "hidden text"  # the positive control of the probes below


def test_cant_read_a_hidden_file_without_a_prompt(app: App, ruled: Path, hidden: Path) -> None:
    main = f"""
        from pysandboxes import sandboxes
        import tools
        with sandboxes():
            try:
                tools.read({str(hidden)!r})
            except FileNotFoundError as exc:
                print("refused:", exc)
    """
    done = app.run(main, TOOLS)
    assert "refused: Reading" in done.stdout, done.stderr


def test_once_reads_the_file_and_the_next_read_asks_again(
    app: App, ruled: Path, hidden: Path
) -> None:
    read = f"tools.read({str(hidden)!r})"
    seen = _run(app, ["ONCE"], [read, read])
    assert seen["outcomes"] == ["'hidden text'", "'hidden text'"]
    assert len(seen["asked"]) == 2
    kind, resource, operation, location, rule, secret = seen["asked"][0]
    assert (kind, resource, operation) == ("file", str(hidden), "read")
    assert location == "tools.py:6"
    assert rule == f"expose-ro={hidden}"
    assert secret is False


def test_deny_is_todays_refusal(app: App, ruled: Path, hidden: Path) -> None:
    seen = _run(app, ["DENY"], [f"tools.read({str(hidden)!r})"])
    (outcome,) = seen["outcomes"]
    assert outcome.startswith("RuleFileNotFoundError: Reading")
    assert f"Add 'expose-ro={hidden}' to .py-sandboxes to allow it." in outcome


def test_raising_callback_denies(app: App, ruled: Path, hidden: Path) -> None:
    main = MAIN.format(
        answers=["raise"],
        rules="python_import='importlib'",
        calls=_call(f"tools.read({str(hidden)!r})"),
    )
    done = app.run(main, TOOLS)
    assert "RuleFileNotFoundError: Reading" in done.stdout
    assert "the callback broke" in done.stderr
    assert "denied" in done.stderr


def test_run_asks_once_per_resource(app: App, ruled: Path, hidden: Path) -> None:
    other = hidden.with_name("other.txt")
    other.write_text("other text")
    read, read_other = f"tools.read({str(hidden)!r})", f"tools.read({str(other)!r})"
    seen = _run(app, ["RUN"], [read, read, read_other, read_other])
    assert seen["outcomes"] == ["'hidden text'"] * 2 + ["'other text'"] * 2
    assert [entry[1] for entry in seen["asked"]] == [str(hidden), str(other)]


def test_always_writes_the_rule_and_a_fresh_sandbox_does_not_ask(
    app: App, ruled: Path, hidden: Path
) -> None:
    before = ruled.read_text()
    read = f"tools.read({str(hidden)!r})"
    seen = _run(app, ["ALWAYS"], [read, read])
    assert seen["outcomes"] == ["'hidden text'"] * 2
    assert len(seen["asked"]) == 1
    after = ruled.read_text()
    assert after.startswith(before)
    added = [line for line in after[len(before) :].splitlines() if line and line[0] != "#"]
    assert added == [f"expose-ro={hidden}  # allowed at a prompt, {_today()}"]
    assert (ruled.parent / ".py-sandboxes.old").read_text() == before
    again = _run(app, ["DENY"], [read])
    assert again == {"asked": [], "outcomes": ["'hidden text'"]}


def test_import_allowed_at_a_prompt(app: App, ruled: Path) -> None:
    import csv  # the positive control: the application imports it

    assert csv.__name__ == "csv"
    seen = _run(app, ["ONCE"], ["tools.load('csv')"])
    assert seen["outcomes"] == ["'csv'"]
    assert seen["asked"][0][:3] == ["import", "csv", "import"]
    assert seen["asked"][0][4] == "python-import=csv"


def test_cant_open_natively_what_a_prompt_allowed_for_python(
    app: App, ruled: Path, hidden: Path
) -> None:
    _need_landlock()
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.open(str(hidden).encode(), 0)  # the positive control: C opens it here
    assert fd >= 0
    os.close(fd)
    rules = "python_import=['importlib', 'ctypes'], python_api='ALLOW:native'"
    calls = [f"tools.read({str(hidden)!r})", f"tools.read_natively({str(hidden)!r})"]
    seen = _run(app, ["ONCE"], calls, rules)
    assert seen["outcomes"][0] == "'hidden text'"  # allowed for Python, opened here
    native_fd, error = eval(seen["outcomes"][1])
    assert native_fd == -1
    assert error in (13, 2)


def test_cant_answer_its_own_request_from_the_child(app: App, ruled: Path, hidden: Path) -> None:
    link = app.project / "link.txt"
    link.symlink_to(hidden)
    forged = [
        # Calls are numbered from 1 in order: each names its own, but the first.
        {"c": 999, "k": "file", "n": str(hidden), "a": "read"},  # no such call
        {"c": 2, "k": "file", "n": str(link), "a": "read"},  # a link on the way
        {"c": 3, "k": "file", "n": f"/proc/{os.getpid()}/environ", "a": "read"},
        {"c": 4, "k": "file", "n": str(hidden), "a": "read", "o": os.O_WRONLY},  # not a read
        {"c": 5, "k": "nonsense"},
    ]
    calls = [f"tools.forge({message!r})" for message in forged]
    seen = _run(app, ["ONCE"], calls, "python_import=['importlib', 'json', 'os', 'socket', 'stat']")
    import json

    for outcome in seen["outcomes"]:
        answers = eval(outcome)
        assert answers, "the request socket was found"
        assert all(json.loads(answer)["d"] == "deny" for answer in answers), answers
    # Only the second request named a running call and a plain file: it was asked about,
    # and the link was not followed (the answer was ONCE: the open was refused).
    assert [entry[1] for entry in seen["asked"]] == [str(link)]


def _today() -> str:
    import datetime

    return f"{datetime.date.today():%Y-%m-%d}"


def _need_landlock() -> None:
    sys.path.insert(0, str(Path(__file__).parents[1] / "kernel"))
    try:
        from kernelprobes import need_abi  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    need_abi(1, "Landlock at all")


def test_cant_flood_the_trusted_side_with_malformed_requests(tmp_path: Path) -> None:
    import json
    import socket

    from pysandboxes._host.prompts import Broker
    from pysandboxes._policy.model import Policy
    from pysandboxes._wire.asks import MAX_ASK
    from pysandboxes._wire.spec import LaunchSpec, Program

    asked: list[object] = []

    class Decider:
        def decide(self, request: object, call: int) -> object:
            asked.append(request)
            raise AssertionError("a malformed request was asked about")

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    spec = LaunchSpec(Policy(), Program("serve"), ".py-sandboxes", str(tmp_path), (), (), None)
    broker = Broker(ours, spec, Decider(), lambda call: call == 1)  # type: ignore[arg-type]
    broker.start()
    valid = json.dumps({"c": 1, "k": "file", "n": str(tmp_path / "x"), "a": "read"}).encode()
    read_end, write_end = os.pipe()
    try:
        for message, rights in [
            (b"x" * (MAX_ASK + 10), []),  # too long: cut by the kernel, refused
            (b"{not json", []),
            (b'{"c": 1, "k": "file", "n": "/x", "a": "read", "extra": 1}', []),
            (valid, [(socket.SOL_SOCKET, socket.SCM_RIGHTS, write_end.to_bytes(4, "little"))]),
        ]:
            theirs.sendmsg([message], rights)
            answer = json.loads(theirs.recv(4096))
            assert answer["d"] == "deny", (message[:40], answer)
    finally:
        theirs.close()
        broker.close()
        os.close(write_end)
    assert os.read(read_end, 1) == b""  # the descriptor passed was not kept: no writer left
    os.close(read_end)
    assert asked == []
