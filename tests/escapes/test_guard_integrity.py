"""Attack class 8: what reading the guard code suggests.

Odd path objects and arguments, AF_UNIX socket paths, FIFOs, temporary files, the
launcher's ``/proc`` entries, implicit grants, and the program turning the guards off or
slipping past them (patching, closures, ``__code__`` swaps, code that runs while the audit
hook is busy or inside a guard).
"""

from __future__ import annotations

import os
import socket

import pytest
from escapelab import Lab, got, tree

# -- odd path objects ------------------------------------------------------------------

LYING_STR = """
class Lying(str):
    def __fspath__(self):
        return DATA + '/config.txt'
    def __str__(self):
        return DATA + '/config.txt'
    def __add__(self, other):
        return DATA + '/config.txt' + other
    def startswith(self, *args):
        return True
    def encode(self, *args, **kwargs):
        return (DATA + '/config.txt').encode()
"""

LYING_BYTES = """
class Lying(bytes):
    def decode(self, *args, **kwargs):
        return DATA + '/config.txt'
    def __add__(self, other):
        return (DATA + '/config.txt').encode() + other
"""

FLIPPING = """
class Flipping:
    calls = 0
    def __fspath__(self):
        Flipping.calls += 1
        return DATA + '/config.txt' if Flipping.calls % 2 else SECRET_FILE
"""

ODD_PATHS = {
    "str_subclass_open": LYING_STR + "print('GOT', open(Lying(SECRET_FILE)).read())",
    "str_subclass_os_open": LYING_STR
    + "print('GOT', os.read(os.open(Lying(SECRET_FILE), os.O_RDONLY), 200))",
    "bytes_subclass_open": LYING_BYTES
    + "print('GOT', open(Lying(os.fsencode(SECRET_FILE))).read())",
    "flipping_pathlike_open": FLIPPING
    + "print('GOT', [open(Flipping()).read() for _ in range(2)])",
    "flipping_pathlike_os_open": FLIPPING
    + "print('GOT', [os.read(os.open(Flipping(), os.O_RDONLY), 200) for _ in range(2)])",
    "flipping_pathlike_fileio": FLIPPING
    + "import io\nprint('GOT', [io.FileIO(Flipping()).read() for _ in range(2)])",
    "flipping_pathlike_stat": FLIPPING
    + "print('GOT', [os.stat(Flipping()).st_ino for _ in range(2)])",
    "flipping_pathlike_listdir": FLIPPING.replace("SECRET_FILE", "OUTSIDE").replace(
        "'/config.txt'", "''"
    )
    + "print('GOT', [os.listdir(Flipping()) for _ in range(2)])",
}


@pytest.mark.parametrize("attack", list(ODD_PATHS))
def test_cant_read_secret_with_odd_path_objects(lab: Lab, attack: str) -> None:
    code = lab.probe(ODD_PATHS[attack])

    def marker() -> str:  # what shows the probe reached the secret, in the current tree
        if attack.endswith("listdir"):
            return "secret.txt"
        return str(os.stat(lab.secret_file).st_ino) if attack.endswith("stat") else lab.secret

    control = lab.control(code)
    assert marker() in control.stdout, control.stdout + control.stderr
    result = lab.run_sandboxed(code)
    output = result.stdout + result.stderr
    assert marker() not in result.stdout, output
    assert lab.secret not in output
    assert "REFUSED RuleFileNotFoundError" in result.stdout, output


# -- arguments that answer the guard differently than they answer C --------------------

# A ``str`` subclass given with ``dir_fd`` skipped the wrapper's folding of ``dir_fd`` into
# the path, so the guard judged the name against the working directory while the kernel
# resolved it in the descriptor's directory; an ``int`` subclass as ``dir_fd`` was dropped
# by the guard and used by the kernel. C reads the raw value of both: so does the guard now.

PREAMBLE = """
        class Lying(str):
            pass
        class Number(int):
            pass
        os.chdir(PROJECT)
        folder = os.open(OUT, os.O_RDONLY | os.O_DIRECTORY)
"""


REFUSALS = ("RuleFileNotFoundError", "RulePermissionError")

