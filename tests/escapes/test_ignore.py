"""``ignore=`` inside an exposed tree: the ignored file is hidden from every route.

Rules: ``expose-rw=.`` and ``ignore=.env``; ``.env`` and ``sub/.env`` hold the secret.
"""

from __future__ import annotations

import os
import sqlite3

import pytest
from escapelab import Lab, got, tree

from longpaths import beyond_path_max


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


# -- the ignored database: SQLite's own URI decoding ---------------------------------------


def _vault_database(lab: Lab) -> None:
    (lab.project / "vault").mkdir()
    with sqlite3.connect(lab.project / "vault" / "keys.db") as db:
        db.execute("create table t (v text)")
        db.execute("insert into t values (?)", (lab.secret,))
    db.close()
    # SQLite decodes '%' and two hex digits only: "%+f" is the name of this link.
    os.symlink("vault", lab.project / "%+f")


@pytest.mark.parametrize("route", ["connect", "attach"])
def test_cant_reach_an_ignored_database_through_a_sqlite_uri_escape(lab: Lab, route: str) -> None:
    # int("+f", 16) is 15: a decoder that accepts what int() accepts judges "\x0f/keys.db",
    # SQLite opens "%+f/keys.db" as written.
    lab.rules("expose-rw=.", "ignore=vault")
    lab.setup(lambda: _vault_database(lab))
    uri = "file:%+f/keys.db?mode=ro"
    body = {
        "connect": f"db = sqlite3.connect({uri!r}, uri=True)\nrows = db.execute('select v from t')",
        "attach": (
            "db = sqlite3.connect('file::memory:', uri=True)\n"
            f"db.execute(\"attach database '{uri}' as s\")\n"
            "rows = db.execute('select v from s.t')"
        ),
    }[route]
    code = lab.probe(body + "\nprint('GOT', rows.fetchall())", imports="os, sqlite3")
    assert lab.secret in lab.control(code).stdout
    # Refused as a malformed escape; ATTACH's refusal comes back through SQLite.
    lab.refused(code, ("RulePermissionError", "DatabaseError"))


# -- names the guard cannot resolve are refused (fail closed) ------------------------------


def _beyond_path_max(lab: Lab) -> None:
    """``s1`` leads to a directory whose real path is a few bytes short of PATH_MAX
    (made one level at a time through descriptors); in it ``notes`` links to the key."""
    (lab.project / "conf").mkdir()
    (lab.project / "conf" / "api.key").write_text(lab.secret + "\n")
    beyond_path_max(lab.project, "s1", "notes", str(lab.project / "conf" / "api.key"), 4093)


def _key_and_outside(lab: Lab) -> object:
    # The whole project cannot be photographed: its deepest names exceed PATH_MAX.
    return tree(lab.outside), tree(lab.project / "conf"), sorted(os.listdir(lab.project))


def test_cant_read_an_ignored_file_through_a_link_beyond_path_max(lab: Lab) -> None:
    # The guard's lstat of "<4,093 bytes>/notes" fails with ENAMETOOLONG; taken for "missing",
    # the name was judged as written, inside the exposure. The kernel follows s1 and notes.
    lab.rules("expose-rw=.", "ignore=conf/*.key")
    lab.setup(lambda: _beyond_path_max(lab))
    code = lab.probe("import io\nprint('GOT', io.open_code('s1/notes').read())")
    assert lab.secret in lab.control(code).stdout
    result = lab.refused(code, "RulePermissionError", watch=lambda: _key_and_outside(lab))
    assert "ENAMETOOLONG" in result.stdout, result.stdout


# -- anchored ignore= patterns resolved like exposures -------------------------------------


def test_cant_read_an_anchored_ignored_file_of_a_project_deployed_through_a_link(
    lab: Lab,
) -> None:
    # app -> releases/v1, whose rules say ignore=conf/*.key. The exposure was resolved to
    # releases/v1, the pattern stayed anchored to app/conf: no real path matched it.
    release = lab.project / "releases" / "v1"
    code = lab.probe("print('GOT', open(os.path.join(sys.path[0], 'conf/api.key')).read())")

    def deploy() -> None:
        (release / "conf").mkdir(parents=True)
        (release / "conf" / "api.key").write_text(lab.secret + "\n")
        (release / ".py-sandboxes").write_text("expose-rw=.\nignore=conf/*.key\npython-import=*\n")
        (release / "main.py").write_text(code)
        os.symlink("releases/v1", lab.project / "app")

    lab.setup(deploy)
    lab.reset()
    assert lab.secret in lab.py("app/main.py").stdout
    lab.reset()
    before = lab.state()
    result = lab.sb("app/main.py")
    output = result.stdout + result.stderr
    assert lab.secret not in output, output
    assert "REFUSED RuleFileNotFoundError" in result.stdout, output
    assert "ignore=conf/*.key" in result.stdout, output
    assert lab.state() == before, output


