"""The application is safe from its sandboxed child: a hostile ``@sandbox`` function
reaches none of the application's descriptors, and what it sends back costs the
application bounded work, whatever bytes it chose (``docs/security.md``, partial mode).

Each probe is first shown to work without the sandbox (a plain subprocess, plain
``pickle``, a plain class): the positive control. Hostile replies are crafted by hand,
opcode by opcode, as a child bypassing its own encoder would write them.
"""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest
from partiallab import App  # type: ignore[import-not-found]

from pysandboxes._host.select import unavailable_reason
from pysandboxes._wire.codec import RefusedValue, decode_value

PROVIDERS = ("landlock", "unshare", "bwrap")

PROBE = """
import errno, os
def probe():
    seen = []
    try:
        seen.append(os.pread(40, 100, 0).decode())
    except OSError as exc:
        seen.append(errno.errorcode[exc.errno])
    try:
        os.write(41, b"written through fd 41")
        seen.append("wrote")
    except OSError as exc:
        seen.append(errno.errorcode[exc.errno])
    return seen
"""


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cant_use_the_applications_inherited_descriptors(
    app: App, tmp_path: Path, provider: str
) -> None:
    reason = unavailable_reason(provider)
    if reason is not None:
        pytest.skip(f"{provider}: {reason}")
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("s3cr3t")
    victim = app.project / "victim.txt"
    victim.write_text("original")
    (app.project / ".py-sandboxes").write_text(
        f"python-import=os, errno\nexpose-rw=./victim.txt\nos-sandbox={provider}\n"
    )
    result = app.run(
        f"""
        import os, subprocess, sys
        import tools
        from pysandboxes import sandboxes
        # Inheritable, as os.dup2 makes them (or a shell, or systemd, passes them).
        os.dup2(os.open({str(secret)!r}, os.O_RDONLY), 40)
        os.dup2(os.open("victim.txt", os.O_WRONLY | os.O_APPEND), 41)
        control = subprocess.run(
            [sys.executable, "-c", tools.PROBE + "print(probe())"],
            close_fds=False, capture_output=True, text=True, check=True,
        )
        print("control", control.stdout.strip())
        with open("victim.txt", "w") as handle:
            handle.write("original")
        with sandboxes():
            print("sandboxed", tools.probe())
        print("victim", open("victim.txt").read())
        os.pread(40, 1, 0), os.fstat(41)  # the application's own are untouched
        """,
        f"from pysandboxes import sandbox\nPROBE = {PROBE!r}\n{PROBE}\nprobe = sandbox(probe)\n",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "control ['s3cr3t', 'wrote']",
        "sandboxed ['EBADF', 'EBADF']",
        "victim original",
    ]


NATIVE_CONNECT = """
import ctypes, errno
def connect(path):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.socket(1, 1, 0)  # AF_UNIX, SOCK_STREAM: C, which the Python layer does not see
    if fd < 0:
        return errno.errorcode[ctypes.get_errno()]
    raw = path.encode()
    address = ctypes.create_string_buffer((1).to_bytes(2, "little") + raw, 110)
    if libc.connect(fd, address, 110) < 0:
        return errno.errorcode[ctypes.get_errno()]
    libc.send(fd, b"FROM-SANDBOX", 12, 0)
    return "connected"
"""


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cant_reach_the_applications_unix_sockets_from_native_code(
    app: App, tmp_path: Path, provider: str
) -> None:
    # The application's ssh agent, its database's socket: with a writable exposure the
    # child may make AF_UNIX sockets, and only the broker judges where they connect.
    reason = unavailable_reason(provider)
    if reason is not None:
        pytest.skip(f"{provider}: {reason}")
    outside = tmp_path / "outside"
    outside.mkdir()
    (app.project / "data").mkdir()
    (app.project / ".py-sandboxes").write_text(
        "python-import=ctypes, errno\npython-api=ALLOW:native\nexpose-rw=./data\n"
        f"os-sandbox={provider}\n"
    )
    result = app.run(
        f"""
        import socket, threading
        import tools
        from pysandboxes import sandboxes
        servers, got = [], []
        for path in ({str(outside / "agent.sock")!r}, "data/mine.sock"):
            server = socket.socket(socket.AF_UNIX)
            server.bind(path)
            server.listen()
            servers.append(server)
        def serve(server):
            while True:
                connection, _ = server.accept()
                got.append((server.getsockname().rpartition("/")[2], connection.recv(20)))
        for server in servers:
            threading.Thread(target=serve, args=(server,), daemon=True).start()
        print("control", tools.plain({str(outside / "agent.sock")!r}))
        with sandboxes():
            print("host", tools.connect({str(outside / "agent.sock")!r}))
            print("exposed", tools.connect("data/mine.sock"))
        import time
        time.sleep(0.3)
        print(sorted(got))
        """,
        f"from pysandboxes import sandbox\n{NATIVE_CONNECT}\nplain = connect\n"
        "connect = sandbox(connect)\n",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "control connected",
        "host EACCES" if provider != "bwrap" else "host ENOENT",
        "exposed connected",
        "[('agent.sock', b'FROM-SANDBOX'), ('mine.sock', b'FROM-SANDBOX')]",
    ]


