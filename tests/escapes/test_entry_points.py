"""One table of entry points (``_inside/guards/entrypoints``), held to both sides.

A missed entry point is an escape: ``socket.sendmsg`` to a Unix datagram path was judged
nowhere while ``sendto`` was (issue 30). The guards' handlers must be exactly what the
table says is theirs; every audit event CPython documents in C, or its standard library
raises, in the families of files, sockets and modules must be handled or listed as
harmless with a reason. Then every function taking a path is tried with every type it
accepts (the Unix socket addresses, with every buffer type: ``test_guard_integrity``).
"""

from __future__ import annotations

import os
import re
import socket
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from escapelab import Lab, tree

from pysandboxes._inside.enforce import Recording
from pysandboxes._inside.guards import entrypoints
from pysandboxes._inside.guards.calls import CallGuard
from pysandboxes._inside.guards.dynamic import DynamicCodeGuard
from pysandboxes._inside.guards.files import FileGuard
from pysandboxes._inside.guards.imports import ImportGuard
from pysandboxes._inside.guards.network import NetworkGuard
from pysandboxes._inside.guards.paths import Resolver
from pysandboxes._policy.judge import ApiJudge, FileJudge, NetJudge
from pysandboxes._policy.parser import parse_policy

_AUDIT_CALL = re.compile(r"""sys\.audit\(\s*(['"])([^'"]+)\1""")


def _in_families(event: str) -> bool:
    return event.startswith(entrypoints.FAMILIES)


def _raised_by_the_standard_library() -> set[str]:
    """The events the standard library's Python files raise (``sys.audit("...")``)."""
    stdlib = Path(os.path.dirname(os.__file__))
    found: set[str] = set()
    for path in stdlib.rglob("*.py"):
        relative = path.relative_to(stdlib).parts
        if relative[0] in ("test", "idlelib", "site-packages") or "tests" in relative:
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found.update(match.group(2) for match in _AUDIT_CALL.finditer(text))
    return {event for event in found if _in_families(event)}


#: Strings of the interpreter's binaries that look like events of these families but
#: name a module, a type or an exception (``os.stat_result``), or a C file.
_NOT_EVENTS = frozenset(
    {
        "os.path",
        "os.stat_result",
        "os.statvfs_result",
        "os.terminal_size",
        "socket.gaierror",
        "socket.herror",
        "mmap.mmap",
        "sqlite3.dump",
    }
)
_C_NAME = re.compile(
    rb"(?<![\w./])((?:os|socket|sqlite3|fcntl|mmap|marshal)\.[a-z_][a-z_0-9/]*)\x00"
)


def _named_in_the_interpreters_binaries() -> set[str]:
    """Strings of ``python``, ``libpython`` and the extension modules shaped like an
    event of these families: a C event a new CPython adds shows up here first."""
    import glob
    import sysconfig

    version = sysconfig.get_python_version()
    prefix = sys.base_prefix
    files = [os.path.realpath(sys.executable)]
    files += glob.glob(f"{prefix}/lib/libpython{version}*.so*")
    files += glob.glob(f"{prefix}/lib/python{version}/lib-dynload/*.so")
    found: set[str] = set()
    for name in files:
        try:
            data = Path(name).read_bytes()
        except OSError:
            continue
        found.update(match.group(1).decode() for match in _C_NAME.finditer(data))
    return {n for n in found if not n.endswith((".c", ".h")) and n not in _NOT_EVENTS}


def _handled_elsewhere() -> dict[str, set[str]]:
    policy = parse_policy(None, extra_rules=["expose-ro=."], cwd=tempfile.gettempdir())
    api = ApiJudge(policy)
    calls = set(CallGuard(api, Recording(), ".py-sandboxes").events)
    dynamic = DynamicCodeGuard(api, Recording(), os.path.dirname(os.__file__), [], [], "x")
    return {"calls": calls, "dynamic": set(dynamic.events)}


