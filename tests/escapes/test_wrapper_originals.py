"""Originals kept by the wrappers, and ``dir_fd`` calls judged on another name.

The wrapper of ``os.open`` held the C ``open`` in its closure. A program took it from
``os.open.__closure__`` and called it with ``dir_fd``: CPython's ``open`` audit event
carries no ``dir_fd``, so the guard judged the name against the working directory while
the kernel resolved it from the descriptor. With ``ignore=conf/*.key`` it read
``conf/api.key``; with ``expose-rw=.`` a name the guard took for the private temporary
directory led, through a symlink, to ``.py-sandboxes``, and the program wrote its own
rules. The other wrappers kept their originals the same way (``stat`` and ``listdir``
answer with no audit event, ``mkfifo`` creates files with none), and the stat wrappers
their cache of judged paths, which the program could fill.

Now every wrapper is sealed: the original is a hidden default, never in a closure, a
global, a frame's locals, ``__wrapped__`` or ``__self__``; what the program can reach
from a wrapper holds only judged functions. A ``dir_fd`` is folded into the name the
kernel will resolve (``/proc/self/fd/N/name``), ``os.open`` gets absolute names only,
and the hook refuses a relative name in ``os.open``'s event, which no wrapper sends.
``dir_fd`` and ``follow_symlinks`` are read once, so an ``__index__`` or ``__bool__``
cannot answer the guard and the kernel apart.

The rules say ``os-sandbox=subprocess``: the Python layer alone is under test.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from escapelab import Lab, got

#: Every object a program reaches from the file functions and the import doors:
#: closures, defaults, ``__wrapped__``, ``__self__``, globals, attributes, a few levels
#: deep. ``originals(name)`` lists the C functions called ``name`` found there, other
#: than the function the module itself shows.
REACH = """
import builtins, io, posix, types
def _links(value):
    found = []
    closure = getattr(value, '__closure__', None)
    for cell in closure if isinstance(closure, tuple) else ():
        try:
            found.append(cell.cell_contents)
        except ValueError:
            pass
    for name in ('__defaults__', '__kwdefaults__', '__wrapped__', '__self__', '__func__'):
        try:
            inner = getattr(value, name, None)
        except Exception:
            continue
        if isinstance(inner, dict):
            found += list(inner.values())
        elif isinstance(inner, tuple):
            found += list(inner)
        elif inner is not None:
            found.append(inner)
    holder = getattr(value, '__globals__', None)
    if isinstance(holder, dict):
        found += list(holder.values())
    try:
        found += list(vars(value).values())
    except TypeError:
        pass
    return found
def originals(name):
    start = [getattr(posix, n) for n in dir(posix) if callable(getattr(posix, n))]
    start += [builtins.open, builtins.__import__, io.open, io.FileIO]
    seen, found, layer = set(), [], start
    for _ in range(4):
        following = []
        for value in layer:
            if id(value) in seen or isinstance(value, types.ModuleType):
                continue
            seen.add(id(value))
            if (
                isinstance(value, types.BuiltinFunctionType)
                and value.__name__ == name
                and value is not getattr(posix, name, None)
                and value is not getattr(builtins, name, None)
            ):
                found.append(value)
            following += _links(value)
        layer = following
    return found
