"""Attack class 3: the rename race, and renames or swapped links that change what a path names.

The program reads ``out/dir/secret-name`` in a loop while a thread swaps ``out/dir`` with a
symlink to the outside directory. Under plain python the secret comes through; under
python-sb no read of it may ever get through, whatever the timing.

``ignore=`` and a nested ``expose-ro=`` are judged on the path; a directory above them
inside an ``expose-rw=`` may be renamed, after which the same files answer to the wider
rule. ``os.chmod``/``os.utime`` with ``dir_fd`` and ``os.link`` with ``src_dir_fd`` are not
pinned by the wrappers and are accepted by the hook in their ``dir_fd`` form, while the
kernel follows a last-component symlink judged a moment earlier.
"""

from __future__ import annotations

import os

import pytest
from escapelab import Lab, got, shape, tree

DECOY = "decoy-content"

RACE = """\
import io, os, sys, threading, time
API, SECONDS = sys.argv[1], float(sys.argv[2])
OUTSIDE = os.path.abspath('../outside')
stop = False
leaked = []
counts = {'tries': 0, 'reads': 0, 'refusals': 0}

def swap_directory():
    # out/dir: a real directory, then a symlink to the outside directory, and back.
    while not stop:
        os.rename('out/dir', 'out/parked')
        os.symlink(OUTSIDE, 'out/dir')
        os.remove('out/dir')
        os.rename('out/parked', 'out/dir')

def swap_link():
    # out/dir: a symlink to ../data, atomically replaced by one to the outside, and back.
    while not stop:
        os.symlink(OUTSIDE, 'out/next')
        os.replace('out/next', 'out/dir')
        os.symlink('../data', 'out/next')
        os.replace('out/next', 'out/dir')

def read():
    if API == 'open':
        with open('out/dir/secret-name') as handle:
            return handle.read()
    if API == 'fileio':
        with io.FileIO('out/dir/secret-name') as handle:
            return handle.read().decode()
    fd = os.open('out/dir/secret-name', os.O_RDONLY)
    try:
        return os.read(fd, 200).decode()
    finally:
        os.close(fd)

def reader():
    while not stop and not leaked:
        counts['tries'] += 1
        try:
            data = read()
        except OSError:
            counts['refusals'] += 1
            continue
        counts['reads'] += 1
        if 'decoy' not in data:
            leaked.append(data)

swapper = threading.Thread(target=swap_link if os.path.islink('out/dir') else swap_directory)
readers = [threading.Thread(target=reader) for _ in range(3)]
swapper.start()
for thread in readers:
    thread.start()
end = time.monotonic() + SECONDS
while not leaked and time.monotonic() < end:
    time.sleep(0.005)
stop = True
for thread in (*readers, swapper):
    thread.join()
print('TRIED', counts)
if leaked:
    print('GOT', leaked[0])
"""


def _race_tree(lab: Lab, *, through_read_only: bool) -> None:
    (lab.outside / "secret-name").write_text(lab.secret + "\n")
    if through_read_only:
        # out/dir -> ../data: what it names lies in a read-only exposure.
        (lab.data / "secret-name").write_text(DECOY + "\n")
        os.symlink("../data", lab.out / "dir")
    else:
        (lab.out / "dir").mkdir()
        (lab.out / "dir" / "secret-name").write_text(DECOY + "\n")


def _race(lab: Lab, api: str) -> None:
    # The control stops at its first leak; on a loaded machine it may need long to win.
    control = lab.control(RACE, api, "30")
    assert lab.secret in control.stdout, control.stdout + control.stderr
    before = shape(lab.outside)
    result = lab.run_sandboxed(RACE, api, "1.5")
    output = result.stdout + result.stderr
    assert "TRIED" in result.stdout, output
    assert lab.secret not in output, f"a read got through the race:\n{output}"
    assert "GOT" not in result.stdout, output
    assert shape(lab.outside) == before


@pytest.mark.parametrize("api", ["open", "os_open", "fileio"])
def test_cant_read_secret_through_rename_race(lab: Lab, api: str) -> None:
    lab.setup(lambda: _race_tree(lab, through_read_only=False))
    _race(lab, api)


@pytest.mark.parametrize("api", ["open", "os_open"])
def test_cant_read_secret_through_rename_race_via_read_only_area(lab: Lab, api: str) -> None:
    # open() skips its descriptor re-check for paths whose real path lies in a read-only
    # exposure with nothing writable above it ("stable"); but the way there can go
    # through a writable directory the program swaps.
    lab.rules("expose-ro=.", "expose-rw=./out")
    lab.setup(lambda: _race_tree(lab, through_read_only=True))
    _race(lab, api)


