"""Permission prompts in partial mode, the paths besides files: a TCP connection made by the
trusted side and handed over, a sensitive call allowed at a prompt, a callback that never
answers, and the decision log's line of an answer. Each probe is first run by the
application itself (the positive control).
"""

from __future__ import annotations

import gc
import json
import socket
from pathlib import Path

import pytest
from partiallab import App  # type: ignore[import-not-found]

from listener import Listener

TOOLS = """
    from pysandboxes import sandbox

    @sandbox
    def fetch(port):
        import socket
        sock = socket.socket()
        fd = sock.fileno()
        try:
            sock.connect(("127.0.0.1", port))
            return sock.fileno() == fd, sock.recv(100).decode()
        finally:
            sock.close()

    @sandbox
    def count_objects():
        import gc
        return len(gc.get_objects()) > 0

    @sandbox
    def read(path):
        with open(path) as handle:
            return handle.read()
"""

MAIN = """
    import json, time
    from pysandboxes import Decision, sandboxes
    import tools

    asked = []

    def on_request(request):
        asked.append([request.kind, request.resource, request.operation, request.rule])
        if {slow!r}:
            time.sleep(5)
        return Decision.{answer}

    outcomes = []
    with sandboxes(on_request=on_request, on_request_timeout=1.0, {rules}):
        try:
            outcomes.append(repr({call}))
        except Exception as exc:
            outcomes.append(type(exc).__name__ + ": " + str(exc))
    print(json.dumps({{"asked": asked, "outcomes": outcomes}}))
"""


def _run(app: App, call: str, answer: str = "ONCE", rules: str = "", slow: bool = False):
    main = MAIN.format(
        call=call, answer=answer, rules=rules or "python_import=['socket', 'gc']", slow=slow
    )
    done = app.run(main, TOOLS)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


@pytest.fixture
def listener() -> Listener:
    return Listener()


def test_the_application_reaches_the_listener_itself(listener: Listener) -> None:
    with socket.create_connection(("127.0.0.1", listener.port), timeout=5) as sock:
        assert sock.recv(100) == b"hello\n"


def test_cant_connect_without_a_prompt(app: App, listener: Listener) -> None:
    seen, _ = _run(app, f"tools.fetch({listener.port})", answer="DENY")
    (outcome,) = seen["outcomes"]
    assert outcome.startswith("RuleSocketConnectionRefusedError"), outcome  # today's refusal
    assert f"Add 'net=ALLOW|tcp|127.0.0.1|{listener.port}|OUT'" in outcome


def test_a_connection_allowed_at_a_prompt_is_made_by_the_trusted_side(
    app: App, listener: Listener
) -> None:
    seen, _ = _run(app, f"tools.fetch({listener.port})")
    # The program's own socket object goes on, on the connection the trusted side made.
    assert seen["outcomes"] == ["(True, 'hello\\n')"]
    ((kind, resource, operation, rule),) = seen["asked"]
    assert (kind, resource, operation) == ("net", f"127.0.0.1:{listener.port}", "connect")
    assert rule == f"net=ALLOW|tcp|127.0.0.1|{listener.port}|OUT"
    assert listener.received == 1


def test_a_sensitive_call_allowed_at_a_prompt_goes_on(app: App) -> None:
    assert len(gc.get_objects()) > 0  # the positive control
    denied, _ = _run(app, "tools.count_objects()", answer="DENY")
    assert denied["outcomes"][0].startswith("RuleApiPermissionError")  # today's refusal
    seen, _ = _run(app, "tools.count_objects()")
    assert seen["outcomes"] == ["True"]
    assert seen["asked"][0][:3] == ["call", "gc.get_objects", "introspection"]
    assert seen["asked"][0][3] == "python-api=ALLOW:gc.get_objects"


def test_a_callback_that_never_answers_denies(app: App, tmp_path: Path) -> None:
    hidden = tmp_path / "notes.txt"
    hidden.write_text("hidden text")
    assert hidden.read_text() == "hidden text"  # the positive control
    seen, stderr = _run(app, f"tools.read({str(hidden)!r})", slow=True)
    assert seen["outcomes"][0].startswith("RuleFileNotFoundError: Reading")
    assert "on_request gave no answer in 1 s" in stderr
    assert "denied" in stderr


def test_an_answer_is_a_line_of_the_decision_log(app: App, tmp_path: Path) -> None:
    hidden = tmp_path / "notes.txt"
    hidden.write_text("hidden text")
    log = app.project / "audit.jsonl"
    rules = f"python_import=['socket', 'gc'], audit_log={str(log)!r}"
    seen, _ = _run(app, f"tools.read({str(hidden)!r})", rules=rules)
    assert seen["outcomes"] == ["'hidden text'"]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    answered = [line for line in lines if line["rule"] == "prompt"]
    assert len(answered) == 1, lines
    (line,) = answered
    assert (line["kind"], line["target"], line["access"]) == ("file", str(hidden), "read")
    assert (line["verdict"], line["rule_text"]) == ("allowed", "answered ONCE at a prompt")
    assert line["where"] == "tools.py:22"  # the open() of tools.read