"""


def reach(body: str) -> str:
    return REACH + "\n" + textwrap.dedent(body)


# -- dir_fd through a kept original ----------------------------------------------------


def test_cant_read_an_ignored_file_through_an_original_open_with_dir_fd(lab: Lab) -> None:
    def plant() -> None:
        (lab.project / "conf").mkdir(exist_ok=True)
        (lab.project / "conf" / "api.key").write_text(lab.secret + "\n")

    lab.setup(plant)
    lab.rules("expose-ro=.", "ignore=conf/*.key", "os-sandbox=subprocess")
    code = lab.probe(
        reach(
            """
            found = originals('open')
            raw_open = found[0] if found else os.open
            conf = raw_open(PROJECT + '/conf', os.O_RDONLY | os.O_DIRECTORY)
            fd = raw_open('api.key', os.O_RDONLY, dir_fd=conf)
            print('GOT', os.read(fd, 200))
            """
        )
    )
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


# The guard is told "told/<name>", which leads to the private temporary directory (a
# directory the rules let it write, in one it may not); the kernel resolves the same name
# from another descriptor, where the program made it a link to the rule file.
PLANT_RULES = """
import tempfile
found = originals('open')
raw_open = found[0] if found else os.open
parent, name = os.path.split(tempfile.gettempdir())
os.symlink(parent, PROJECT + '/told')
os.makedirs(PROJECT + '/d/told')
os.symlink(PROJECT + '/.py-sandboxes', PROJECT + '/d/told/' + name)
d = os.open(PROJECT + '/d', os.O_RDONLY | os.O_DIRECTORY)
os.chdir(PROJECT)
fd = raw_open('told/' + name, os.O_WRONLY | os.O_APPEND, dir_fd=d)
os.write(fd, b'expose-ro=..\\n')
print('DONE')
"""


def test_cant_write_the_rule_file_through_a_symlink_and_dir_fd(lab: Lab) -> None:
    lab.rules("expose-rw=.", "os-sandbox=subprocess")
    code = lab.probe(reach(PLANT_RULES))
    assert got(lab.control(code), "DONE")
    assert "expose-ro=.." in (lab.project / ".py-sandboxes").read_text()
    rules = lambda: (lab.project / ".py-sandboxes").read_text()  # noqa: E731
    lab.refused(code, "RulePermissionError", watch=rules)


# -- the other originals -----------------------------------------------------------------

ORIGINALS = {
    # stat answers with no audit event: the metadata of a hidden file.
    "stat": ("print('GOT', call(SECRET_FILE).st_ino)", "RuleFileNotFoundError"),
    # mkfifo creates a file with no audit event.
    "mkfifo": ("call(OUTSIDE + '/fifo')\nprint('DONE')", "RuleFileNotFoundError"),
}


@pytest.mark.parametrize("name", list(ORIGINALS))
def test_cant_call_an_original_a_wrapper_kept(lab: Lab, name: str) -> None:
    body, refusal = ORIGINALS[name]
    lab.rules("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess")
    code = lab.probe(
        reach(f"found = originals({name!r})\ncall = found[0] if found else os.{name}\n{body}")
    )
    control = lab.control(code)
    if name == "stat":
        assert str(os.stat(lab.secret_file).st_ino) in control.stdout
    else:
        assert got(control, "DONE")
    result = lab.refused(code, refusal, watch=lambda: lab.state()["outside"])
    assert "GOT" not in result.stdout


# CPython runs pending signal handlers where a function starts, handing them the frame
# they interrupted: a sealed wrapper's frame then still held its original in its locals.
SIGNAL_WINDOW = """
import signal, time
found = []
def handler(signum, frame):
    while frame is not None and not found:
        value = frame.f_locals.get('_original')
        if callable(value):
            found.append(value)
        frame = frame.f_back
signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, 0.0001, 0.0001)
deadline = time.monotonic() + 3
while not found and time.monotonic() < deadline:
    os.stat('.')