PROBES = {
    "read_through_str_subclass_with_dir_fd": (
        """
        os.symlink(SECRET_FILE, OUT + '/x')
        fd = os.open(Lying('x'), os.O_RDONLY, dir_fd=folder)
        print('GOT', os.read(fd, 100))
        """,
        None,
    ),
    "truncate_outside_through_str_subclass_with_dir_fd": (
        """
        os.symlink(SECRET_FILE, OUT + '/out')
        os.open(Lying('out'), os.O_WRONLY | os.O_TRUNC, dir_fd=folder)
        print('GOT', 'truncated', os.path.getsize(SECRET_FILE))
        """,
        "GOT truncated 0",
    ),
    "stat_outside_through_int_subclass_dir_fd": (
        """
        os.symlink(SECRET_FILE, OUT + '/x')
        print('GOT', 'size', os.stat('x', dir_fd=Number(folder)).st_size)
        """,
        "GOT size",
    ),
}


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_cant_get_outside_with_lying_arguments(lab: Lab, probe: str) -> None:
    lab.rules("expose-ro=.", "expose-rw=./out")
    body, evidence = PROBES[probe]
    code = lab.probe(PREAMBLE + body)
    assert got(lab.control(code), evidence or lab.secret)
    # The outside tree is what must not change: the probe's own link sits in out/.
    lab.refused(code, REFUSALS, watch=lambda: tree(lab.outside))


# -- AF_UNIX sockets, FIFOs, temporary files ------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "OUTSIDE + '/sock'",
        "os.fsencode(OUTSIDE + '/sock')",
        "bytearray(os.fsencode(OUTSIDE + '/sock'))",
    ],
    ids=["str", "bytes", "bytearray"],
)
def test_cant_bind_unix_socket_outside(lab: Lab, address: str) -> None:
    code = lab.probe(
        f"""
        import socket
        socket.socket(socket.AF_UNIX).bind({address})
        print('DONE')
        """
    )
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RuleFileNotFoundError")


# Every buffer AF_UNIX accepts; mmap is a buffer the guard cannot read without running
# code of its type (refused as unknowable); the relative names go through ../outside.
UNIX_ADDRESSES = {
    "str": "OUTSIDE + '/listener'",
    "bytearray": "bytearray(os.fsencode(OUTSIDE + '/listener'))",
    "memoryview": "memoryview(b'../outside/listener')",
    "array": "__import__('array').array('b', b'../outside/listener')",
    "nul_tail": "b'../outside/listener\\0' + os.fsencode(DATA)",
    "mmap": (
        "(lambda m: (m.write(b'../outside/listener'), m)[1])(__import__('mmap').mmap(-1, 64))"
    ),
}


@pytest.mark.parametrize("address", list(UNIX_ADDRESSES.values()), ids=list(UNIX_ADDRESSES))
def test_cant_connect_to_unix_socket_outside(lab: Lab, address: str) -> None:
    # A service listening outside the exposed tree (a docker.sock, an agent...).
    listeners: list[socket.socket] = []

    def listen() -> None:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(lab.outside / "listener"))
        server.listen(8)
        listeners.append(server)

    lab.setup(listen)
    code = lab.probe(
        f"""
        import socket
        client = socket.socket(socket.AF_UNIX)
        client.connect({address})
        print('DONE connected')
        """
    )
    try:
        assert got(lab.control(code), "DONE connected")
        lab.refused(code, "RuleFileNotFoundError")
    finally:
        for server in listeners:
            server.close()


@pytest.mark.parametrize("kind", ["memoryview", "array"])
def test_cant_connect_to_an_abstract_unix_socket_given_as_a_buffer(lab: Lab, kind: str) -> None:
    # Only str and bytes were read: any other buffer was "not a name" to the Python layer
    # (the kernel's abstract-socket scope, where it exists, refused it without a word).
    name = f"pysandboxes-test-{os.getpid()}-{kind}".encode()
    server = socket.socket(socket.AF_UNIX)
    server.bind(b"\0" + name)
    server.listen(8)
    address = {
        "memoryview": f"memoryview(b'\\0' + {name!r})",
        "array": f"__import__('array').array('b', b'\\0' + {name!r})",
    }[kind]
    code = lab.probe(
        f"""
        import socket
        socket.socket(socket.AF_UNIX).connect({address})
        print('DONE connected')
        """
    )
    try:
        assert got(lab.control(code), "DONE connected")
        lab.refused(code, "RuleSocketConnectionRefusedError")
    finally:
        server.close()