def test_the_guards_handle_exactly_the_events_the_table_gives_them() -> None:
    files = FileGuard(FileJudge([], []), Recording(), Resolver())
    assert set(files.events) == entrypoints.FILES
    policy = parse_policy(None, extra_rules=["expose-ro=."], cwd=tempfile.gettempdir())
    network = NetworkGuard(NetJudge(policy.net), policy, Recording(), ".py-sandboxes")
    assert set(network.events) == entrypoints.SOCKETS
    handlers = {name: None for name in ("_reported", "_exec", "_extension", "_started")}
    events = ImportGuard.events.fget(SimpleNamespace(**handlers))  # type: ignore[attr-defined]
    assert set(events) == entrypoints.IMPORTS
    elsewhere = _handled_elsewhere()
    for event, guard in entrypoints.ELSEWHERE.items():
        assert event in elsewhere[guard], f"{event}: not handled by the {guard} guard"


def test_every_file_socket_and_import_event_is_judged_or_harmless_with_a_reason() -> None:
    handled = entrypoints.FILES | entrypoints.SOCKETS | entrypoints.IMPORTS
    listed = handled | set(entrypoints.ELSEWHERE) | set(entrypoints.HARMLESS)
    candidates = set(entrypoints.DOCUMENTED_IN_C) | _raised_by_the_standard_library()
    candidates |= _named_in_the_interpreters_binaries()
    missing = sorted(event for event in candidates if event not in listed)
    assert not missing, f"audit events neither handled nor listed as harmless: {missing}"
    both = sorted(set(entrypoints.HARMLESS) & (handled | set(entrypoints.ELSEWHERE)))
    assert not both, f"listed as harmless and handled: {both}"
    assert all(len(reason) > 20 for reason in entrypoints.HARMLESS.values())


def test_the_scans_find_what_they_should() -> None:
    # The scans must see the events the guards rely on, or they prove nothing.
    found = _raised_by_the_standard_library()
    assert {"shutil.copyfile", "shutil.rmtree", "tempfile.mkstemp", "glob.glob"} <= found
    assert {
        "os.rename",
        "socket.sendmsg",
        "sqlite3.connect",
    } <= _named_in_the_interpreters_binaries()


# -- every function taking a path, with every type it accepts ------------------------------

#: Path-taking functions of os (and the open family): each reads or changes the secret.
PATH_CALLS = {
    "open": "open(p).read()",
    "io.open_code": "__import__('io').open_code(os.fsdecode(p)).read()",  # str only
    "os.open": "os.close(os.open(p, os.O_RDONLY))",
    "os.stat": "os.stat(p)",
    "os.lstat": "os.lstat(p)",
    "os.path.getsize": "os.path.getsize(p)",
    "os.statvfs": "os.statvfs(p)",
    "os.listxattr": "os.listxattr(p)",
    "os.listdir": "os.listdir(d)",
    "os.scandir": "list(os.scandir(d))",
    "os.readlink": "os.readlink(link)",
    "os.chmod": "os.chmod(p, 0o644)",
    "os.utime": "os.utime(p)",
    "os.link": "os.link(p, made('hard'))",
    "os.symlink": "os.symlink(p, made('soft'))",
    "os.mkdir": "os.mkdir(made('dir'))",
    "os.mkfifo": "os.mkfifo(made('fifo'))",
    "os.truncate": "os.truncate(p, 0)",
    "os.rename": "os.rename(p, made('renamed'))",
    "os.remove": "os.remove(link)",
    "os.chdir": "os.chdir(d)",
}

#: How each accepted type is made from a str path.
PATH_TYPES = {
    "str": "lambda s: s",
    "bytes": "os.fsencode",
    "pathlike": "__import__('pathlib').Path",
    "custom_pathlike": "lambda s: type('P', (), {'__fspath__': lambda self: s})()",
}