signal.setitimer(signal.ITIMER_REAL, 0)
stat = found[0] if found else os.stat
print('GOT', stat(SECRET_FILE).st_ino)
"""


def test_cant_take_an_original_from_a_frame_a_signal_interrupts(lab: Lab) -> None:
    lab.rules("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess")
    code = lab.probe(SIGNAL_WINDOW)
    control = lab.control(code)
    assert str(os.stat(lab.secret_file).st_ino) in control.stdout, control.stderr
    lab.refused(code, "RuleFileNotFoundError")


def test_cant_list_an_ignored_name_through_an_original(lab: Lab) -> None:
    # listdir's names are filtered by the wrapper: CPython's own listdir shows them all.
    lab.setup(lambda: (lab.data / "hidden.key").write_text(lab.secret))
    lab.rules("expose-ro=./data", "ignore=data/*.key", "os-sandbox=subprocess")
    code = lab.probe(
        reach("found = originals('listdir')\ncall = found[0] if found else os.listdir\n")
        + "print('GOT', call(DATA))\n"
    )
    assert "hidden.key" in lab.control(code).stdout
    result = lab.run_sandboxed(code)
    assert "GOT" in result.stdout, result.stdout + result.stderr
    assert "hidden.key" not in result.stdout


def test_no_wrapper_leads_to_an_original(lab: Lab) -> None:
    # The class, not the instances: nothing reached from the wrappers is a C function of
    # the same name as one they replace.
    lab.rules("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess")
    names = ("open", "stat", "lstat", "listdir", "scandir", "mkfifo", "rename", "__import__")
    code = reach(f"print('FOUND', [n for n in {names!r} if originals(n)])")
    result = lab.run_sandboxed(code)
    assert "FOUND []" in result.stdout, result.stdout + result.stderr


def test_cant_fill_the_stat_wrappers_cache(lab: Lab) -> None:
    # The stat wrappers skip the hook for paths judged before; the set was in a closure.
    lab.rules("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess")
    code = lab.probe(
        """
        closure = getattr(os.stat, '__closure__', None) or ()
        for cache in [c.cell_contents for c in closure if isinstance(c.cell_contents, set)]:
            cache.add((SECRET_FILE, True))
        print('GOT', os.stat(SECRET_FILE).st_ino)
        """
    )
    control = lab.control(code)
    assert str(os.stat(lab.secret_file).st_ino) in control.stdout  # the tree of this run
    lab.refused(code, "RuleFileNotFoundError", watch=lambda: lab.state()["outside"])


# A traceback through a wrapper showed its _before in the frame's locals, and the closure
# of _before held the test of the paths judged before: made always true, every stat
# skipped the hook.
TRACEBACK_STATE = """
try:
    os.stat(OUT + '/missing/x')
except OSError as exc:
    tb = exc.__traceback__
while tb is not None:
    for value in list(tb.tb_frame.f_locals.values()):
        for cell in getattr(value, '__closure__', None) or ():
            if callable(cell.cell_contents):
                cell.cell_contents = lambda *args, **kwargs: True
    tb = tb.tb_next
print('GOT', os.stat(SECRET_FILE).st_ino)
"""


def test_cant_change_a_wrappers_state_from_a_tracebacks_frames(lab: Lab) -> None:
    lab.rules("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess")
    code = lab.probe(TRACEBACK_STATE)
    control = lab.control(code)
    assert str(os.stat(lab.secret_file).st_ino) in control.stdout  # the tree of this run
    lab.refused(code, "RuleFileNotFoundError")


# -- arguments read twice ----------------------------------------------------------------

# The guard judged "l2/secret.txt" against the working directory (the object is no int);
# C asked the object's __index__ and resolved the name from out/sub, where l2 leads out.
INDEX_DIR_FD = """
os.makedirs(OUT + '/l2')
open(OUT + '/l2/secret.txt', 'w').close()
os.mkdir(OUT + '/sub')
os.symlink(OUTSIDE, OUT + '/sub/l2')
sub = os.open(OUT + '/sub', os.O_RDONLY | os.O_DIRECTORY)
class Descriptor:
    def __index__(self):
        return sub
os.chdir(OUT)
print('GOT', os.stat('l2/secret.txt', dir_fd=Descriptor()).st_ino)
"""


def test_cant_hand_stat_a_dir_fd_that_answers_only_to_c(lab: Lab) -> None:
    lab.rules("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess")
    code = lab.probe(INDEX_DIR_FD)
    control = lab.control(code)
    assert str(os.stat(lab.secret_file).st_ino) in control.stdout  # the tree of this run
    lab.refused(code, "RuleFileNotFoundError", watch=lambda: lab.state()["outside"])


# The guard read follow_symlinks once (False: the link itself, which is the program's);
# C read it again (True) and followed the link out.
FLIPPING_FOLLOW = """
os.symlink(SECRET_FILE, OUT + '/link')
class Flag:
    asked = 0
    def __bool__(self):
        Flag.asked += 1
        return Flag.asked != 1