PASS_DESCRIPTORS = """
import ctypes, errno, struct, threading, time
def hold(count):
    # A full socket pair's buffer: each sendmsg waits, the descriptors it passes with it.
    libc = ctypes.CDLL(None, use_errno=True)
    pair = (ctypes.c_int * 2)()
    libc.socketpair(1, 1, 0, pair)  # AF_UNIX, SOCK_STREAM
    libc.fcntl(pair[0], 4, 0o4000)  # F_SETFL, O_NONBLOCK
    while libc.send(pair[0], b"x" * 65536, 65536, 0) > 0:
        pass
    libc.fcntl(pair[0], 4, 0)
    refused = []
    def send():
        body = struct.pack("=253i", *[pair[1]] * 253)  # SCM_RIGHTS, the kernel's most
        control = struct.pack("=Qii", 16 + len(body), 1, 1) + body
        control = ctypes.create_string_buffer(control, 1032)
        data = ctypes.create_string_buffer(b"y", 1)
        vector = ctypes.create_string_buffer(struct.pack("=QQ", ctypes.addressof(data), 1))
        header = struct.pack(
            "=QI4xQQQQi4x", 0, 0, ctypes.addressof(vector), 1, ctypes.addressof(control), 1032, 0
        )
        if libc.sendmsg(pair[0], ctypes.create_string_buffer(header), 0) < 0:
            refused.append(errno.errorcode[ctypes.get_errno()])
    threads = [threading.Thread(target=send, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    time.sleep(1)
    return sum(thread.is_alive() for thread in threads), sorted(set(refused))
"""


@pytest.mark.parametrize("provider", ["landlock", "unshare"])
def test_cant_exhaust_the_applications_descriptors_with_passed_ones(
    app: App, provider: str
) -> None:
    # The broker runs in the application and holds its own copy of each descriptor a
    # message passes while the call waits: 32 waiting calls of 253 each were 8,096 of the
    # application's descriptors, past the common limit of 1,024.
    reason = unavailable_reason(provider)
    if reason is not None:
        pytest.skip(f"{provider}: {reason}")
    (app.project / "data").mkdir()
    (app.project / ".py-sandboxes").write_text(
        "python-import=ctypes, errno, struct, threading, time\npython-api=ALLOW:native\n"
        f"expose-rw=./data\nos-sandbox={provider}\n"
    )
    result = app.run(
        """
        import os, resource
        import tools
        from pysandboxes import sandboxes
        _, most = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, most))
        print("control", *tools.plain(32))
        with sandboxes():
            print("sandboxed", *tools.hold(32))
            files = [open(os.devnull) for _ in range(300)]
            print("opened", len(files))
        """,
        f"from pysandboxes import sandbox\n{PASS_DESCRIPTORS}\n"
        "plain = hold\nhold = sandbox(hold)\n",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "control 32 []",
        "sandboxed 1 ['ETOOMANYREFS']",
        "opened 300",
    ]


# -- the reply budget: shared references are charged at every use ------------------------

#: One dict of 30,000 keys, which a hostile reply refers to 600 (or 500) times.
SHARED = {f"k{i}": i for i in range(30_000)}


class SharedCounter:
    """Pickles as ``Counter(SHARED)``, the dict by reference: what the child's own encoder
    writes for a function returning 600 of them (a 155 KB stream)."""

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        import collections

        return (collections.Counter, (SHARED,))


def _shared_counters() -> bytes:
    return pickle.dumps([SharedCounter() for _ in range(600)], protocol=5)


def _shared_descriptions() -> bytes:
    """500 object descriptions of ``tools.Point`` sharing one 30,000-attribute dict, as a
    hostile child bypassing its encoder writes them (``remote-result-mode=objects``)."""

    class Describing(pickle.Pickler):
        def persistent_id(self, obj: object) -> object:
            none: dict[str, object] = {}
            return ("object", "tools", "Point", SHARED, none) if obj == "point" else None

    out = io.BytesIO()
    Describing(out, protocol=5).dump(["point"] * 500)
    return out.getvalue()


