"""Hostile results: a sandboxed function that sends a pickle gadget as its reply runs
nothing in the application, in values mode and in objects mode.

The function is hostile: it writes its own reply frame on the connection (as any code
in the child can), with the gadget's bytes, before the server's honest reply. Each test
first runs the same bytes through plain ``pickle.loads`` in a plain process (the
positive control: the marker file appears, or the listener is reached), then through
partial mode, where the reply is refused with a message naming what it named, and no
marker, process or connection appears.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from gadgets import GADGETS, gadget_bytes  # type: ignore[import-not-found]
from partiallab import App  # type: ignore[import-not-found]

from listener import Listener  # type: ignore[import-not-found]

RESULT, RAISED = 10, 11

#: A hostile function: its reply is the bytes it is given, written on the connection.
TOOLS = """
    import os, stat, struct, time
    from pysandboxes import sandbox

    def _connection():
        for fd in range(3, 1024):
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    return fd
            except OSError:
                continue
        raise LookupError("no connection")

    @sandbox
    def forge(kind, payload, call_id=1):
        os.write(_connection(), struct.pack("<IQB", len(payload), call_id, kind) + payload)
        time.sleep(0.3)
        return "honest"
"""
RULES = "python-import=os, stat, struct, time\n"
MAIN = """
    import pathlib, tools
    from pysandboxes import sandboxes, SandBoxError
    payload = pathlib.Path("payload.bin").read_bytes()
    with sandboxes({mode}):
        try:
            got = tools.forge({kind}, payload)
            print("accepted", type(got).__name__)
        except SandBoxError as exc:
            print("refused", type(exc).__name__, " ".join(str(exc).split()))
    # VmHWM: this process's own peak (ru_maxrss keeps the peak of the process it was
    # forked from, before exec).
    peak = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]
    print("peak MiB", int(peak) // 1024)
"""
MODES = {"values": "", "objects": "remote_result_mode='objects'"}
#: What each refusal names: the first callable of the gadget the application never has.
NAMED = {
    "os_system": "posix.system",
    "subprocess_popen": "subprocess.Popen",
    "builtins_exec": "builtins.exec",
    "builtins_eval": "builtins.eval",
    "functools_partial": "functools.partial",
    "operator_attrgetter_chain": "operator.attrgetter",
    "operator_methodcaller_chain": "operator.methodcaller",
    "typing_get_type_hints": "typing.get_type_hints",
    "zipfile_zipfile": "zipfile.ZipFile",
    # pathlib's classes live in pathlib._local from 3.13: the name pickle writes.
    "pathlib_write_text": Path.write_text.__module__ + ".Path.write_text",
    "socket_create_connection": "socket.create_connection",
    "pickle_loads_nested": "_pickle.loads",
    "nested_in_containers": "posix.system",
    "nested_forty_levels_deep": "posix.system",
    "exception_own_reduce": "posix.system",
    "in_exception_args": "builtins.ValueError",
}


def _control(payload: bytes) -> None:
    """Plain pickle in a plain process: the gadget runs (the test can fail)."""
    subprocess.run(
        [sys.executable, "-c", "import pickle, sys; pickle.loads(sys.stdin.buffer.read())"],
        input=payload,
        check=True,
        timeout=30,
    )


def _forged(app: App, payload: bytes, mode: str, kind: int) -> list[str]:
    (app.project / ".py-sandboxes").write_text(RULES)
    (app.project / "payload.bin").write_bytes(payload)
    result = app.run(MAIN.format(mode=MODES[mode], kind=kind), TOOLS)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def _traces(mark: Path, tcp: Listener, before: int) -> tuple[bool, int]:
    time.sleep(0.3)  # a program a gadget started would have written by now
    return mark.exists(), tcp.received - before


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("gadget", list(GADGETS))
def test_a_gadget_in_a_result_never_runs_in_the_application(
    app: App, tmp_path: Path, tcp: Listener, gadget: str, mode: str
) -> None:
    mark = tmp_path / "ran"
    payload = gadget_bytes(gadget, str(mark), tcp.port)
    before = tcp.received
    _control(payload)
    assert _traces(mark, tcp, before) != (False, 0), f"{gadget} does nothing under pickle"
    mark.unlink(missing_ok=True)
    before = tcp.received
    lines = _forged(app, payload, mode, RESULT)
    assert lines[0].startswith("refused RuleResultRefusedError"), lines
    assert NAMED[gadget] in lines[0]
    assert _traces(mark, tcp, before) == (False, 0)


@pytest.mark.parametrize("gadget", ["exception_own_reduce", "in_exception_args", "os_system"])
def test_a_gadget_sent_as_a_raised_exception_never_runs_in_the_application(
    app: App, tmp_path: Path, tcp: Listener, gadget: str
) -> None:
    mark = tmp_path / "ran"
    payload = gadget_bytes(gadget, str(mark), tcp.port)
    _control(payload)
    assert mark.exists()
    mark.unlink()
    lines = _forged(app, payload, "values", RAISED)
    assert lines[0].startswith(
        "refused RuleResultRefusedError the sandboxed function's exception was refused"
    ), lines
    assert NAMED[gadget] in lines[0]
    assert not mark.exists()


def test_an_exception_whose_reduce_is_a_gadget_arrives_described_not_unpickled(
    app: App, tmp_path: Path
) -> None:
    mark = tmp_path / "ran"
    (app.project / ".py-sandboxes").write_text(f"python-import=os\nenv=MARK={mark}\n")
    result = app.run(
        """
        import tools
        from pysandboxes import sandboxes, RemoteError
        with sandboxes():
            for raising in (tools.own_reduce, tools.gadget_argument):
                try:
                    raising()
                except Exception as exc:
                    print(type(exc).__name__, isinstance(exc, RemoteError), exc.args)
        """,
        """
        import os
        from pysandboxes import sandbox

        class Gadget:
            def __reduce__(self):
                return (os.system, ("touch " + os.environ["MARK"],))

            def __repr__(self):
                return "<gadget>"

        class GadgetError(Exception):
            def __reduce__(self):
                return (os.system, ("touch " + os.environ["MARK"],))

        @sandbox
        def own_reduce():
            raise GadgetError("boom")

        @sandbox
        def gadget_argument():
            raise ValueError("bad", Gadget())
        """,
    )
    assert result.returncode == 0, result.stderr
    # The caller's own GadgetError (it imported tools), made without its __reduce__.
    assert result.stdout.splitlines() == [
        "GadgetError False ('boom',)",
        "ValueError False ('bad', '<gadget>')",
    ]
    assert not mark.exists()


BOMBS = {
    # ten bytes asking the unpickler for a memo of 2**29 slots (4 GiB)
    "memo_index": b"\x80\x05Nr" + (1 << 28).to_bytes(4, "little") + b".",
    # a million lists nested in each other, from 2 MB
    "recursion": b"\x80\x05" + b"]" * 1_000_000 + b"a" * 999_999 + b".",
    # eight million empty lists (80 bytes each once built) from 8 MB
    "amplification": b"\x80\x05](" + b"]" * 8_000_000 + b"e.",
    # deque(range(2**31)): a constructor turned into a loop
    "constructor_loop": (
        b"\x80\x05\x8c\x0bcollections\x8c\x05deque\x93\x8c\x08builtins\x8c\x05range\x93"
        b"J\x00\x00\x00\x00J\xff\xff\xff\x7f\x86R\x85R."
    ),
    # setting an attribute of a class the application uses: collections.Counter.get
    "class_attribute": (
        b"\x80\x05\x8c\x0bcollections\x8c\x07Counter\x93N}\x8c\x03get\x8c\x05owneds\x86b."
    ),
}
REFUSED_AS = {
    "memo_index": "LONG_BINPUT",
    "recursion": "nested deeper than 256 levels",
    "amplification": "more than 268435456 bytes to rebuild",
    "constructor_loop": "range(int, int): not the arguments",
    "class_attribute": "BUILD",
}


@pytest.mark.parametrize("bomb", list(BOMBS))
def test_a_bomb_in_a_result_is_refused_before_it_is_built(app: App, bomb: str) -> None:
    lines = _forged(app, BOMBS[bomb], "values", RESULT)
    assert lines[0].startswith("refused RuleResultRefusedError"), lines
    assert REFUSED_AS[bomb] in lines[0]
    peak = int(lines[1].split()[-1])
    assert peak < 200, f"the application grew to {peak} MiB"


def test_a_class_attribute_set_by_a_result_stays_unset(app: App) -> None:
    (app.project / ".py-sandboxes").write_text(RULES)
    (app.project / "payload.bin").write_bytes(BOMBS["class_attribute"])
    result = app.run(
        """
        import collections, pathlib, pickle, tools
        from pysandboxes import sandboxes, SandBoxError
        payload = pathlib.Path("payload.bin").read_bytes()
        pickle.loads(payload)  # control: plain pickle sets it
        print("control", collections.Counter.get)
        del collections.Counter.get
        with sandboxes():
            try:
                tools.forge(10, payload)
            except SandBoxError:
                pass
        print("after", collections.Counter.get is dict.get)
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["control owned", "after True"]


def test_a_child_speaking_out_of_protocol_is_cut_off_and_replaced(app: App) -> None:
    (app.project / ".py-sandboxes").write_text(RULES)
    (app.project / "payload.bin").write_bytes(b"")
    result = app.run(
        """
        import pathlib, tools
        from pysandboxes import sandboxes, SandboxCrashed
        with sandboxes():
            try:
                tools.forge(99, b"")  # a kind no child may send
            except SandboxCrashed as exc:
                print("cut off", exc.signal)
            print(tools.forge(10, b"\\x80\\x05K\\x07."))  # a fresh child serves on
        """,
        TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["cut off 9", "7"]
