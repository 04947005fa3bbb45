"""One table of the entry points: CPython's audit events that name files, sockets or
modules, and for each, who judges it or why nothing needs to.

A missed entry point is an escape (issue 30): ``socket.sendmsg`` to a Unix path was
judged nowhere while ``sendto`` was. So every event of these families is listed here
once, and ``tests/escapes/test_entry_points.py`` holds the table to both sides: the
guards' handlers must be exactly the events said to be theirs, and every event CPython
documents or its standard library raises in these families must be handled or listed
as harmless, with the reason. A new CPython that adds an event fails that test until
the event is judged or explained.

Nothing imports this module on the sandbox's start path: it is data for the test and
for ``docs/security.md``.
"""

from __future__ import annotations

#: Event-name prefixes of the families the table covers.
FAMILIES = (
    "open",
    "os.",
    "shutil.",
    "glob.",
    "tempfile.",
    "pathlib.",
    "sqlite3.",
    "socket.",
    "import",
    "exec",
    "marshal.",
    "mmap.",
    "fcntl.",
    "cpython.run_",
    "ftplib.",
    "http.client.",
    "imaplib.",
    "nntplib.",
    "poplib.",
    "smtplib.",
    "telnetlib.",
    "urllib.",
    "ensurepip.",
    "webbrowser.",
    "subprocess.",
    "pty.",
)

#: The file guard's events (``files.FileGuard.events``); ``pysandboxes.*`` are raised by
#: the wrappers of the functions CPython does not audit (the ``stat`` family, readlink,
#: mkfifo, the check of what ``open`` opened, POSIX shared memory).
FILES = frozenset(
    {
        "open",
        "os.chdir",
        "os.chflags",
        "os.chmod",
        "os.chown",
        "os.getxattr",
        "os.lchflags",
        "os.link",
        "os.listdir",
        "os.listxattr",
        "os.mkdir",
        "os.remove",
        "os.removexattr",
        "os.rename",
        "os.rmdir",
        "os.scandir",
        "os.setxattr",
        "os.symlink",
        "os.truncate",
        "os.utime",
        "shutil.copyfile",
        "shutil.rmtree",
        "sqlite3.connect",
        "socket.bind",
        "socket.connect",
        "socket.sendmsg",
        "socket.sendto",
        "pysandboxes.create",
        "pysandboxes.listing",
        "pysandboxes.metadata",
        "pysandboxes.opened",
        "pysandboxes.shm",
    }
)

#: The network guard's events (``network.NetworkGuard.events``, no decision log).
SOCKETS = frozenset(
    {
        "socket.__new__",
        "socket.bind",
        "socket.connect",
        "socket.getaddrinfo",
        "socket.gethostbyaddr",
        "socket.gethostbyname",
        "socket.gethostbyname_ex",
        "socket.getnameinfo",
        "socket.sendmsg",
        "socket.sendto",
    }
)

#: The import guard's events (``imports.ImportGuard.events``).
IMPORTS = frozenset({"pysandboxes.import", "exec", "pysandboxes.extension", "pysandboxes.started"})

#: Events of these families another guard judges: the calls guard (``python-api=``
#: categories, refused unless a rule allows them) or the dynamic-code guard.
ELSEWHERE = {
    "os.exec": "calls",
    "os.fork": "calls",
    "os.forkpty": "calls",
    "os.posix_spawn": "calls",
    "os.spawn": "calls",
    "os.system": "calls",
    "os.kill": "calls",
    "os.killpg": "calls",
    "os.putenv": "calls",
    "subprocess.Popen": "calls",
    "fcntl.fcntl": "calls",
    "fcntl.ioctl": "calls",
    "marshal.load": "dynamic",
    "marshal.loads": "dynamic",
}

_THROUGH_SOCKETS = "it connects through socket.connect, which the guards judge"
_THROUGH_FILES = "it does its work through os and open calls, each judged"
_LISTS = "each directory it reads is listed through os.scandir, judged"
_WINDOWS = "Windows only: never raised on Linux"
_PROCESS = "it starts a process through the fork and exec the calls guard refuses"

