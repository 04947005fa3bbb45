"""``ignore=`` inside an exposed tree: the ignored file is hidden from every route.

Rules: ``expose-rw=.`` and ``ignore=.env``; ``.env`` and ``sub/.env`` hold the secret.
"""

from __future__ import annotations

import pytest
from escapelab import Lab


@pytest.fixture
def env_lab(lab: Lab) -> Lab:
    def dotenv() -> None:
        (lab.project / ".env").write_text(f"API_TOKEN={lab.secret}\n")
        (lab.project / "sub").mkdir()
        (lab.project / "sub" / ".env").write_text(f"API_TOKEN={lab.secret}\n")

    lab.rules("expose-rw=.", "ignore=.env")
    lab.setup(dotenv)
    return lab


READS = {
    "open": "print('GOT', open('.env').read())",
    "nested": "print('GOT', open('sub/.env').read())",
    "os_open": "print('GOT', os.read(os.open('.env', os.O_RDONLY), 200))",
    "fileio": "import io\nprint('GOT', io.FileIO('.env').read())",
    "dotdot": "print('GOT', open('sub/../.env').read())",
    "absolute": "print('GOT', open(PROJECT + '/.env').read())",
    "proc_self_cwd": "print('GOT', open('/proc/self/cwd/.env').read())",
    "dir_fd": (
        "base = os.open('sub', os.O_RDONLY)\n"
        "print('GOT', os.read(os.open('.env', os.O_RDONLY, dir_fd=base), 200))"
    ),
    "symlink": "os.symlink('.env', 'alias')\nprint('GOT', open('alias').read())",
    "dir_symlink": "os.symlink('.', 'here')\nprint('GOT', open('here/.env').read())",
    "hard_link": "os.link('.env', 'alias')\nprint('GOT', open('alias').read())",
    "rename": "os.rename('.env', 'plain.txt')\nprint('GOT', open('plain.txt').read())",
    "copy": "import shutil\nshutil.copyfile('.env', 'x')\nprint('GOT', open('x').read())",
}


@pytest.mark.parametrize("route", list(READS))
def test_cant_read_ignored_file(env_lab: Lab, route: str) -> None:
    lab = env_lab
    code = lab.probe(READS[route])
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError", watch=lambda: lab.state()["outside"])


LISTINGS = {
    "listdir": "print('GOT', os.listdir('.'), os.listdir('sub'))",
    "scandir": "print('GOT', [e.name for e in os.scandir('.')])",
    "walk": "print('GOT', [f for _, _, f in os.walk('.')])",
    "glob": "import glob\nprint('GOT', glob.glob('**/.*', recursive=True))",
    "exists": "print('GOT', os.path.exists('.env') and '.env')",
    "stat": "print('GOT', os.stat('.env').st_size and '.env')",
}


@pytest.mark.parametrize("route", list(LISTINGS))
def test_cant_see_ignored_file(env_lab: Lab, route: str) -> None:
    lab = env_lab
    code = lab.probe(LISTINGS[route])
    assert ".env" in lab.control(code).stdout
    result = lab.run_sandboxed(code)
    output = result.stdout + result.stderr
    if "REFUSED RuleFileNotFoundError" in result.stdout:
        return  # refused as missing: the message names the path the program gave
    assert "GOT" in result.stdout, output
    assert ".env" not in result.stdout, output
