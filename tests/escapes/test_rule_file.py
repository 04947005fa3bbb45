"""Attack class 5: the sandbox rewriting its own rules, or what they grant the next run.

The rule file and its includes (a missing one too: it would be read next time) can never
be written, created, renamed or removed by the sandbox, whatever ``expose-rw`` says. Nor
may the sandbox change what unchanged rules grant the next run, by planting a rule file
or replacing an exposed path with a symlink.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from escapelab import Lab, attempt, got, tree

RULES = (
    "expose-rw=.",
    'include-optional "extra.profile"',
    'include-optional "profiles/extra.profile"',
)
EVIL = "expose-rw=/"
EVIL_LINE = ("\n" + EVIL + "\n").encode()


def _protected(lab: Lab) -> object:
    """What must not change: the rule file, the includes, the project directory."""

    def look(path: Path) -> object:
        if not os.path.lexists(path):
            return None
        info = os.lstat(path)
        content = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        return (info.st_mode, info.st_ino, info.st_mtime_ns, content)

    project = lab.project
    return {
        "rules": look(project / ".py-sandboxes"),
        "include": look(project / "extra.profile"),
        "nested_include": look(project / "profiles" / "extra.profile"),
        "project": os.path.isdir(project),
        "outside": lab.state()["outside"],
    }


ATTACKS = {
    "open_write": f"open('.py-sandboxes', 'w').write({EVIL!r})",
    "open_append": f"open('.py-sandboxes', 'a').write({EVIL!r})",
    "open_update": f"open('.py-sandboxes', 'r+').write({EVIL!r})",
    "os_open_trunc": "os.open('.py-sandboxes', os.O_WRONLY | os.O_TRUNC)",
    "fileio_write": f"import io\nio.FileIO('.py-sandboxes', 'w').write({EVIL.encode()!r})",
    "pathlib_write": f"import pathlib\npathlib.Path('.py-sandboxes').write_text({EVIL!r})",
    "truncate": "os.truncate('.py-sandboxes', 0)",
    "chmod": "os.chmod('.py-sandboxes', 0o000)",
    "utime": "os.utime('.py-sandboxes', (1, 1))",
    "remove": "os.remove('.py-sandboxes')",
    "rename_away": "os.rename('.py-sandboxes', 'old-rules')",
    "rename_away_dir_fd": (
        "base = os.open('.', os.O_RDONLY)\n"
        "os.rename('.py-sandboxes', 'old-rules', src_dir_fd=base, dst_dir_fd=base)"
    ),
    "replace_from_temp": (
        f"open('tmp-rules', 'w').write({EVIL!r})\nos.replace('tmp-rules', '.py-sandboxes')"
    ),
    "move_over": (
        f"import shutil\nopen('tmp-rules', 'w').write({EVIL!r})\n"
        "shutil.move('tmp-rules', '.py-sandboxes')"
    ),
    "copy_over": (
        f"import shutil\nopen('tmp-rules', 'w').write({EVIL!r})\n"
        "shutil.copyfile('tmp-rules', '.py-sandboxes')"
    ),
    "write_through_dir_symlink": (
        f"os.symlink('.', 'alias')\nopen('alias/.py-sandboxes', 'w').write({EVIL!r})"
    ),
    "write_through_file_symlink": (
        f"os.symlink('.py-sandboxes', 'alias')\nopen('alias', 'w').write({EVIL!r})"
    ),
    "write_through_proc_self_cwd": (f"open('/proc/self/cwd/.py-sandboxes', 'w').write({EVIL!r})"),
    "hard_link_then_write": (
        f"os.link('.py-sandboxes', 'alias')\nopen('alias', 'w').write({EVIL!r})"
    ),
    "create_include": f"open('extra.profile', 'w').write({EVIL!r})",
    "create_include_exclusive": f"open('extra.profile', 'x').write({EVIL!r})",
    "create_include_os_open": "os.open('extra.profile', os.O_CREAT | os.O_WRONLY)",
    "create_include_mkdir": "os.mkdir('extra.profile')",
    "symlink_as_include": f"open('evil', 'w').write({EVIL!r})\nos.symlink('evil', 'extra.profile')",
    "hard_link_as_include": f"open('evil', 'w').write({EVIL!r})\nos.link('evil', 'extra.profile')",
    "rename_as_include": f"open('evil', 'w').write({EVIL!r})\nos.rename('evil', 'extra.profile')",
    "create_nested_include": (
        f"os.makedirs('profiles', exist_ok=True)\n"
        f"open('profiles/extra.profile', 'w').write({EVIL!r})"
    ),
    "remove_project_tree": "import shutil\nshutil.rmtree(PROJECT)",
    "rename_project": "os.rename(PROJECT, PROJECT + '-moved')",
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_cant_rewrite_rule_file_or_include(lab: Lab, attack: str) -> None:
    lab.rules(*RULES)
    code = lab.probe(ATTACKS[attack] + "\nprint('DONE')")
    control = lab.control(code)
    assert got(control, "DONE"), control.stdout + control.stderr
    lab.refused(code, "RulePermissionError", watch=lambda: _protected(lab))


def test_cant_create_missing_include_by_renaming_its_directory_into_place(lab: Lab) -> None:
    # profiles/ does not exist; a directory holding extra.profile is renamed to it. Only
    # a removal of an include's parent is judged, not its creation.
    lab.rules(*RULES)
    code = lab.probe(
        f"""
        os.mkdir('staging')
        open('staging/extra.profile', 'w').write({EVIL!r})
        os.rename('staging', 'profiles')
        print('DONE')
        """
    )
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RulePermissionError", watch=lambda: _protected(lab))


def test_cant_change_rule_file_mode_through_read_only_descriptor(lab: Lab) -> None:
    lab.rules(*RULES)
    code = lab.probe(
        """
        fd = os.open('.py-sandboxes', os.O_RDONLY)
        os.fchmod(fd, 0o000)
        print('DONE')
        """
    )
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RulePermissionError", watch=lambda: _protected(lab))


def test_cant_rewrite_rule_file_with_fileio_given_a_path_object(lab: Lab) -> None:
    lab.rules(*RULES)
    code = lab.probe(
        f"""
        import io, pathlib
        io.FileIO(pathlib.Path('.py-sandboxes'), 'w').write({EVIL.encode()!r})
        print('DONE')
        """
    )
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RulePermissionError", watch=lambda: _protected(lab))


@pytest.mark.parametrize("opener", ["os_open_append", "open_w"])
def test_cant_rewrite_rule_file_after_relative_chdir(lab: Lab, opener: str) -> None:
    # chdir('../../..') from out/a/b: the guard keeps judging relative names from out/a/b
    # (writable), the kernel opens them in the project.
    lab.rules(*RULES)
    write = {
        "os_open_append": (
            f"os.write(os.open('.py-sandboxes', os.O_WRONLY | os.O_APPEND), {EVIL_LINE!r})"
        ),
        "open_w": f"open('.py-sandboxes', 'w').write({EVIL!r})",
    }[opener]
    code = lab.probe(
        f"""
        os.makedirs(OUT + '/a/b')
        os.chdir(OUT + '/a/b')
        os.chdir('../../..')
        {write}
        print('DONE')
        """
    )
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RulePermissionError", watch=lambda: _protected(lab))


def test_cant_append_to_rule_file_through_os_open_dir_fd(lab: Lab) -> None:
    # os.open's audit event carries no dir_fd: the name is judged in the cwd (out/).
    lab.rules(*RULES)
    code = lab.probe(
        f"""
        base = os.open(PROJECT, os.O_RDONLY)
        os.chdir(OUT)
        fd = os.open('.py-sandboxes', os.O_WRONLY | os.O_APPEND, dir_fd=base)
        os.write(fd, {EVIL_LINE!r})
        print('DONE')
        """
    )
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RulePermissionError", watch=lambda: _protected(lab))


def test_cant_plant_a_rule_file_for_the_next_run(lab: Lab) -> None:
    # A .py-sandboxes written in a writable directory would rule a later run of a script
    # there (python-sb out/tool.py reads out/.py-sandboxes first).
    code = attempt("open(os.path.join(sys.argv[1], '.py-sandboxes'), 'w').write('os-sandbox=none')")
    planted = lab.out / ".py-sandboxes"
    lab.control(code, str(lab.out))
    assert planted.exists()
    lab.reset()
    result = lab.run_sandboxed(code, str(lab.out))
    assert "a file named .py-sandboxes holds rules" in result.stdout, result.stdout + result.stderr
    assert not planted.exists()


def test_cant_widen_a_narrower_rule_by_a_link_for_the_next_run(lab: Lab) -> None:
    # out/cfg replaced by a link to the secret's directory: the next run would grant the
    # target of 'expose-ro=./out/cfg'. The rules then refuse to start instead.
    lab.rules("expose-rw=./out", "expose-ro=./out/cfg")
    lab.setup(lambda: (lab.out / "cfg").symlink_to(lab.outside))
    result = lab.run_sandboxed(attempt("print(open('out/cfg/secret.txt').read())"))
    assert result.returncode == 255, result.stdout + result.stderr
    assert "is a symbolic link inside the writable exposure" in result.stderr
    assert lab.secret not in result.stdout


# -- an exposure replaced by a symlink for the next run --------------------------------

# The exposure's own path is writable (it is inside its rule), so the program may remove
# ``out`` and create ``out`` again, as a symlink to anywhere, in the project directory that
# no rule makes writable. The rule file is unchanged, but the next run resolves
# ``expose-rw=./out`` to the link's target: the outside is then exposed read-write.

PLANT_DIR = """
import os
os.rmdir(OUT)
os.symlink(OUTSIDE, OUT)
print('DONE')
"""

PLANT_FILE = """
import os
os.remove(OUT)
os.symlink(SECRET_FILE, OUT)
print('DONE')
"""


def _constants(lab: Lab) -> str:
    return (
        f"OUTSIDE = {str(lab.outside)!r}\nSECRET_FILE = {str(lab.secret_file)!r}\n"
        f"OUT = {str(lab.out)!r}\n"
    )


def _file_exposure(lab: Lab) -> None:
    """``expose-rw=./out`` is a single file here."""

    def prepare() -> None:
        lab.out.rmdir()
        lab.out.write_text("notes\n")

    lab.setup(prepare)
    lab.rules("expose-ro=./data", "expose-rw=./out")


@pytest.mark.parametrize("kind", ["directory", "file"])
def test_cant_replace_exposed_path_with_symlink(lab: Lab, kind: str) -> None:
    if kind == "file":
        _file_exposure(lab)
    code = _constants(lab) + (PLANT_DIR if kind == "directory" else PLANT_FILE)
    assert "DONE" in lab.control(code).stdout
    assert lab.out.is_symlink()
    if kind == "file":
        # A file rule lets its file be removed and made again (a rotated log, a journal):
        # the removal goes through, the link in its place is refused.
        lab.reset()
        result = lab.sb("-c", code)
        assert "RulePermissionError" in result.stderr, result.stderr
        assert "DONE" not in result.stdout
        assert not lab.out.is_symlink()
        return
    lab.refused(
        code,
        ("RulePermissionError", "RuleFileNotFoundError"),
        watch=lambda: tree(lab.project),
    )


@pytest.mark.parametrize("kind", ["directory", "file"])
def test_cant_read_secret_in_next_run_through_planted_exposure_link(lab: Lab, kind: str) -> None:
    if kind == "file":
        _file_exposure(lab)
    plant = _constants(lab) + (PLANT_DIR if kind == "directory" else PLANT_FILE)
    path = "out/secret.txt" if kind == "directory" else "out"
    read = lab.probe(f"print('GOT', open({path!r}).read())")
    lab.reset()
    lab.py("-c", plant)
    assert lab.secret in lab.py("-c", read).stdout
    lab.reset()
    first = lab.sb("-c", plant)
    second = lab.sb("-c", read)
    output = first.stdout + first.stderr + second.stdout + second.stderr
    assert lab.secret not in output, f"the next run read the secret:\n{output}"
    # The planting run is refused (its probe has no try: the refusal ends it).
    assert "RulePermissionError" in first.stderr or "REFUSED" in second.stdout, output


# -- the rule file reached through a chain of links ----------------------------------------


def _chained(lab: Lab) -> None:
    """``.py-sandboxes -> conf/current/rules`` and ``conf/current -> v1``."""
    (lab.project / "conf" / "v1").mkdir(parents=True)
    rules = lab.project / ".py-sandboxes"
    (lab.project / "conf" / "v1" / "rules").write_bytes(rules.read_bytes())
    rules.unlink()
    os.symlink("conf/current/rules", rules)
    os.symlink("v1", lab.project / "conf" / "current")


def _chain(lab: Lab) -> tuple[object, ...]:
    conf = lab.project / "conf"
    return (
        os.readlink(lab.project / ".py-sandboxes"),
        os.path.lexists(conf / "current") and os.readlink(conf / "current"),
        tree(conf / "v1"),
        lab.state()["outside"],
    )


RETARGETS = {
    "replace": "os.symlink('v2', 'conf/next')\nos.replace('conf/next', 'conf/current')",
    "unlink": "os.unlink('conf/current')\nos.symlink('v2', 'conf/current')",
    "rename_conf": "os.rename('conf', 'old-conf')",
}


@pytest.mark.parametrize("route", list(RETARGETS))
def test_cant_retarget_a_link_in_the_middle_of_the_rule_files_chain(lab: Lab, route: str) -> None:
    # Only the name searched and the final real path were protected: the middle link
    # conf/current could point at v2, whose rules the next run obeyed.
    lab.rules("expose-rw=.")
    lab.setup(lambda: _chained(lab))
    code = lab.probe(
        f"""
        os.makedirs('conf/v2', exist_ok=True)
        open('conf/v2/rules', 'w').write('expose-ro=..\\n')
        {RETARGETS[route]}
        print('DONE')
        """.replace("\n        ", "\n")
    )
    assert got(lab.control(code), "DONE")
    # No kernel can keep a link: with the links in a read-write exposure, nothing starts.
    result = lab.run_sandboxed(code)
    assert result.returncode == 255, result.stdout + result.stderr
    assert "DONE" not in result.stdout
    assert "the rules are read through the link" in result.stderr
    assert "conf/current" in result.stderr
    assert "expose-rw=." in result.stderr
    assert _chain(lab)[:2] == ("conf/current/rules", "v1")  # nothing ran
    assert not (lab.project / "conf" / "v2").exists()


def test_cant_retarget_a_link_of_the_rule_files_chain_outside_the_writable_tree(
    lab: Lab,
) -> None:
    # The links themselves out of reach (conf read-only): the run starts, and the Python
    # layer refuses the change of anything on the way.
    lab.rules("expose-rw=./data\nexpose-ro=.")
    lab.setup(lambda: _chained(lab))
    code = lab.probe("os.unlink('conf/current')\nprint('DONE')")
    assert got(lab.control(code), "DONE")
    lab.refused(code, "RulePermissionError", watch=lambda: _chain(lab)[:3])


def test_show_layers_says_the_links_to_the_rule_file_stop_the_start(lab: Lab) -> None:
    # A link cannot be bound read-only: --show-layers must not claim the kernel keeps it.
    import json

    lab.rules("expose-rw=.")
    lab.setup(lambda: _chained(lab))
    lab.reset()
    report = json.loads(lab.sb("--show-layers=json").stdout)
    row = next(r for r in report["rules"] if r["rule"] == "the rule files cannot be changed")
    assert "the links on the way (.py-sandboxes, conf/current) are not bound" in row["note"]
    assert "python-sb refuses to start under a kernel provider" in row["note"]