#: This process's own peak RSS, in KiB: VmHWM starts afresh at exec, where ru_maxrss
#: keeps the peak of the process that forked it (the test runner's).
PEAK = 'int([l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1])'

#: A plain decoder, as one that trusts the child would decode: the bombs are real.
NAIVE = f"""
import pickle, sys
class Plain:
    pass
class Naive(pickle.Unpickler):
    def persistent_load(self, pid):
        made = object.__new__(Plain)
        made.__dict__.update(pid[3])
        return made
payload = sys.stdin.buffer.read()
before = {PEAK}
Naive(__import__("io").BytesIO(payload)).load()
print(({PEAK} - before) // 1024)
"""

HOSTILE = """
    import os, stat, struct, time
    from pysandboxes import sandbox

    class Point:
        pass

    def _connection():
        for fd in range(3, 1024):
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    return fd
            except OSError:
                continue
        raise LookupError("no connection")

    @sandbox
    def forge(payload, call_id):
        # Its own reply frame, written before the server's honest one.
        os.write(_connection(), struct.pack("<IQB", len(payload), call_id, 10) + payload)
        time.sleep(0.3)

    SHARED = {f"k{i}": i for i in range(30_000)}

    class SharedCounter:
        def __reduce__(self):
            import collections
            return (collections.Counter, (SHARED,))

    @sandbox
    def shared_counters():
        return [SharedCounter() for _ in range(600)]  # the child's own encoder writes it

    @sandbox
    def plain():
        return {"rows": [1, 2, 3]}
"""
MEASURED = f"""
    import pathlib, time, tools
    from pysandboxes import sandboxes, RuleResultRefusedError
    payload = pathlib.Path("payload.bin").read_bytes()
    with sandboxes({{rules}}):
        print(tools.plain())  # the child and the decoder are ready
        before, start = {PEAK}, time.monotonic()
        try:
            tools.{{call}}
            print("accepted")
        except RuleResultRefusedError as exc:
            print("refused", " ".join(str(exc).split()))
        print("seconds", round(time.monotonic() - start, 3))
        print("grew MiB", ({PEAK} - before) // 1024)
        print(tools.plain())  # the child serves on
"""


def _naive_growth(payload: bytes) -> int:
    """MiB a plain decoder's process grows by decoding ``payload`` (the control)."""
    done = subprocess.run(
        [sys.executable, "-c", NAIVE], input=payload, capture_output=True, check=True, timeout=60
    )
    return int(done.stdout)


def _flat_and_fast(lines: list[str]) -> None:
    seconds, grew = float(lines[0].split()[-1]), int(lines[1].split()[-1])
    assert seconds < 1.0, f"refused after {seconds} s"
    assert grew < 50, f"the application grew by {grew} MiB"


def _measured(app: App, payload: bytes, call: str, rules: str = "") -> list[str]:
    (app.project / ".py-sandboxes").write_text(
        "python-import=os, stat, struct, time, collections\n"
    )
    (app.project / "payload.bin").write_bytes(payload)
    result = app.run(MEASURED.format(rules=rules, call=call), HOSTILE)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_cant_make_the_parent_spend_memory_on_shared_references(app: App) -> None:
    payload = _shared_counters()
    assert len(payload) < 400_000
    assert _naive_growth(payload) > 300  # control: plain pickle copies the dict 600 times
    lines = _measured(app, payload, "shared_counters()")
    assert lines[0] == "{'rows': [1, 2, 3]}"
    assert lines[1].startswith("refused the sandboxed function's result was refused"), lines
    assert f"sandboxes(result_limit={256 << 20})" in lines[1]
    assert "each shared part counted at every use" in lines[1]
    _flat_and_fast(lines[2:4])
    assert lines[4:] == ["{'rows': [1, 2, 3]}"]


def test_cant_make_the_parent_spend_memory_on_shared_object_attributes(app: App) -> None:
    payload = _shared_descriptions()
    assert _naive_growth(payload) > 300  # control: a decoder copying per description
    lines = _measured(app, payload, "forge(payload, 2)", "remote_result_mode='objects'")
    assert lines[1].startswith("refused the sandboxed function's result was refused"), lines
    assert "more than 268435456 bytes to rebuild" in lines[1]
    _flat_and_fast(lines[2:4])
    assert lines[4:] == ["{'rows': [1, 2, 3]}"]


def _hand_made(body: bytes) -> bytes:
    return b"\x80\x05" + body + b"."