@pytest.mark.parametrize("kind", list(PATH_TYPES))
def test_cant_reach_outside_through_any_path_function_with_any_path_type(
    lab: Lab, kind: str
) -> None:
    def link() -> None:
        os.symlink(lab.secret_file, lab.outside / "link")

    lab.setup(link)
    convert = PATH_TYPES[kind]
    lines = [
        f"make = {convert}",
        "p, made = make(SECRET_FILE), lambda name: make(OUTSIDE + '/' + name)",
        "d, link = make(OUTSIDE), make(OUTSIDE + '/link')",
        "results = []",
    ]
    for name, call in PATH_CALLS.items():
        lines += [
            "try:",
            f"    {call}",
            f"    results.append('GOT {name}')",
            "except Exception as exc:",
            f"    results.append('REFUSED ' + type(exc).__name__ + ' {name}')",
        ]
    lines.append("print('\\n'.join(results))")
    code = lab.probe("\n".join(lines), imports="os, sys")
    control = lab.control(code)
    assert control.stdout.count("GOT ") == len(PATH_CALLS), control.stdout + control.stderr
    refusals = ("RuleFileNotFoundError", "RulePermissionError")
    result = lab.refused(code, refusals, watch=lambda: lab.state()["outside"])
    output = result.stdout + result.stderr
    assert "GOT " not in result.stdout, output
    for name in PATH_CALLS:
        assert any(f"REFUSED {r} {name}\n" in result.stdout for r in refusals), (name, output)


#: How each type AF_UNIX accepts is made from a str path (a path object is not one:
#: CPython raises TypeError before any system call).
ADDRESS_TYPES = {
    "str": "lambda s: s",
    "bytes": "os.fsencode",
    "bytearray": "lambda s: bytearray(os.fsencode(s))",
    "memoryview": "lambda s: memoryview(os.fsencode(s))",
    "array": "lambda s: __import__('array').array('b', os.fsencode(s))",
}


@pytest.mark.parametrize("kind", list(ADDRESS_TYPES))
def test_cant_reach_a_unix_socket_outside_through_any_call_with_any_address_type(
    lab: Lab, kind: str
) -> None:
    servers: list[socket.socket] = []

    def listen() -> None:
        stream = socket.socket(socket.AF_UNIX)
        stream.bind(str(lab.outside / "stream"))
        stream.listen(8)
        dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        dgram.bind(str(lab.outside / "dgram"))
        dgram.setblocking(False)
        servers.extend((stream, dgram))

    lab.setup(listen)
    calls = {
        "bind": "socket.socket(socket.AF_UNIX).bind(make(OUTSIDE + '/made'))",
        "connect": "socket.socket(socket.AF_UNIX).connect(make(OUTSIDE + '/stream'))",
        "connect_ex": (
            "assert socket.socket(socket.AF_UNIX).connect_ex(make(OUTSIDE + '/stream')) == 0"
        ),
        "sendto": "dgram().sendto(b'x', make(OUTSIDE + '/dgram'))",
        "sendmsg": "dgram().sendmsg([b'x'], [], 0, make(OUTSIDE + '/dgram'))",
    }
    lines = [
        "import socket",
        f"make = {ADDRESS_TYPES[kind]}",
        "dgram = lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)",
        "results = []",
    ]
    for name, call in calls.items():
        lines += [
            "try:",
            f"    {call}",
            f"    results.append('GOT {name}')",
            "except Exception as exc:",
            f"    results.append('REFUSED ' + type(exc).__name__ + ' {name}')",
        ]
    lines.append("print('\\n'.join(results))")
    code = lab.probe("\n".join(lines), imports="os, sys")
    try:
        control = lab.control(code)
        assert control.stdout.count("GOT ") == len(calls), control.stdout + control.stderr
        refusals = ("RuleFileNotFoundError", "RuleSocketConnectionRefusedError")
        result = lab.refused(code, refusals, watch=lambda: tree(lab.outside))
        output = result.stdout + result.stderr
        assert "GOT " not in result.stdout, output
        for name in calls:
            assert any(f"REFUSED {r} {name}\n" in result.stdout for r in refusals), (name, output)
    finally:
        for server in servers:
            server.close()