def test_cant_send_a_datagram_to_unix_socket_outside_with_sendmsg(lab: Lab) -> None:
    # sendto(data, path) was judged, sendmsg([data], [], 0, path) was not (no handler).
    servers: list[socket.socket] = []

    def listen() -> None:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        server.bind(str(lab.outside / "dgram"))
        server.setblocking(False)
        servers.append(server)

    lab.setup(listen)
    code = lab.probe(
        """
        import socket
        client = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        client.sendmsg([b'ping'], [], 0, '../outside/dgram')
        print('DONE sent')
        """
    )
    try:
        assert got(lab.control(code), "DONE sent")
        assert servers[-1].recv(16) == b"ping"
        lab.refused(code, "RuleFileNotFoundError")
        with pytest.raises(BlockingIOError):
            servers[-1].recv(16)
    finally:
        for server in servers:
            server.close()


def test_cant_create_fifo_outside(lab: Lab) -> None:
    code = lab.probe("os.mkfifo(OUTSIDE + '/fifo')\nprint('DONE')")
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RuleFileNotFoundError")


@pytest.mark.parametrize(
    "call",
    [
        "tempfile.mkstemp(dir=OUTSIDE)",
        "tempfile.NamedTemporaryFile(dir=OUTSIDE, delete=False)",
        "tempfile.mkdtemp(dir=OUTSIDE)",
    ],
    ids=["mkstemp", "named", "mkdtemp"],
)
def test_cant_write_temp_file_outside_private_dir(lab: Lab, call: str) -> None:
    code = lab.probe(f"{call}\nprint('DONE')", imports="os, tempfile")
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RuleFileNotFoundError")


def test_default_temp_dir_is_private(lab: Lab) -> None:
    code = lab.probe(
        """
        tempfile.tempdir = None  # forget the private directory: recompute from scratch
        print('TEMP', tempfile.gettempdir())
        """,
        imports="os, tempfile",
    )
    result = lab.run_sandboxed(code)
    output = result.stdout + result.stderr
    assert "TEMP /tmp\n" not in result.stdout, output
    assert "TEMP /var/tmp\n" not in result.stdout, output


# -- the launcher under /proc/<ppid> ---------------------------------------------------

LAUNCHER_FILES = {
    "environ": "open(f'/proc/{ppid}/environ', 'rb').read()",
    "root": "open(f'/proc/{ppid}/root' + SECRET_FILE).read()",
    "cwd": "open(f'/proc/{ppid}/cwd/../outside/secret.txt').read()",
    "fd_dir": "os.listdir(f'/proc/{ppid}/fd')",
    "maps": "open(f'/proc/{ppid}/maps').read()[:20]",
    "mem": (
        "int(open(f'/proc/{ppid}/maps').read().split('-')[0], 16) and "
        "open(f'/proc/{ppid}/mem', 'rb', 0)"
    ),
}

# The control runs the probe as the child of a plain python that holds the secret in its
# environment and works in the project, as python-sb's launcher does.
AS_CHILD = "import subprocess, sys\nsubprocess.run([sys.executable, '-c', {code!r}])\n"


@pytest.mark.parametrize("name", list(LAUNCHER_FILES))
def test_cant_read_launcher_files_under_proc_ppid(lab: Lab, name: str) -> None:
    lab.env = {"API_TOKEN": lab.secret}
    code = lab.probe(f"ppid = os.getppid()\nprint('DONE', {LAUNCHER_FILES[name]})")
    control = lab.control(AS_CHILD.format(code=code))
    assert got(control, "DONE"), control.stdout + control.stderr
    if name in ("environ", "root", "cwd"):
        assert lab.secret in control.stdout
    lab.refused(code, "RuleFileNotFoundError")