def test_a_shared_container_is_charged_at_every_use_a_shared_string_is_not() -> None:
    container = b"]\x94(" + b"K\x01" * 1000 + b"e"  # a list of 1000 items, remembered
    text = b"\x8c\x03abc\x94"  # a string, remembered
    refs = 2000
    shared = _hand_made(b"](" + container + b"h\x00" * refs + b"e")
    # The list is 8 KiB; its 2000 uses, as copies, 16 MiB: over a 4 MiB bound.
    with pytest.raises(RefusedValue, match=r"more than 4194304 bytes .* every use"):
        decode_value(shared, max_bytes=4 << 20)
    value: list[object] = decode_value(shared, max_bytes=64 << 20)  # type: ignore[assignment]
    assert len(value) == refs + 1
    assert all(item is value[0] for item in value)  # shared as it was sent
    strings = _hand_made(b"](" + text + b"h\x00" * refs + b"e")
    assert decode_value(strings, max_bytes=1 << 20) == ["abc"] * (refs + 1)


def _tree(levels: int) -> bytes:
    """t1 = (0, 0), t(n+1) = (tn, tn), as the key of a dict: 2**levels leaves."""
    body = b"K\x00K\x00\x86\x94"
    for level in range(1, levels):
        body += b"0h" + bytes([level - 1]) + b"h" + bytes([level - 1]) + b"\x86\x94"
    return _hand_made(b"}" + body + b"K\x01s")


def test_cant_make_the_parent_hash_a_tree_of_shared_references() -> None:
    # A tuple's hash is not kept: hashing the key walks every leaf of its tree.
    (key,) = pickle.loads(_tree(16))  # control: plain pickle builds (and hashed) it
    leaves, stack = 0, [key]
    while stack:
        item = stack.pop()
        if type(item) is tuple:
            stack.extend(item)  # type: ignore[arg-type]
        else:
            leaves += 1
    assert leaves == 2**16
    start = time.monotonic()
    with pytest.raises(RefusedValue, match="each shared part counted at every use"):
        decode_value(_tree(40))  # 2**40 leaves: hours of hashing
    assert time.monotonic() - start < 1.0


def _colliding(count: int) -> list[int]:
    """Integers sharing one hash (an integer's hash is itself modulo 2**61 - 1)."""
    return [i * (2**61 - 1) for i in range(1, count + 1)]


