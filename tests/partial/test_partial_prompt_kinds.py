"""Permission prompts in partial mode, the kinds performed as data or as changes by the
trusted side: a directory listed and a ``stat`` taken there and sent as data, a name
removed, made or renamed there, a variable's value sent. The kernel wall does not widen:
native code is refused the same listing and removal after a prompt allowed them for
Python. Each probe is first run by the application itself (the positive control).
"""

from __future__ import annotations

import ctypes
import datetime
import json
import os
import sys
from pathlib import Path

import pytest
from partiallab import App  # type: ignore[import-not-found]

TOOLS = """
    import os
    from pysandboxes import sandbox

    @sandbox
    def listdir(path):
        return sorted(os.listdir(path))

    @sandbox
    def scandir(path):
        with os.scandir(path) as found:
            return sorted((e.name, e.is_dir(), e.is_file(), e.is_symlink()) for e in found)

    @sandbox
    def size(path):
        found = os.stat(path)
        return found.st_size, oct(found.st_mode), found.st_mtime_ns > 0

    @sandbox
    def is_link(path):
        import stat
        return stat.S_ISLNK(os.lstat(path).st_mode)

    @sandbox
    def remove(path):
        os.remove(path)
        return "removed"

    @sandbox
    def make_and_rename(path, new):
        os.mkdir(path)
        os.rename(path, new)
        return "done"

    @sandbox
    def getenv(name):
        return os.environ.get(name)

    @sandbox
    def natively(op, path):
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if op == "opendir":
            libc.opendir.restype = ctypes.c_void_p
            done = libc.opendir(path.encode()) is not None
        else:
            done = libc.unlink(path.encode()) == 0
        return done, ctypes.get_errno()
"""

MAIN = """
    import json
    from pysandboxes import Decision, sandboxes
    import tools

    asked = []
    answers = {answers!r}

    def on_request(request):
        asked.append([request.kind, request.resource, request.operation, request.rule,
                      request.secret, request.target])
        return Decision[answers[min(len(asked), len(answers)) - 1]]

    outcomes = []
    with sandboxes(on_request=on_request, {rules}):
{calls}
    print(json.dumps({{"asked": asked, "outcomes": outcomes}}))
"""


def _call(expression: str) -> str:
    return (
        f"        try:\n            outcomes.append(repr({expression}))\n"
        "        except Exception as exc:\n"
        "            outcomes.append(type(exc).__name__ + ': ' + str(exc))\n"
    )