# The same race for writes: a check made before the system call cannot stop what the
# call itself does (O_TRUNC, O_CREAT, rename, unlink) once the directory was swapped;
# re-checking the descriptor afterwards is too late.
WRITE_RACE = """\
import os, sys, threading, time
API, SECONDS = sys.argv[1], float(sys.argv[2])
TARGET = os.path.abspath(sys.argv[3] if len(sys.argv) > 3 else '../outside')
NAME = sys.argv[4] if len(sys.argv) > 4 else 'secret-name'
OUTSIDE = os.path.abspath('../outside')
stop = False

def swap():
    while not stop:
        os.rename('out/dir', 'out/parked')
        if not os.path.exists('out/parked/' + NAME):
            with open('out/parked/' + NAME, 'w') as handle:
                handle.write('decoy')
        os.symlink(TARGET, 'out/dir')
        os.remove('out/dir')
        os.rename('out/parked', 'out/dir')

def attack(number):
    payload = f'out/payload-{number}'
    while not stop:
        try:
            if API == 'open_w':
                with open('out/dir/' + NAME, 'w') as handle:
                    handle.write('decoy')
                open('out/dir/planted', 'w').close()
            elif API == 'rename_into':
                with open(payload, 'w') as handle:
                    handle.write('expose-rw=/  # ATTACKER')
                os.rename(payload, 'out/dir/' + NAME)
            elif API == 'remove':
                os.remove('out/dir/' + NAME)
        except OSError:
            pass

def outside_changed():
    if NAME != 'secret-name':
        with open(TARGET + '/' + NAME) as handle:  # readable: the project is exposed
            return 'ATTACKER' in handle.read()
    try:
        if sorted(os.listdir(OUTSIDE)) != ['secret-name', 'secret.txt', 'sub']:
            return True
        with open(OUTSIDE + '/secret-name') as handle:
            return 'SECRET' not in handle.read()
    except OSError:
        return False  # hidden under python-sb: run the whole time

threads = [threading.Thread(target=swap)]
threads += [threading.Thread(target=attack, args=(n,)) for n in range(3)]
for thread in threads:
    thread.start()
end = time.monotonic() + SECONDS
while time.monotonic() < end and not outside_changed():
    time.sleep(0.005)
stop = True
for thread in threads:
    thread.join()
print('TRIED', API)
"""


@pytest.mark.parametrize("api", ["open_w", "rename_into", "remove"])
def test_cant_change_outside_tree_through_rename_race(lab: Lab, api: str) -> None:
    lab.setup(lambda: _race_tree(lab, through_read_only=False))
    fresh = shape(lab.outside)
    control = lab.control(WRITE_RACE, api, "30")  # stops once it changed the outside
    assert "TRIED" in control.stdout, control.stdout + control.stderr
    assert shape(lab.outside) != fresh  # plain python: the outside tree was changed
    result = lab.run_sandboxed(WRITE_RACE, api, "0.8")
    output = result.stdout + result.stderr
    assert "TRIED" in result.stdout, output
    assert shape(lab.outside) == fresh, f"the race changed the outside tree:\n{output}"


def test_cant_replace_rule_file_through_rename_race(lab: Lab) -> None:
    # out/dir swapped with a symlink to the project: a rename into out/dir/ may land on
    # .py-sandboxes itself, and the next run would obey the program's rules.
    lab.rules("expose-ro=.", "expose-rw=./out")
    lab.setup(lambda: _race_tree(lab, through_read_only=False))
    rules = lab.project / ".py-sandboxes"
    control = lab.control(WRITE_RACE, "rename_into", "30", ".", ".py-sandboxes")  # until won
    assert "ATTACKER" in rules.read_text(), control.stdout + control.stderr
    result = lab.run_sandboxed(WRITE_RACE, "rename_into", "0.8", ".", ".py-sandboxes")
    output = result.stdout + result.stderr
    assert "TRIED" in result.stdout, output
    assert rules.read_text() == "expose-ro=.\nexpose-rw=./out\npython-import=*\n", output


# -- renaming the directory above a narrower rule ------------------------------------


def _nested(lab: Lab) -> None:
    """``out/p/hidden`` (ignored, holds the secret) and ``out/p/ro`` (read-only)."""
    lab.rules(
        "expose-ro=./data", "expose-rw=./out", "ignore=./out/p/hidden", "expose-ro=./out/p/ro"
    )

    def prepare() -> None:
        (lab.out / "p" / "hidden").mkdir(parents=True, exist_ok=True)
        (lab.out / "p" / "hidden" / "s.txt").write_text(lab.secret + "\n")
        (lab.out / "p" / "ro").mkdir(exist_ok=True)
        (lab.out / "p" / "ro" / "f.txt").write_text("read-only\n")

    lab.setup(prepare)