def _longs(keys: list[int], between: bytes = b"") -> bytes:
    body = b""
    for key in keys:
        raw = key.to_bytes((key.bit_length() + 8) // 8, "little", signed=True)
        body += b"\x8a" + bytes([len(raw)]) + raw + between
    return body


#: A dict, a set and a frozenset keyed by 20,000 integers sharing one hash (280 KB).
COLLIDING: dict[str, tuple[bytes, bytes, bytes]] = {
    "dict": (b"}(", b"K\x00", b"u"),
    "set": (b"\x8f(", b"", b"\x90"),
    "frozenset": (b"(", b"", b"\x91"),
}


def _keyed(kind: str, keys: list[int]) -> bytes:
    start, between, end = COLLIDING[kind]
    return _hand_made(start + _longs(keys, between) + end)


@pytest.mark.parametrize("kind", list(COLLIDING))
def test_cant_make_the_parent_spend_cpu_on_keys_sharing_one_hash(kind: str) -> None:
    keys = _colliding(20_000)
    assert len({hash(key) for key in keys}) == 1  # control: each insertion walks the others
    few: frozenset[int] = pickle.loads(_keyed(kind, keys[:64]))  # control: plain pickle
    assert len(few) == 64
    built: frozenset[int] = decode_value(_keyed(kind, keys[:64]))  # type: ignore[assignment]
    assert len(built) == 64  # at the bound: built
    start = time.monotonic()
    with pytest.raises(RefusedValue, match="more than 64 keys sharing one hash"):
        decode_value(_keyed(kind, keys))  # plain pickle: seconds, and squared beyond
    assert time.monotonic() - start < 1.0


def test_keys_the_stream_could_make_collide_still_cross_whole() -> None:
    # Tuples, floats, longs as keys go through the counting decoder: the same values.
    value = {(i, float(i)): {2**70 + i} for i in range(2_000)}
    assert decode_value(pickle.dumps(value, protocol=5)) == value


# -- objects mode: nothing of the application's classes runs on the child's data --------

OBJECTS_TOOLS = """
    import enum, os
    from pysandboxes import is_in_sandbox, sandbox

    class Color(enum.Enum):
        RED = 1

    class Hashed(enum.Enum):
        RED = 1

        def __hash__(self):
            if not is_in_sandbox():
                open(os.environ["MARK"] + ".member", "w").close()
            return 1

    class Holder:
        def __del__(self):  # removes what it holds: in the application, outside/victim.txt
            if not is_in_sandbox():
                os.remove(self.path)

    class Heir(Holder):
        pass

    class Key:
        def __hash__(self):
            if not is_in_sandbox():
                open(os.environ["MARK"] + ".hash", "w").close()
            return 1

        def __eq__(self, other):
            if not is_in_sandbox():
                open(os.environ["MARK"] + ".eq", "w").close()
            return True

    class Meta(type):
        def __hash__(cls):
            if not is_in_sandbox():
                open(os.environ["MARK"] + ".meta", "w").close()
            return 1

    class Registered(metaclass=Meta):
        pass

    @sandbox
    def registered():
        return Registered()

    class Watched:
        def __getattribute__(self, name):
            if not is_in_sandbox():
                open(os.environ["MARK"] + ".attribute", "w").close()
            return object.__getattribute__(self, name)

    def holding(kind, path):
        made = kind()
        made.path = path
        return made

    @sandbox
    def finalized(path):
        return holding(Holder, path)

    @sandbox
    def inherited(path):
        return holding(Heir, path)

    @sandbox
    def keyed():
        return {Key(): 1}

    @sandbox
    def member():
        return {Key()}

    @sandbox
    def members():
        return {Color.RED: 1}  # an existing member, hashed by Enum's own __hash__

    @sandbox
    def hashed():
        return {Hashed.RED: 1}

    @sandbox
    def watched():
        return [Watched(), Key()]  # as values of a list: rebuilt, never hashed or asked
"""
OBJECTS_RULES = "python-import=os, enum\nremote-result-mode=objects\n"


def test_cant_make_the_parent_run_a_finalizer_on_the_childs_data(app: App, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    victim, control = outside / "victim.txt", outside / "control.txt"
    victim.write_text("kept")
    control.write_text("removed by the control")
    (app.project / ".py-sandboxes").write_text(OBJECTS_RULES)
    result = app.run(
        f"""
        import gc, os, tools
        from pysandboxes import sandboxes, RuleResultRefusedError
        tools.holding(tools.Holder, {str(control)!r})  # control: dropped, its __del__ runs
        print("control", os.path.exists({str(control)!r}))
        with sandboxes():
            for call in (tools.finalized, tools.inherited):
                try:
                    call({str(victim)!r})
                    print("rebuilt")
                except RuleResultRefusedError as exc:
                    print("refused", "defines __del__" in str(exc), str(exc).split(":")[1])
        gc.collect()
        print("victim", os.path.exists({str(victim)!r}))
        """,
        OBJECTS_TOOLS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "control False",
        "refused True  tools.Holder",
        "refused True  tools.Heir",
        "victim True",
    ]


def test_cant_make_the_parent_hash_compare_or_ask_the_childs_objects(
    app: App, tmp_path: Path
) -> None:
    mark = tmp_path / "ran"
    (app.project / ".py-sandboxes").write_text(OBJECTS_RULES)
    result = app.run(
        """
        import glob, os, tools
        from pysandboxes import sandboxes, RuleResultRefusedError
        mark = os.environ["MARK"]
        {tools.Key(): 1, tools.Key(): 2, tools.Hashed.RED: 3, tools.Registered: 4}  # control
        isinstance(tools.Watched(), dict)  # control: isinstance asks for __class__
        print("control", sorted(p[len(mark):] for p in glob.glob(mark + ".*")))
        for path in glob.glob(mark + ".*"):
            os.remove(path)
        with sandboxes():
            for call in (tools.keyed, tools.member, tools.hashed, tools.registered, tools.members):
                try:
                    print("rebuilt", call())
                except RuleResultRefusedError as exc:
                    print("refused", str(exc).split(": ", 1)[1][:40])
            got = tools.watched()
            print("rebuilt", [type(item).__name__ for item in got])
        print("ran", sorted(p[len(mark):] for p in glob.glob(mark + ".*")))
        """,
        OBJECTS_TOOLS,
        env={"MARK": str(mark)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "control ['.attribute', '.eq', '.hash', '.member', '.meta']",
        "refused an object as a dict key or set member (i",
        "refused an object as a dict key or set member (i",
        "refused tools.Hashed: its __hash__ or __eq__ is ",
        "refused tools.Registered: its metaclass defines ",
        "rebuilt {<Color.RED: 1>: 1}",
        "rebuilt ['Watched', 'Key']",
        "ran []",
    ]
