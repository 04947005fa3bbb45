"""Round two, files: renaming the parent of a narrower rule, and symlinks swapped under a
``dir_fd`` call or a followed hard link.

``ignore=`` and a nested ``expose-ro=`` are judged on the path; a directory above them
inside an ``expose-rw=`` may be renamed, after which the same files answer to the wider
rule. ``os.chmod``/``os.utime`` with ``dir_fd`` and ``os.link`` with ``src_dir_fd`` are not
pinned by the wrappers and are accepted by the hook in their ``dir_fd`` form, while the
kernel follows a last-component symlink judged a moment earlier.
"""

from __future__ import annotations

import os

from escapelab import Lab, got, tree

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