flag = Flag()
info = os.stat(OUT + '/link', follow_symlinks=flag)
print('ASKED', Flag.asked, 'INODE', info.st_ino)
"""


def test_cant_flip_follow_symlinks_between_guard_and_kernel(lab: Lab) -> None:
    lab.rules("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess")
    code = lab.probe(FLIPPING_FOLLOW.replace("!= 1", "== 1"))
    # Plain python asks the flag once: with True, it follows the link to the secret.
    control = lab.control(code)
    assert f"INODE {os.stat(lab.secret_file).st_ino}" in control.stdout, control.stderr
    code = lab.probe(FLIPPING_FOLLOW)
    result = lab.run_sandboxed(code)
    assert "ASKED 1 INODE" in result.stdout, result.stdout + result.stderr  # read once
    assert f"INODE {os.stat(lab.secret_file).st_ino}" not in result.stdout


# -- dir_fd on every route -----------------------------------------------------------------

# out/sub/l leads out of the rules; each call names "l/..." from a descriptor of out/sub.
DIR_FD_ROUTES = {
    "open": "os.read(os.open('l/secret.txt', os.O_RDONLY, dir_fd=d), 99)",
    "stat": "os.stat('l/secret.txt', dir_fd=d).st_ino",
    "access": "os.access('l/secret.txt', os.R_OK, dir_fd=d) or 1/0",
    "readlink": "os.readlink('l/sub', dir_fd=d)",
    "chmod": "os.chmod('l/secret.txt', 0o600, dir_fd=d)",
    "utime": "os.utime('l/secret.txt', (1, 1), dir_fd=d)",
    "chown": "os.chown('l/secret.txt', os.getuid(), -1, dir_fd=d)",
    "rename": "os.rename('l/secret.txt', 'mine.txt', src_dir_fd=d, dst_dir_fd=d)",
    "link": "os.link('l/secret.txt', 'mine.txt', src_dir_fd=d, dst_dir_fd=d)",
    "symlink": "os.symlink('/etc/hostname', 'l/planted', dir_fd=d)",
    "mkdir": "os.mkdir('l/planted', dir_fd=d)",
    "unlink": "os.unlink('l/secret.txt', dir_fd=d)",
    "mkfifo": "os.mkfifo('l/planted', dir_fd=d)",
}


@pytest.mark.parametrize("route", list(DIR_FD_ROUTES))
def test_cant_reach_outside_through_dir_fd(lab: Lab, route: str) -> None:
    def plant() -> None:
        (lab.outside / "sub").mkdir(exist_ok=True)
        if not os.path.lexists(lab.outside / "sub" / "link"):
            os.symlink("/etc/hostname", lab.outside / "sub" / "link")

    lab.setup(plant)
    lab.rules("expose-ro=./data", "expose-rw=./out", "os-sandbox=subprocess")
    code = lab.probe(
        f"""
        os.mkdir(OUT + '/sub')
        os.symlink(OUTSIDE, OUT + '/sub/l')
        d = os.open(OUT + '/sub', os.O_RDONLY | os.O_DIRECTORY)
        print('GOT', {DIR_FD_ROUTES[route]})
        print('DONE')
        """.replace("'l/sub'", "'l/sub/link'")
    )
    assert got(lab.control(code), "DONE")
    # The probe's own out/sub and out/sub/l change the project tree: watch the outside.
    lab.refused(
        code,
        ("RuleFileNotFoundError", "RulePermissionError"),
        watch=lambda: lab.state()["outside"],
    )


def test_the_hook_refuses_a_relative_name_in_os_opens_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # os.open's event carries no dir_fd: a relative name there may be resolved from a
    # descriptor the guard cannot see. The wrapper sends absolute names only, so such an
    # event comes from the C function called some other way, and is refused.
    from pysandboxes._inside.enforce import Recording
    from pysandboxes._inside.guards.files import UNSEEN_DIR_FD, FileGuard
    from pysandboxes._inside.guards.paths import Resolver
    from pysandboxes._policy.judge import FileJudge
    from pysandboxes._policy.model import ExposeRule, Origin

    monkeypatch.chdir(tmp_path)  # where the relative names would be judged
    rule = ExposeRule(str(tmp_path), True, True, Origin("test", 1, "expose-rw=."))
    enforcer = Recording()
    guard = FileGuard(FileJudge([rule], []), enforcer, Resolver())
    guard.events["open"]((str(tmp_path / "file"), None, os.O_RDONLY))
    assert enforcer.files == []
    guard.events["open"](("file", None, os.O_RDONLY))
    guard.events["open"]((b"file", None, os.O_WRONLY | os.O_CREAT))
    assert [verdict.fix for _, verdict in enforcer.files] == [UNSEEN_DIR_FD] * 2
    guard.events["open"](("file", "r", os.O_RDONLY))  # open()'s event: no dir_fd exists
    assert len(enforcer.files) == 2