def _run(
    app: App,
    answers: list[str],
    calls: list[str],
    rules: str = "",
    env: dict[str, str] | None = None,
) -> dict[str, list]:
    main = MAIN.format(
        answers=answers,
        rules=rules or "python_import=['importlib', 'stat', 'os']",
        calls="".join(_call(c) for c in calls),
    )
    done = app.run(main, TOOLS, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture
def place(tmp_path: Path) -> Path:
    """A directory no rule exposes, outside the project; the application's to list."""
    found = tmp_path / "elsewhere"
    found.mkdir()
    (found / "notes.txt").write_text("hidden text")
    (found / "sub").mkdir()
    return found


@pytest.fixture
def ruled(app: App) -> Path:
    rules = app.project / ".py-sandboxes"
    rules.write_text("python-import=importlib\npython-import=stat\nignore=*.key\n")
    return rules


def _added(ruled: Path, before: str) -> list[str]:
    after = ruled.read_text()
    assert after.startswith(before)
    return [line for line in after[len(before) :].splitlines() if line and line[0] != "#"]


def _today() -> str:
    return f"{datetime.date.today():%Y-%m-%d}"


def _need_landlock() -> None:
    sys.path.insert(0, str(Path(__file__).parents[1] / "kernel"))
    try:
        from kernelprobes import need_abi  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    need_abi(1, "Landlock at all")


# -- listing and stat -------------------------------------------------------------------


def test_application_lists_and_stats_the_directory_itself(place: Path) -> None:
    assert sorted(os.listdir(place)) == ["notes.txt", "sub"]  # the positive control
    assert os.stat(place / "notes.txt").st_size == len("hidden text")


def test_deny_of_a_listing_is_todays_refusal(app: App, ruled: Path, place: Path) -> None:
    seen = _run(app, ["DENY"], [f"tools.listdir({str(place)!r})"])
    (outcome,) = seen["outcomes"]
    assert outcome.startswith("RuleFileNotFoundError: Reading"), outcome
    assert f"Add 'expose-ro={place}' to .py-sandboxes to allow it." in outcome
    assert seen["asked"][0][:3] == ["file", str(place), "list"]


def test_once_lists_through_the_trusted_side_and_the_next_listing_asks_again(
    app: App, ruled: Path, place: Path
) -> None:
    (place / "id.key").write_text("k")  # hidden by ignore=*.key: never sent
    listing = f"tools.listdir({str(place)!r})"
    seen = _run(app, ["ONCE"], [listing, listing, f"tools.scandir({str(place)!r})"])
    assert seen["outcomes"][:2] == [repr(["notes.txt", "sub"])] * 2
    entries = [("notes.txt", False, True, False), ("sub", True, False, False)]
    assert seen["outcomes"][2] == repr(entries)
    assert len(seen["asked"]) == 3
    assert seen["asked"][0][3] == f"expose-ro={place}"


def test_run_asks_once_for_a_listing(app: App, ruled: Path, place: Path) -> None:
    listing = f"tools.listdir({str(place)!r})"
    seen = _run(app, ["RUN"], [listing, listing])
    assert seen["outcomes"] == [repr(["notes.txt", "sub"])] * 2
    assert len(seen["asked"]) == 1


def test_always_writes_the_listing_rule_and_a_fresh_sandbox_does_not_ask(
    app: App, ruled: Path, place: Path
) -> None:
    before = ruled.read_text()
    seen = _run(app, ["ALWAYS"], [f"tools.listdir({str(place)!r})"])
    assert seen["outcomes"] == [repr(["notes.txt", "sub"])]
    assert _added(ruled, before) == [f"expose-ro={place}  # allowed at a prompt, {_today()}"]
    again = _run(app, ["DENY"], [f"tools.listdir({str(place)!r})"])
    assert again == {"asked": [], "outcomes": [repr(["notes.txt", "sub"])]}


def test_stat_taken_by_the_trusted_side_is_an_os_stat_result(
    app: App, ruled: Path, place: Path
) -> None:
    notes = place / "notes.txt"
    link = place / "link"
    link.symlink_to(notes)
    calls = [f"tools.size({str(notes)!r})", f"tools.size({str(notes)!r})"]
    calls.append(f"tools.is_link({str(link)!r})")
    seen = _run(app, ["ONCE", "ONCE", "ONCE"], calls)
    expected = repr((len("hidden text"), oct(notes.stat().st_mode), True))
    assert seen["outcomes"] == [expected, expected, "True"]
    assert [entry[2] for entry in seen["asked"]] == ["stat", "stat", "lstat"]
    denied = _run(app, ["DENY"], [f"tools.size({str(notes)!r})"])
    assert denied["outcomes"][0].startswith("RuleFileNotFoundError: Reading")


def test_cant_list_natively_what_a_prompt_allowed_for_python(
    app: App, ruled: Path, place: Path
) -> None:
    _need_landlock()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.opendir.restype = ctypes.c_void_p
    libc.closedir.argtypes = [ctypes.c_void_p]
    handle = libc.opendir(str(place).encode())  # the positive control: C lists it here
    assert handle is not None
    libc.closedir(handle)
    rules = "python_import=['importlib', 'ctypes', 'os', 'stat'], python_api='ALLOW:native'"
    calls = [f"tools.listdir({str(place)!r})", f"tools.natively('opendir', {str(place)!r})"]
    seen = _run(app, ["ONCE"], calls, rules)
    assert seen["outcomes"][0] == repr(["notes.txt", "sub"])  # allowed for Python, listed here
    done, error = eval(seen["outcomes"][1])
    assert done is False
    assert error in (13, 2)


# -- delete, create, rename ---------------------------------------------------------------


def test_once_removes_through_the_trusted_side_and_deny_is_todays_refusal(
    app: App, ruled: Path, place: Path
) -> None:
    notes = place / "notes.txt"
    denied = _run(app, ["DENY"], [f"tools.remove({str(notes)!r})"])
    assert denied["outcomes"][0].startswith("RuleFileNotFoundError: "), denied
    assert notes.exists()  # DENY: nothing removed
    assert denied["asked"][0][:3] == ["file", str(notes), "delete"]
    seen = _run(app, ["ONCE"], [f"tools.remove({str(notes)!r})"])
    assert seen["outcomes"] == ["'removed'"]
    assert not notes.exists()
    assert seen["asked"][0][3] == f"expose-rw={place}"


def test_make_and_rename_with_always_write_the_rule(app: App, ruled: Path, place: Path) -> None:
    made, renamed = place / "made", place / "renamed"
    before = ruled.read_text()
    seen = _run(app, ["ALWAYS"], [f"tools.make_and_rename({str(made)!r}, {str(renamed)!r})"])
    assert seen["outcomes"] == ["'done'"]
    assert renamed.is_dir()
    assert not made.exists()
    # The rule written rules the next run: this one allows the same resource only.
    assert [entry[2] for entry in seen["asked"]] == ["mkdir", "rename"]
    assert _added(ruled, before) == [f"expose-rw={place}  # allowed at a prompt, {_today()}"]
    again = _run(app, ["DENY"], [f"tools.make_and_rename({str(made)!r}, {str(made) + '2'!r})"])
    assert again == {"asked": [], "outcomes": ["'done'"]}


def test_rename_is_asked_with_both_names(app: App, ruled: Path, place: Path) -> None:
    made, renamed = place / "made", place / "renamed"
    seen = _run(app, ["ONCE"], [f"tools.make_and_rename({str(made)!r}, {str(renamed)!r})"])
    assert seen["outcomes"] == ["'done'"]
    operations = [(entry[2], entry[1], entry[5]) for entry in seen["asked"]]
    assert operations == [("mkdir", str(made), ""), ("rename", str(made), str(renamed))]
    assert renamed.is_dir()


def test_cant_remove_natively_what_a_prompt_allowed_for_python(
    app: App, ruled: Path, place: Path
) -> None:
    _need_landlock()
    first, second = place / "first.txt", place / "second.txt"
    for path in (first, second):
        path.write_text("x")
    probe = place / "probe.txt"
    probe.write_text("x")
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.unlink(str(probe).encode()) == 0  # the positive control: C removes it here
    rules = "python_import=['importlib', 'ctypes', 'os', 'stat'], python_api='ALLOW:native'"
    calls = [f"tools.remove({str(first)!r})", f"tools.natively('unlink', {str(second)!r})"]
    seen = _run(app, ["ONCE"], calls, rules)
    assert seen["outcomes"][0] == "'removed'"  # allowed for Python, removed by the trusted side
    done, error = eval(seen["outcomes"][1])
    assert done is False
    assert error in (13, 2)
    assert not first.exists()
    assert second.exists()


# -- environment variables ----------------------------------------------------------------


def test_a_variable_read_is_asked_and_sent_as_data(app: App, ruled: Path) -> None:
    env = {**os.environ, "PYSB_PROMPTED_VALUE": "the value"}
    read = "tools.getenv('PYSB_PROMPTED_VALUE')"
    denied = _run(app, ["DENY"], [read], env=env)
    assert denied["outcomes"] == ["None"]  # today's: the sandbox lacks it
    seen = _run(app, ["ONCE"], [read, read], env=env)
    assert seen["outcomes"] == ["'the value'"] * 2
    assert len(seen["asked"]) == 2
    kind, resource, operation, rule, secret, _ = seen["asked"][0]
    assert (kind, resource, operation, secret) == ("env", "PYSB_PROMPTED_VALUE", "read", False)
    assert rule == "env=PYSB_PROMPTED_VALUE=${PYSB_PROMPTED_VALUE}"
    ran = _run(app, ["RUN"], [read, read], env=env)
    assert ran["outcomes"] == ["'the value'"] * 2
    assert len(ran["asked"]) == 1


def test_always_for_a_token_like_variable_denies(app: App, ruled: Path) -> None:
    env = {**os.environ, "PYSB_PROMPTED_TOKEN": "s3cret"}
    before = ruled.read_text()
    seen = _run(app, ["ALWAYS"], ["tools.getenv('PYSB_PROMPTED_TOKEN')"], env=env)
    assert seen["outcomes"] == ["None"]
    assert seen["asked"][0][4] is True  # marked a secret: ALWAYS is not offered
    assert ruled.read_text() == before


def test_always_writes_the_variable_rule(app: App, ruled: Path) -> None:
    env = {**os.environ, "PYSB_PROMPTED_VALUE": "the value"}
    before = ruled.read_text()
    seen = _run(app, ["ALWAYS"], ["tools.getenv('PYSB_PROMPTED_VALUE')"], env=env)
    assert seen["outcomes"] == ["'the value'"]
    line = "env=PYSB_PROMPTED_VALUE=${PYSB_PROMPTED_VALUE}"
    assert _added(ruled, before) == [f"{line}  # allowed at a prompt, {_today()}"]


def test_a_variable_the_application_lacks_is_not_asked(app: App, ruled: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYSB_NOWHERE"}
    seen = _run(app, ["ONCE"], ["tools.getenv('PYSB_NOWHERE')"], env=env)
    assert seen == {"asked": [], "outcomes": ["None"]}


# -- a hostile child's own requests -----------------------------------------------------


class _Broker:
    """A broker that answers ONCE to whatever it asks, fed forged requests directly."""

    def __init__(self, tmp_path: Path, values: bool = True) -> None:
        import socket

        from pysandboxes._host.prompts import Broker
        from pysandboxes._policy.model import Policy
        from pysandboxes._wire.spec import LaunchSpec, Program

        self.asked: list[object] = []
        asked = self.asked

        class Decider:
            def decide(self, request: object, call: int) -> object:
                from pysandboxes import Decision

                asked.append(request)
                return Decision.ONCE

        ours, self.theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        rules = tmp_path / ".py-sandboxes"
        spec = LaunchSpec(
            Policy(), Program("serve"), ".py-sandboxes", str(tmp_path), (str(rules),), (), None
        )
        self.broker = Broker(ours, spec, Decider(), lambda call: call == 1, values=values)  # type: ignore[arg-type]
        self.broker.start()

    def ask(self, **fields: object) -> tuple[dict[str, object], int | None]:
        import socket

        self.theirs.send(json.dumps({"c": 1, **fields}).encode())
        space = socket.CMSG_SPACE(4)
        message, ancillary, _, _ = self.theirs.recvmsg(65536, space)
        fd = None
        for _, _, payload in ancillary:
            fd = int.from_bytes(payload[:4], "little")
        return json.loads(message), fd

    def close(self) -> None:
        self.theirs.close()
        self.broker.close()


def test_cant_have_the_trusted_side_list_or_change_through_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("kept")
    link = tmp_path / "link"
    link.symlink_to(outside)
    assert sorted(os.listdir(link)) == ["victim.txt"]  # the positive control: links lead there
    broker = _Broker(tmp_path)
    try:
        for operation in ("list", "stat", "delete"):
            answer, fd = broker.ask(k="file", n=f"{link}/victim.txt", a=operation)
            assert answer["d"] == "deny", (operation, answer)
            assert fd is None, (operation, answer)
        answer, fd = broker.ask(k="file", n=str(link), a="list")
        assert answer["d"] == "deny", answer
        assert fd is None, answer
        target = str(tmp_path / "moved")
        answer, _ = broker.ask(k="file", n=f"{link}/victim.txt", a="rename", t=target)
        assert answer["d"] == "deny"
    finally:
        broker.close()
    assert (outside / "victim.txt").read_text() == "kept"  # no side effect
    assert not (tmp_path / "moved").exists()


def test_cant_have_the_trusted_side_hand_over_a_huge_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pysandboxes._host import performing

    monkeypatch.setattr(performing, "MAX_LISTED", 50)
    crowded = tmp_path / "crowded"
    crowded.mkdir()
    for number in range(51):
        (crowded / f"entry{number}").touch()
    assert len(os.listdir(crowded)) == 51  # the positive control
    broker = _Broker(tmp_path)
    try:
        answer, fd = broker.ask(k="file", n=str(crowded), a="list")
        assert answer["d"] == "deny", answer
        assert fd is None, answer
        assert "more than 50 entries" in str(answer["m"])
    finally:
        broker.close()


def test_cant_have_the_trusted_side_remove_or_rename_a_rule_file(tmp_path: Path) -> None:
    rules = tmp_path / ".py-sandboxes"
    rules.write_text("python-import=json\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / ".py-sandboxes").write_text("expose-rw=/\n")  # another project's rules
    (project / "pyproject.toml").write_text("[tool.py-sandboxes]\n")
    broker = _Broker(tmp_path)
    try:
        forged = [
            {"n": str(rules), "a": "delete"},  # the run's rule file
            {"n": str(project / ".py-sandboxes"), "a": "delete"},  # a name rules are found by
            {"n": str(project / "pyproject.toml"), "a": "rename", "t": str(tmp_path / "x")},
            {"n": str(tmp_path / "new"), "a": "rename", "t": str(tmp_path / ".py-sandboxes")},
            {"n": str(tmp_path), "a": "rmdir"},  # a directory above the rule file
            {"n": str(tmp_path / "made" / ".py-sandboxes"), "a": "mkdir"},
            {"n": "/proc/self/x", "a": "mkdir"},
        ]
        for message in forged:
            answer, _ = broker.ask(k="file", **message)
            assert answer["d"] == "deny", (message, answer)
        # A directory holding a rule file is looked through before it is renamed.
        answer, _ = broker.ask(k="file", n=str(project), a="rename", t=str(tmp_path / "moved"))
        assert answer["d"] == "deny", answer
        assert "rule file" in str(answer["m"])
    finally:
        broker.close()
    assert rules.read_text() == "python-import=json\n"  # no side effect
    assert (project / ".py-sandboxes").exists()
    assert (project / "pyproject.toml").exists()
    assert not (tmp_path / "moved").exists()
    assert len(broker.asked) == 1  # only the rename of the project was asked about


def test_cant_read_a_variable_the_waiter_has_no_value_of(tmp_path: Path) -> None:
    broker = _Broker(tmp_path, values=False)  # complete mode: names only
    try:
        answer, _ = broker.ask(k="env", n="HOME", a="read")
        assert answer["d"] == "deny", answer
        assert "v" not in answer, answer
    finally:
        broker.close()
    assert broker.asked == []