# -- implicit grants -------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["script", "module"])
def test_cant_read_unexposed_file_beside_own_script(lab: Lab, mode: str) -> None:
    # The rules expose data/ only. The script lives in the project: its directory (the
    # cwd for -m) is sys.path[0], but it is not "the interpreter's own files".
    def private() -> None:
        (lab.project / "private").mkdir(exist_ok=True)
        (lab.project / "private" / "secret.txt").write_text(lab.secret + "\n")

    lab.rules("expose-ro=./data", "expose-ro=./app.py")  # -m must find app.py
    lab.setup(private)
    code = lab.probe("print('GOT', open('private/secret.txt').read())")
    assert lab.secret in lab.control(code, mode=mode).stdout
    lab.refused(code, "RuleFileNotFoundError", mode=mode)


def test_cant_list_project_beside_own_script(lab: Lab) -> None:
    # The project directory leads to the exposures: its listing may show them, nothing else.
    def note() -> None:
        (lab.project / "notes-for-nobody.txt").write_text("x")

    lab.setup(note)
    code = lab.probe("print('GOT', os.listdir('.'))")
    assert "notes-for-nobody.txt" in lab.control(code, mode="script").stdout
    result = lab.run_sandboxed(code, mode="script")
    output = result.stdout + result.stderr
    # Under Landlock the kernel refuses the listing outright: listing a directory would
    # grant listing its whole tree (docs/security.md, "The kernel layer").
    refusals = ("REFUSED RuleFileNotFoundError", "REFUSED PermissionError")
    assert "GOT" in result.stdout or result.stdout.startswith(refusals), output
    assert "notes-for-nobody.txt" not in output, output
    assert "app.py" not in result.stdout, output


# -- switching the guards off ----------------------------------------------------------

# Each probe falls back to a plain read where there is no guard to switch off (plain
# python), so the control shows it reads the secret.
FIND_GUARD = """
        cells = [c.cell_contents for c in (getattr(os.listdir, '__closure__', None) or ())]
        guard = next((c for c in cells if type(c).__name__ == 'FileGuard'), None)
"""

GUARD_OFF = {
    "patch_enforcer": """
        import pysandboxes._inside.enforce as enforce
        enforce.Enforcing.refuse_file = lambda self, report, verdict: None
        print('GOT', open(SECRET_FILE).read())
    """,
    "closure_widens_rules": FIND_GUARD
    + """
        from pysandboxes._policy import model
        if guard is not None:
            everything = model.ExposeRule('/', True, True, model.Origin('x', 0, 'x'))
            guard.judge._exposures['/'] = everything
        print('GOT', open(SECRET_FILE).read())
    """,
    "closure_swaps_enforcer": FIND_GUARD
    + """
        class Lenient:
            def refuse_file(self, report, verdict):
                pass
            def refuse_call(self, *args):
                pass
        if guard is not None:
            guard.enforcer = Lenient()
        print('GOT', open(SECRET_FILE).read())
    """,
    "code_swap_on_guard_method": FIND_GUARD
    + """
        if guard is not None:
            type(guard).check.__code__ = (lambda self, *args, **kwargs: None).__code__
        print('GOT', open(SECRET_FILE).read())
    """,
    "code_swap_on_wrapper": """
        def make():
            api = follow_default = guard = name = original = None
            def wrapper(path, *args, **kwargs):
                (api, follow_default, guard, name)
                return original(path, *args, **kwargs)
            return wrapper
        if hasattr(os.stat, '__code__'):
            os.stat.__code__ = make().__code__
        print('GOT', os.path.exists(SECRET_FILE), os.stat(SECRET_FILE).st_ino)
    """,
    "reload_io": """
        import importlib, io
        importlib.reload(io)
        print('GOT', io.open(SECRET_FILE).read())
    """,
    "delete_from_sys_modules": """
        for name in ('io', '_io', 'os', 'posix', 'builtins'):
            sys.modules.pop(name, None)
        import _io
        print('GOT', _io.FileIO(SECRET_FILE).read())
    """,
    "gc_callback_while_hook_busy": """
        import gc
        loot = []
        def grab(phase, info):
            if not loot:
                try:
                    loot.append(os.read(os.open(SECRET_FILE, os.O_RDONLY), 200))
                except OSError:
                    pass
        gc.callbacks.append(grab)
        gc.set_threshold(1, 1, 1)
        keep = []
        for _ in range(200):
            if loot:
                break
            keep.append([[], []])  # enough allocations for a collection, busy hook or not
            os.listdir(DATA)
        gc.callbacks.remove(grab)
        gc.set_threshold(700, 10, 10)
        if loot:
            print('GOT', loot)
        else:
            open(SECRET_FILE)
    """,
}


