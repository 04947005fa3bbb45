"""Exceptions of sandboxed calls: the caller's own classes come back as themselves
(``except AppError`` works, attributes kept), built without running code the child
chose; the caller's control flow is never the child's (a remote exception is always an
``Exception``); the traceback shows the caller's frames then the remote ones, nothing
of the framework's, and never a line read from a file of the caller's."""

from __future__ import annotations

import linecache
import subprocess
import sys
import textwrap
import traceback
from pathlib import Path

import pytest
import valuetools  # type: ignore[import-not-found]

from pysandboxes import RemoteError, sandboxes


def test_the_applications_own_exception_is_caught_by_its_class_with_its_attributes(
    sandboxed: sandboxes,
) -> None:
    with pytest.raises(valuetools.AppError) as raised:
        valuetools.fail("app")
    assert type(raised.value) is valuetools.AppError
    assert raised.value.code == 3
    assert raised.value.args == ("it broke",)
    assert not isinstance(raised.value, RemoteError)


def test_a_chain_keeps_the_callers_classes_and_the_builtin_cause(sandboxed: sandboxes) -> None:
    with pytest.raises(valuetools.AppLookupError) as raised:
        valuetools.fail("lookup")
    assert isinstance(raised.value, LookupError)
    assert type(raised.value.__cause__) is KeyError


_LOCALLY = {"base": BaseException, "interrupt": valuetools.Interrupt, "exit": SystemExit}


@pytest.mark.parametrize("kind", ["base", "interrupt", "exit", "group"])
def test_cant_end_the_callers_loop_with_a_base_exception(sandboxed: sandboxes, kind: str) -> None:
    # The positive control: raised locally, none of them is an Exception.
    with pytest.raises(_LOCALLY.get(kind, BaseExceptionGroup)) as local:
        valuetools.fail.__wrapped__(kind)
    assert not isinstance(local.value, Exception)
    # Through the sandbox, `except Exception` of a request loop catches each.
    with pytest.raises(Exception) as caught:  # noqa: PT011 - any Exception will do
        valuetools.fail(kind)
    assert isinstance(caught.value, RemoteError | ExceptionGroup)
    if kind == "group":
        assert type(caught.value) is ExceptionGroup
        assert all(isinstance(e, Exception) for e in caught.value.exceptions)
        assert type(caught.value.exceptions[0]) is valuetools.AppError


def test_a_remote_traceback_has_no_frame_of_the_framework(sandboxed: sandboxes) -> None:
    try:
        valuetools.fail("plain")
    except ValueError as exc:
        shown = "".join(traceback.format_exception(exc))
    files = [line for line in shown.splitlines() if line.lstrip().startswith("File ")]
    assert len(files) == 2, shown  # this test's line, then the remote raise
    assert __file__ in files[0]
    assert "valuetools.py>" in files[1]
    assert "in fail" in files[1]
    assert "raise ValueError(kind)" in shown
    assert "pysandboxes" not in shown
    assert "^^^" not in shown.split(files[1])[1]  # no stray marker under the remote line


APPCONFIG = 'API = "public"\nTOKEN = "tok-parent-secret-1234"\n'
CHILD = """
    from pysandboxes import sandbox

    @sandbox
    def pretend():
        # The child names the caller's appconfig.py, line 2, for its frame.
        code = compile("raise ValueError('x')", APPCONFIG_FILE, "exec")
        exec(code.replace(co_firstlineno=2))
"""