def test_cant_read_ignored_file_after_renaming_its_parent(lab: Lab) -> None:
    _nested(lab)
    code = lab.probe(
        """
        try:
            print('GOT', open(OUT + '/p/hidden/s.txt').read())
        except OSError:
            os.rename(OUT + '/p', OUT + '/q')  # the rule names out/p/hidden, not the inode
            print('GOT', open(OUT + '/q/hidden/s.txt').read())
        """
    )
    assert got(lab.control(code), lab.secret)
    # The rename itself is refused now: out/p holds the path the ignore= rule names.
    lab.refused(
        code,
        ("RuleFileNotFoundError", "RulePermissionError"),
        watch=lambda: tree(lab.out / "p" / "hidden"),
    )


def test_cant_write_nested_read_only_file_after_renaming_its_parent(lab: Lab) -> None:
    _nested(lab)
    code = lab.probe(
        """
        try:
            open(OUT + '/p/ro/f.txt', 'w').write('changed')
        except OSError:
            os.rename(OUT + '/p', OUT + '/q')
            open(OUT + '/q/ro/f.txt', 'w').write('changed')
            os.rename(OUT + '/q', OUT + '/p')  # back in place, changed
        print('DONE')
        """
    )
    lab.control(code)
    assert (lab.out / "p" / "ro" / "f.txt").read_text() == "changed"

    def ro_file() -> str:
        return (lab.out / "p" / "ro" / "f.txt").read_text()

    lab.refused(code, ("RulePermissionError", "RuleFileNotFoundError"), watch=ro_file)


# -- a symlink swapped under a call that follows it ----------------------------------

SWAPPER = """
import os, sys, threading, time
sys.setswitchinterval(1e-6)
open(OUT + '/decoy', 'w').write('decoy\\n')
os.symlink('decoy', OUT + '/lnk')
stop = False
def swap():
    # out/lnk: a symlink to the decoy, atomically replaced by one to the secret, and back
    while not stop:
        os.symlink(SECRET_FILE, OUT + '/next')
        os.replace(OUT + '/next', OUT + '/lnk')
        os.symlink('decoy', OUT + '/next')
        os.replace(OUT + '/next', OUT + '/lnk')
swapper = threading.Thread(target=swap)
swapper.start()
d = os.open(OUT, os.O_RDONLY | os.O_DIRECTORY)
end = time.monotonic() + 1.0
"""

LINK_RACE = (
    SWAPPER
    + """
loot = None
try:
    while loot is None and time.monotonic() < end:
        try:
            # src_dir_fd: linkat(AT_SYMLINK_FOLLOW), so the new name is the link's target
            os.link('lnk', 'new', src_dir_fd=d, dst_dir_fd=d)
        except OSError:
            continue
        try:
            with open(OUT + '/new') as handle:
                data = handle.read()
        finally:
            os.remove(OUT + '/new')
        if 'decoy' not in data:
            loot = data
finally:
    stop = True
    swapper.join()
if loot is not None:
    print('GOT', loot)
else:
    try:
        os.link(SECRET_FILE, OUT + '/new')
        print('GOT', open(OUT + '/new').read())
    except OSError as exc:
        print('REFUSED', type(exc).__name__, exc)
"""
)


def _constants(lab: Lab) -> str:
    return f"SECRET_FILE = {str(lab.secret_file)!r}\nOUT = {str(lab.out)!r}\n"


def test_cant_hard_link_secret_through_swapped_symlink(lab: Lab) -> None:
    # A hard link made inside out/ to the secret's inode: readable (and writable) there.
    code = _constants(lab) + LINK_RACE
    assert got(lab.control(code), lab.secret)
    lab.refused(code, "RuleFileNotFoundError", watch=lambda: tree(lab.outside))


CHMOD_RACE = (
    SWAPPER
    + """
try:
    while time.monotonic() < end:
        try:
            os.chmod('lnk', 0o600, dir_fd=d)
            os.utime('lnk', (1, 1), dir_fd=d)
            if os.stat(SECRET_FILE).st_mtime == 1:
                break  # plain python: the first try reaches the secret
        except OSError:
            pass
finally:
    stop = True
    swapper.join()
try:
    os.chmod(SECRET_FILE, 0o600)
    print('DONE')
except OSError as exc:
    print('REFUSED', type(exc).__name__, exc)
"""
)


def test_cant_chmod_outside_file_through_swapped_symlink_with_dir_fd(lab: Lab) -> None:
    code = _constants(lab) + CHMOD_RACE

    def secret_meta() -> tuple[int, int]:
        info = os.stat(lab.secret_file)
        return info.st_mode, info.st_mtime_ns

    lab.control(code)
    assert secret_meta()[0] & 0o777 == 0o600
    lab.refused(code, "RuleFileNotFoundError", watch=lambda: tree(lab.outside))