@pytest.mark.parametrize("attack", list(GUARD_OFF))
def test_cant_switch_file_guard_off(lab: Lab, attack: str) -> None:
    code = lab.probe(GUARD_OFF[attack])
    control = lab.control(code)
    inode = str(os.stat(lab.secret_file).st_ino)
    assert lab.secret in control.stdout or inode in control.stdout, control.stderr
    result = lab.run_sandboxed(code)
    output = result.stdout + result.stderr
    inode = str(os.stat(lab.secret_file).st_ino)  # the tree was rebuilt for this run
    assert lab.secret not in output, f"the guard was switched off:\n{output}"
    assert inode not in result.stdout, f"the guard was switched off:\n{output}"
    assert "REFUSED" in result.stdout or result.returncode != 0, output


def test_cant_read_secret_from_signal_handler_while_hook_busy(lab: Lab) -> None:
    # A Python signal handler runs between bytecodes, including the audit hook's, while
    # the hook's "busy" mark tells it not to judge the handler's own accesses.
    code = lab.probe(
        """
        import signal, time
        loot = []
        def grab(signum, frame):
            if not loot:
                try:
                    loot.append(os.read(os.open(SECRET_FILE, os.O_RDONLY), 200))
                except OSError:
                    pass
        signal.signal(signal.SIGALRM, grab)
        signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)
        end = time.monotonic() + 1.0
        while not loot and time.monotonic() < end:
            os.listdir(DATA)
        signal.setitimer(signal.ITIMER_REAL, 0)
        print('TRIED')
        if loot:
            print('GOT', loot)
        else:
            open(SECRET_FILE)
        """
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


# -- a finalizer run inside the file guard ---------------------------------------------

# A finalizer of the program run by a collection inside the file guard walks ``f_back``
# (not audited) into the guard's frame and widens the rules. ``docs/security.md`` lists
# "``f_back`` and ``f_locals`` of frames" as open until the kernel layer: this is a
# working, deterministic exploit through that route (no signal, no race), kept as a strict
# ``xfail`` so the day it is closed the test says so.

FINALIZER_TAKEOVER = """
import gc
found = []
class Trap:
    def __del__(self):
        if found:
            return
        frame = sys._getframe(0)  # the program's own frame: allowed
        while frame is not None:
            owner = frame.f_locals.get('self')
            if type(owner).__name__ == 'FileGuard':
                found.append(owner)
                return
            frame = frame.f_back  # not audited: reaches the guard's frames
        arm()
def arm():
    trap = Trap()
    trap.me = trap  # a cycle: freed by the collector, wherever it runs
arm()
gc.set_threshold(1, 1, 1)
for _ in range(200):
    if found:
        break
    os.path.exists(DATA + '/config.txt')
    os.listdir(DATA)
gc.set_threshold(700, 10, 10)
if found:
    guard = found[0]
    rule = next(iter(guard.judge._exposures.values()))
    guard.judge._exposures['/'] = type(rule)('/', True, True, rule.origin)
    guard._settled.clear()
print('GOT', open(SECRET_FILE).read())
"""


@pytest.mark.xfail(
    strict=True,
    reason="documented open route: f_back/f_locals of a frame whose caller is a guard",
)
def test_cant_widen_rules_from_finalizer_run_inside_file_guard(lab: Lab) -> None:
    code = lab.probe(FINALIZER_TAKEOVER)
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")