def test_cant_make_a_remote_traceback_print_a_line_of_the_callers_file(tmp_path: Path) -> None:
    (tmp_path / "appconfig.py").write_text(APPCONFIG)
    tools = textwrap.dedent(CHILD).replace("APPCONFIG_FILE", repr(str(tmp_path / "appconfig.py")))
    (tmp_path / "spoof.py").write_text(tools)
    (tmp_path / ".py-sandboxes").write_text("python-import=spoof\npython-api=ALLOW:dynamic-code\n")
    main = """
        import traceback, appconfig, spoof
        from pysandboxes import sandboxes
        print(open(appconfig.__file__).read().splitlines()[1])  # the control: it is there
        with sandboxes():
            try:
                spoof.pretend()
            except ValueError:
                traceback.print_exc()
        import sys
        sys.excepthook(*sys.exc_info()) if sys.exc_info()[0] else None
    """
    (tmp_path / "main.py").write_text(textwrap.dedent(main))
    run = subprocess.run(
        [sys.executable, "main.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert "tok-parent-secret-1234" in run.stdout  # the parent can read its own file
    assert "appconfig.py>" in run.stderr  # the frame is there, under a remote-only name
    assert "tok-parent-secret-1234" not in run.stderr


def test_a_forged_reply_of_shared_causes_is_rebuilt_once_per_part() -> None:
    from pysandboxes._host.remote import rebuild

    node: dict[str, object] = {"module": "builtins", "qualname": "ValueError", "args": ("x",)}
    for _ in range(40):  # 2**40 exceptions if each reference were rebuilt
        node = {"module": "x", "qualname": "E", "cause": node, "context": node, "frames": []}
    members: dict[str, object] = {"module": "builtins", "qualname": "ValueError"}
    for _ in range(40):
        members = {"module": "g", "qualname": "G", "members": [members] * 8, "message": "m"}
    for forged in (node, members):
        rebuilt = rebuild(forged)
        assert isinstance(rebuilt, Exception)
    cycle: dict[str, object] = {"module": "x", "qualname": "E"}
    cycle["cause"] = cycle
    assert isinstance(rebuild(cycle), Exception)


def _resident_kib() -> int:
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0])


def test_cant_make_the_caller_keep_stand_in_classes_of_fresh_names_forever() -> None:
    from pysandboxes._host import remote

    def group(number: int) -> dict[str, object]:  # a group of 32 made-up classes
        members = [{"module": "made.up", "qualname": f"E{number}_{m}"} for m in range(32)]
        return {"module": "builtins", "qualname": "ExceptionGroup", "members": members}

    for number in range(300):  # the caches fill up first
        remote.rebuild(group(number))
    before = _resident_kib()
    for number in range(300, 3425):  # 100,000 fresh class names
        remote.rebuild(group(number))
    assert _resident_kib() - before < 50 * 1024
    assert len(remote._remote_classes) <= remote.MAX_STAND_INS
    lines = remote._SOURCES
    for number in range(2000):
        remote.rebuild(
            {"module": "m", "qualname": "E", "frames": [(f"/f{number}.py", 10**6, "f", "s")]}
        )
    assert len(lines) <= remote._MAX_SOURCES
    assert sum(1 for name in linecache.cache if name.startswith("<sandboxed /f")) <= len(lines)


FORGER = """
    import contextvars, pickle, sys
    from pysandboxes import sandbox

    @sandbox
    def forge(depth):
        # The call's id is in the context, the server's send path behind sys.stdout.
        call = next(v for k, v in contextvars.copy_context().items()
                    if k.name == "pysandboxes_call")
        node = {"module": "builtins", "qualname": "ValueError", "args": ("x",)}
        for _ in range(depth):  # one node, referenced twice per level: 2**depth paths
            node = {"module": "x", "qualname": "E", "cause": node, "context": node,
                    "frames": [("/f.py", 1, "f", "s")] * 50}
        sys.stdout._send(11, call, pickle.dumps(node, protocol=5))  # a RAISED frame
        return "the real result, too late"
"""


def test_cant_make_the_caller_spend_cpu_and_memory_on_a_forged_exception_reply(
    tmp_path: Path,
) -> None:
    (tmp_path / "forger.py").write_text(textwrap.dedent(FORGER))
    (tmp_path / ".py-sandboxes").write_text("python-import=forger, contextvars, pickle\n")
    main = """
        import resource, time, forger
        from pysandboxes import sandboxes
        with sandboxes():
            try:
                forger.forge(1)  # warm: the child started, the modules loaded
            except Exception:
                pass
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            start = time.monotonic()
            try:
                forger.forge(24)
            except Exception as exc:
                print("raised", type(exc).__name__)
            print("seconds", round(time.monotonic() - start, 2))
            print("KiB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
    """
    (tmp_path / "main.py").write_text(textwrap.dedent(main))
    run = subprocess.run(
        [sys.executable, "main.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    said = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert "raised" in said, run.stdout
    assert float(said["seconds"]) < 1.0, run.stdout
    assert int(said["KiB"]) < 50 * 1024, run.stdout