#: Events of these families no guard handles, and why that lets nothing through.
HARMLESS = {
    "import": (
        "raised by C for every fresh import: the import guard's finder and wrappers judge "
        "the name first (pysandboxes.import), and a module's code is judged again when it "
        "runs (exec) or is created (pysandboxes.extension)"
    ),
    "marshal.dumps": "it writes bytes in memory; only loading them runs code",
    "mmap.__new__": "it maps a descriptor opened (and judged) already, or anonymous memory",
    "fcntl.flock": "it locks a descriptor opened (and judged) already",
    "fcntl.lockf": "it locks a descriptor opened (and judged) already",
    "os.lockf": "it locks a descriptor opened (and judged) already",
    "os.unsetenv": "it removes a variable from the sandbox's own environment",
    "os.walk": _LISTS,
    "os.fwalk": _LISTS,
    "glob.glob": _LISTS,
    "glob.glob/2": _LISTS,
    "pathlib.Path.glob": _LISTS,
    "pathlib.Path.rglob": _LISTS,
    "pathlib.Path.walk": _LISTS,
    "shutil.chown": _THROUGH_FILES,
    "shutil.copymode": _THROUGH_FILES,
    "shutil.copystat": _THROUGH_FILES,
    "shutil.copytree": _THROUGH_FILES,
    "shutil.make_archive": _THROUGH_FILES,
    "shutil.move": _THROUGH_FILES,
    "shutil.unpack_archive": _THROUGH_FILES,
    "tempfile.mkdtemp": "it makes the name with os.mkdir, judged",
    "tempfile.mkstemp": "it makes the name with os.open, judged",
    "sqlite3.connect/handle": "the connection sqlite3.connect opened, judged there",
    "sqlite3.enable_load_extension": (
        "loading an extension loads native code, which the calls guard refuses "
        "(ctypes.dlopen's category, native) unless a rule allows it"
    ),
    "sqlite3.load_extension": (
        "loading an extension loads native code, which the calls guard refuses "
        "(ctypes.dlopen's category, native) unless a rule allows it"
    ),
    "socket.gethostname": "it reads this host's own name: no traffic, no file",
    "socket.sethostname": "it needs CAP_SYS_ADMIN over the host's names, which no sandbox has",
    "socket.getservbyname": "it reads the services database, a file the C library opens itself",
    "socket.getservbyport": "it reads the services database, a file the C library opens itself",
    "cpython.run_command": "raised as the interpreter starts, before the guards: the runner's",
    "cpython.run_file": "raised as the interpreter starts, before the guards: the runner's",
    "cpython.run_module": "raised as the interpreter starts, before the guards: the runner's",
    "cpython.run_stdin": "raised as the interpreter starts, before the guards: the runner's",
    "cpython.run_startup": "PYTHONSTARTUP: the sandbox's environment is filtered at spawn",
    "cpython.run_interactivehook": "the prompt's hook (site): its imports and files are judged",
    "ftplib.connect": _THROUGH_SOCKETS,
    "ftplib.sendcmd": "it writes to a socket connected (and judged) already",
    "http.client.connect": _THROUGH_SOCKETS,
    "http.client.send": "it writes to a socket connected (and judged) already",
    "imaplib.open": _THROUGH_SOCKETS,
    "imaplib.send": "it writes to a socket connected (and judged) already",
    "nntplib.connect": _THROUGH_SOCKETS,
    "nntplib.putline": "it writes to a socket connected (and judged) already",
    "poplib.connect": _THROUGH_SOCKETS,
    "poplib.putline": "it writes to a socket connected (and judged) already",
    "smtplib.connect": _THROUGH_SOCKETS,
    "smtplib.send": "it writes to a socket connected (and judged) already",
    "telnetlib.Telnet.open": _THROUGH_SOCKETS,
    "telnetlib.Telnet.write": "it writes to a socket connected (and judged) already",
    "urllib.Request": "it opens its connection through socket.connect (or a file with open)",
    "ensurepip.bootstrap": "pip runs in this interpreter: its imports, files, sockets are judged",
    "webbrowser.open": _PROCESS,
    "pty.spawn": _PROCESS,
    "os.add_dll_directory": _WINDOWS,
    "os.listdrives": _WINDOWS,
    "os.listmounts": _WINDOWS,
    "os.listvolumes": _WINDOWS,
    "os.startfile": _WINDOWS,
    "os.startfile/2": _WINDOWS,
}

#: CPython's documented audit events of these families raised in C (3.11-3.13; the
#: standard library's own ``sys.audit`` calls are found by reading its files): from the
#: "Audit events table" of the documentation.
DOCUMENTED_IN_C = frozenset(
    {
        "open",
        "import",
        "exec",
        "marshal.dumps",
        "marshal.load",
        "marshal.loads",
        "mmap.__new__",
        "fcntl.fcntl",
        "fcntl.flock",
        "fcntl.ioctl",
        "fcntl.lockf",
        "cpython.run_command",
        "cpython.run_file",
        "cpython.run_interactivehook",
        "cpython.run_module",
        "cpython.run_startup",
        "cpython.run_stdin",
        "os.add_dll_directory",
        "os.chdir",
        "os.chflags",
        "os.chmod",
        "os.chown",
        "os.exec",
        "os.fork",
        "os.forkpty",
        "os.getxattr",
        "os.kill",
        "os.killpg",
        "os.link",
        "os.listdir",
        "os.listdrives",
        "os.listmounts",
        "os.listvolumes",
        "os.listxattr",
        "os.lockf",
        "os.mkdir",
        "os.posix_spawn",
        "os.putenv",
        "os.remove",
        "os.removexattr",
        "os.rename",
        "os.rmdir",
        "os.scandir",
        "os.setxattr",
        "os.spawn",
        "os.startfile",
        "os.startfile/2",
        "os.symlink",
        "os.system",
        "os.truncate",
        "os.unsetenv",
        "os.utime",
        "socket.__new__",
        "socket.bind",
        "socket.connect",
        "socket.getaddrinfo",
        "socket.gethostbyaddr",
        "socket.gethostbyname",
        "socket.gethostname",
        "socket.getnameinfo",
        "socket.getservbyname",
        "socket.getservbyport",
        "socket.sendmsg",
        "socket.sendto",
        "socket.sethostname",
        "sqlite3.connect",
        "sqlite3.connect/handle",
        "sqlite3.enable_load_extension",
        "sqlite3.load_extension",
    }
)