def test_cant_read_an_anchored_ignored_file_by_the_real_name_of_its_linked_directory(
    lab: Lab,
) -> None:
    # conf -> vault: ignore=conf/*.key hides vault/api.key, which is what conf/api.key is.
    def vault() -> None:
        (lab.project / "vault").mkdir()
        (lab.project / "vault" / "api.key").write_text(lab.secret + "\n")
        os.symlink("vault", lab.project / "conf")

    lab.rules("expose-ro=.", "ignore=conf/*.key")
    lab.setup(vault)
    for name in ("conf/api.key", "vault/api.key"):
        code = lab.probe(f"print('GOT', open({name!r}).read())")
        assert lab.secret in lab.control(code).stdout
        lab.refused(code, "RuleFileNotFoundError")


def test_an_anchored_ignore_through_a_link_in_a_writable_exposure_is_a_rule_error(
    lab: Lab,
) -> None:
    # The sandbox could point conf elsewhere: the next run would hide that, not vault.
    def vault() -> None:
        (lab.project / "vault").mkdir()
        os.symlink("vault", lab.project / "conf")

    lab.rules("expose-rw=.", "ignore=conf/*.key")
    lab.setup(vault)
    result = lab.run_sandboxed("print('DONE')")
    assert result.returncode != 0, result.stdout + result.stderr
    assert "is a symbolic link inside the writable exposure" in result.stderr, result.stderr


# -- renames that carry files out of an ignore= pattern ------------------------------------


def _secrets(lab: Lab) -> None:
    (lab.project / "app" / "secrets").mkdir(parents=True)
    (lab.project / "app" / "secrets" / "api.key").write_text(lab.secret + "\n")
    (lab.project / "app" / "other").mkdir()


RENAMES = {
    "rename": "os.rename('app/secrets', 'app/public')",
    "up": "os.rename('app/secrets', 'public')",
    "into_other": "os.rename('app/secrets', 'app/other/public')",
}


@pytest.mark.parametrize("route", list(RENAMES))
def test_cant_read_an_ignored_file_by_renaming_the_directory_a_pattern_needs(
    lab: Lab, route: str
) -> None:
    # ignore=**/secrets/*.key: the "holds a narrower rule" refusal knew only the fixed
    # prefix of the pattern (the project), not that app/secrets is what makes it match.
    lab.rules("expose-rw=.", "ignore=**/secrets/*.key")
    lab.setup(lambda: _secrets(lab))
    moved = {"rename": "app/public", "up": "public", "into_other": "app/other/public"}[route]
    code = lab.probe(f"{RENAMES[route]}\nprint('GOT', open({moved + '/api.key'!r}).read())")
    assert lab.secret in lab.control(code).stdout
    result = lab.refused(code, "RulePermissionError")
    assert "ignore=**/secrets/*.key" in result.stdout, result.stdout


def test_a_directory_no_pattern_depends_on_can_still_be_renamed(lab: Lab) -> None:
    lab.rules("expose-rw=.", "ignore=**/secrets/*.key")
    lab.setup(lambda: _secrets(lab))
    code = lab.probe(
        "os.rename('app', 'app2')\nos.rename('app2/other', 'app2/more')\n"
        "print('GOT', open('app2/secrets/api.key').read())"
    )
    result = lab.run_sandboxed(code)
    assert "REFUSED RuleFileNotFoundError" in result.stdout, result.stdout + result.stderr
    assert (lab.project / "app2" / "more").is_dir()


def test_a_directory_made_beyond_path_max_is_refused_with_a_rule_error(lab: Lab) -> None:
    # The refusal, not an error of the guard's own, reaches the program: mkdir's handler
    # looks at the name again when the refusal comes, to tell a directory that exists.
    lab.rules("expose-rw=.", "ignore=conf/*.key")
    lab.setup(lambda: _beyond_path_max(lab))
    code = lab.probe(
        "os.makedirs('s1/more/deeper', exist_ok=True)\n"
        "os.rmdir('s1/more/deeper')\nos.rmdir('s1/more')\n"  # the tree can be photographed
        "print('DONE')"
    )
    assert got(lab.control(code), "DONE")
    result = lab.refused(code, "RulePermissionError", watch=lambda: _key_and_outside(lab))
    assert "ENAMETOOLONG" in result.stdout, result.stdout
