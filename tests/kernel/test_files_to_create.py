"""A rule may name a file that does not exist yet (a log, a database's journal in a clean
checkout): the program may make it, C code included, and nothing else there.

Landlock holds rules on inodes: a missing file has none, so the right to make it is its
directory's, for regular files only. The Python layer keeps it to the name; the kernel
still refuses directories, links, sockets and listings in that directory.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from kernelprobes import NATIVE

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

O_WRONLY, O_CREAT = 1, 0o100
RULES = "expose-rw=./out/app.log\npython-api=ALLOW:native\npython-import=*\n"


def _project(project: Path, body: str, rules: str = RULES) -> str:
    (project / "out").mkdir()
    (project / ".py-sandboxes").write_text(rules)
    (project / "probe.py").write_text((NATIVE if "native" in rules else "import os\n") + body)
    return "probe.py"


@pytest.mark.parametrize("provider", ["landlock", "unshare", "bwrap"])
def test_c_code_makes_the_file_a_rule_names_before_it_exists(
    sb: Runner, project: Path, provider: str
):
    # SQLite makes its journal so, in C: the Python layer never sees it. Under bwrap the
    # file must be the host's, not one of a view that ends with the sandbox.
    if provider != "landlock" and shutil.which(provider) is None:
        pytest.skip(f"the {provider} program is not installed")
    body = f"outcome(libc.open(b'out/app.log', {O_WRONLY | O_CREAT}, 0o644))"
    script = _project(project, body, f"{RULES}os-sandbox={provider}\n")
    result = sb(script)
    assert result.stdout == "DONE\n", result.stderr
    assert (project / "out" / "app.log").is_file()


def test_cant_make_a_directory_or_a_link_beside_a_file_to_be_created(
    sb: Runner, py: Runner, project: Path
):
    body = (
        "outcome(libc.mkdir(b'out/sub', 0o755))\n"
        "outcome(libc.symlink(b'/etc/passwd', b'out/app.log'))\n"
        "outcome(libc.mkfifo(b'out/pipe', 0o644))\n"
    )
    script = _project(project, body)
    assert py(script).stdout == "DONE\nDONE\nDONE\n"
    for made in ("sub", "app.log", "pipe"):
        path = project / "out" / made
        path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
    result = sb(script)
    assert result.stdout == "REFUSED EACCES\nREFUSED EACCES\nREFUSED EACCES\n", result.stderr
    assert sorted(os.listdir(project / "out")) == []


def test_cant_write_another_file_beside_a_file_to_be_created(sb: Runner, py: Runner, project: Path):
    # Without native code the Python layer keeps the directory's right to the one name.
    rules = "expose-rw=./out/app.log\npython-import=os\n"
    script = _project(
        project,
        "try:\n"
        "    open('out/other.txt', 'w').write('x')\n"
        "    print('WROTE')\n"
        "except OSError as exc:\n"
        "    print(type(exc).__name__)\n"
        "open('out/app.log', 'w').write('log')\n"
        "print('LOGGED')\n",
        rules,
    )
    assert py(script).stdout == "WROTE\nLOGGED\n"
    (project / "out" / "other.txt").unlink()
    (project / "out" / "app.log").unlink()
    result = sb(script)
    assert result.stdout.splitlines()[0] != "WROTE", result.stderr
    assert result.stdout.splitlines()[-1] == "LOGGED", result.stderr
    assert not (project / "out" / "other.txt").exists()


def test_cant_turn_a_file_to_be_created_into_a_link_for_the_next_run(
    sb: Runner, py: Runner, project: Path
):
    # A link there would make the rule grant its target on the next run.
    script = _project(
        project,
        "try:\n"
        "    os.symlink('/etc/passwd', 'out/app.log')\n"
        "    print('LINKED')\n"
        "except OSError as exc:\n"
        "    print(type(exc).__name__)\n",
        "expose-rw=./out/app.log\npython-import=os\n",
    )
    assert py(script).stdout == "LINKED\n"
    (project / "out" / "app.log").unlink()
    result = sb(script)
    assert result.stdout != "LINKED\n", result.stderr
    assert not (project / "out" / "app.log").is_symlink()


def test_a_missing_file_to_read_only_warns(sb: Runner, project: Path):
    (project / ".py-sandboxes").write_text("expose-ro=./gone.txt\n")
    result = sb("-c", "print('ran')")
    assert result.stdout == "ran\n", result.stderr
    assert "'expose-ro=./gone.txt'" in result.stderr
    assert "does not exist: the rule grants nothing" in result.stderr


def test_a_log_rotates_on_every_run_not_only_the_first(sb: Runner, project: Path):
    # The second run finds the files there: each is renamed away and made again, a new
    # file the kernel grants through the directory, as on the first run.
    rules = "".join(f"expose-rw=./out/app.log{n}\n" for n in ("", ".1", ".2"))
    script = _project(
        project,
        "import logging.handlers\n"
        "rotate = logging.handlers.RotatingFileHandler\n"
        "handler = rotate('out/app.log', maxBytes=50, backupCount=2)\n"
        "log = logging.getLogger('x')\n"
        "log.addHandler(handler)\n"
        "for i in range(10):\n"
        "    log.warning('line %d of the log', i)\n"
        "print('LOGGED')\n",
        rules + "python-import=logging\npython-import=os\n",
    )
    for _ in range(3):
        result = sb(script)
        assert result.stdout == "LOGGED\n", result.stderr
        assert result.stderr == ""
    assert sorted(os.listdir(project / "out")) == ["app.log", "app.log.1", "app.log.2"]


MADE = "expose-rw=./build/\npython-import=os\n"


@pytest.mark.parametrize("provider", ["landlock", "unshare", "bwrap"])
def test_a_folder_to_make_is_made_again_in_a_clean_checkout(
    sb: Runner, project: Path, provider: str
):
    if provider != "landlock" and shutil.which(provider) is None:
        pytest.skip(f"the {provider} program is not installed")
    (project / ".py-sandboxes").write_text(f"{MADE}os-sandbox={provider}\n")
    (project / "probe.py").write_text(
        "import os\n"
        "os.makedirs('build/pages', exist_ok=True)\n"
        "open('build/pages/a.txt', 'w').write('a')\n"
        "print(sorted(os.listdir('build')), open('build/pages/a.txt').read())\n"
    )
    for _ in range(2):  # made, then there already
        result = sb("probe.py")
        assert result.stdout == "['pages'] a\n", result.stderr
        assert "refused" not in result.stderr
    assert (project / "build" / "pages" / "a.txt").read_text() == "a"


@pytest.mark.parametrize(
    "change",
    [
        "os.symlink('/etc', 'build')",
        "os.rename(tempfile.mkdtemp(), 'build')",
        "os.link(tempfile.mkstemp()[1], 'build')",
    ],
)
def test_cant_make_a_folder_to_make_a_link_for_the_next_run(
    sb: Runner, py: Runner, project: Path, change: str
):
    # Only mkdir makes it: a link (or a folder renamed there from the writable temporary
    # directory, holding one) would be what the rule grants on the next run.
    body = f"import os, tempfile\ntry:\n    {change}\n    print('MADE')\n"
    body += "except OSError as exc:\n    print(type(exc).__name__, exc)\n"
    (project / "probe.py").write_text(body)
    assert py("probe.py").stdout == "MADE\n"
    path = project / "build"
    path.unlink() if path.is_symlink() or path.is_file() else path.rmdir()
    (project / ".py-sandboxes").write_text(MADE + "python-import=tempfile\n")
    result = sb("probe.py")
    assert "MADE" not in result.stdout, result.stderr
    assert "'expose-rw=./build/'" in result.stdout, result.stdout
    assert not (project / "build").is_symlink()
    assert not (project / "build").is_file()
    assert "/proc/self/fd" not in result.stdout + result.stderr  # the user's path, named
