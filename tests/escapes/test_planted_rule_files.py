"""Attack class: a rule file planted where the rule search of the next run looks first.

The search looks next to the script before the working directory, and in
``pyproject.toml`` when no rule file is found: a rule file the sandbox makes in a
writable place the search visits first rules the next run instead of the reviewed one.
The Python layer refuses the name; native code does not ask it, and no kernel layer can
refuse one new name in a directory it lets the sandbox write. So the trusted side notes
at start which of those places hold no rule file, and at exit, once nothing of the
program runs, moves a new one aside and says so: the next run reads the reviewed rules.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from longpaths import beyond_path_max
from pysandboxes._host.select import unavailable_reason

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

PROVIDERS = ("landlock", "subprocess", "unshare", "bwrap")

# Native code makes a file: the Python layer is not asked.
PLANT = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.open(sys.argv[1].encode(), 0o1101, 0o644)  # O_WRONLY | O_CREAT | O_TRUNC
if fd < 0:
    print("REFUSED", ctypes.get_errno())
else:
    libc.write(fd, {text!r}, {size})
    libc.close(fd)
    print("DONE")
"""
APPEND = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.open(sys.argv[1].encode(), 0o2001)  # O_WRONLY | O_APPEND
if fd < 0:
    print("REFUSED", ctypes.get_errno())
else:
    libc.write(fd, {text!r}, {size})
    libc.close(fd)
    print("DONE")
"""
TABLE = b'\n[tool.py-sandboxes]\nexpose-ro = ["/"]\n'


def _native(body: str, text: bytes) -> str:
    return body.format(text=text, size=len(text))


def _rules_shown(sb: Runner, *program: str) -> str:
    """The rule file the next run reads, as ``--show-rules`` names it."""
    return sb("--show-rules", *program).stdout


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cant_plant_a_rule_file_next_to_the_script(
    sb: Runner, py: Runner, project: Path, provider: str
) -> None:
    reason = unavailable_reason(provider)
    if reason is not None:
        pytest.skip(f"{provider} cannot run here: {reason}")
    tools = project / "tools"
    tools.mkdir()
    (tools / "main.py").write_text(_native(PLANT, b"expose-ro=/\n"))
    reviewed = (
        "expose-ro=.\nexpose-rw=./tools\npython-api=ALLOW:native\npython-import=*\n"
        f"os-sandbox={provider}\n"
    )
    (project / ".py-sandboxes").write_text(reviewed)
    planted = tools / ".py-sandboxes"
    # Control: made under plain python, the file rules the next run of the script.
    assert py("tools/main.py", "tools/.py-sandboxes").stdout == "DONE\n"
    assert "tools/.py-sandboxes" in _rules_shown(sb, "tools/main.py")
    planted.unlink()
    result = sb("tools/main.py", "tools/.py-sandboxes")
    assert result.stdout == "DONE\n", result.stderr  # no kernel refuses a new name there
    assert not planted.exists(), "the planted rule file stayed"
    assert (tools / ".py-sandboxes.planted").read_text() == "expose-ro=/\n"
    assert "tools/.py-sandboxes appeared while the program ran" in result.stderr
    shown = _rules_shown(sb, "tools/main.py")
    assert "tools/.py-sandboxes" not in shown
    assert "expose-rw=./tools" in shown
    assert (project / ".py-sandboxes").read_text() == reviewed


def test_cant_plant_a_rule_file_under_the_configured_name_nor_the_default(
    sb: Runner, py: Runner, project: Path
) -> None:
    # --pysandboxes-config NAME is searched like the default name; a file of either name
    # planted next to the script rules a later run, with or without the option.
    tools = project / "tools"
    tools.mkdir()
    (tools / "main.py").write_text(_native(PLANT, b"expose-ro=/\n"))
    (project / "custom.rules").write_text(
        "expose-ro=.\nexpose-rw=./tools\npython-api=ALLOW:native\npython-import=*\n"
    )
    for name in ("custom.rules", ".py-sandboxes"):
        assert py("tools/main.py", f"tools/{name}").stdout == "DONE\n"
        (tools / name).unlink()
        result = sb("--pysandboxes-config", "custom.rules", "tools/main.py", f"tools/{name}")
        assert result.stdout == "DONE\n", result.stderr
        assert not (tools / name).exists(), f"tools/{name} stayed"
        assert f"tools/{name} appeared while the program ran" in result.stderr


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cant_give_pyproject_a_table_of_rules(
    sb: Runner, py: Runner, project: Path, provider: str
) -> None:
    # No rule file: the rules come from the command line, and the search would read a
    # [tool.py-sandboxes] table of pyproject.toml next time.
    reason = unavailable_reason(provider)
    if reason is not None:
        pytest.skip(f"{provider} cannot run here: {reason}")
    pyproject = project / "pyproject.toml"
    original = '[project]\nname = "demo"\n'
    pyproject.write_text(original)
    (project / "app.py").write_text(_native(APPEND, TABLE))
    rules = (
        "--expose-rw=.",
        "--python-api=ALLOW:native",
        "--python-import=*",
        f"--os-sandbox={provider}",
    )
    assert py("app.py", "pyproject.toml").stdout == "DONE\n"
    assert "pyproject.toml" in _rules_shown(sb, "app.py")
    pyproject.write_text(original)
    result = sb(*rules, "app.py", "pyproject.toml")
    assert result.stdout == "DONE\n", result.stderr
    assert pyproject.read_text() == original
    assert "[tool.py-sandboxes]" in (project / "pyproject.toml.planted").read_text()
    assert "pyproject.toml was changed while the program ran" in result.stderr


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cant_create_a_missing_include_natively(
    sb: Runner, py: Runner, project: Path, provider: str
) -> None:
    # An include that does not exist yet is read by the next run once it does.
    reason = unavailable_reason(provider)
    if reason is not None:
        pytest.skip(f"{provider} cannot run here: {reason}")
    (project / "profiles").mkdir()
    (project / "app.py").write_text(_native(PLANT, b"expose-ro=/\n"))
    (project / ".py-sandboxes").write_text(
        'expose-ro=.\nexpose-rw=./profiles\ninclude-optional "profiles/extra.profile"\n'
        f"python-api=ALLOW:native\npython-import=*\nos-sandbox={provider}\n"
    )
    include = project / "profiles" / "extra.profile"
    assert py("app.py", "profiles/extra.profile").stdout == "DONE\n"
    assert "expose-ro=/" in _rules_shown(sb, "app.py")
    include.unlink()
    result = sb("app.py", "profiles/extra.profile")
    assert result.stdout == "DONE\n", result.stderr
    assert not include.exists(), "the include made by the sandbox stayed"
    assert "profiles/extra.profile appeared while the program ran" in result.stderr
    assert "expose-ro=/\n" not in _rules_shown(sb, "app.py")


def test_cant_keep_a_planted_rule_file_by_taking_the_name_it_is_moved_to(
    sb: Runner, py: Runner, project: Path
) -> None:
    # The names a planted file is moved to are taken first (a directory cannot be
    # renamed over): it is moved to a name the program could not foresee.
    tools = project / "tools"
    tools.mkdir()
    (tools / "main.py").write_text(
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None)\n"
        "libc.mkdir(b'tools/.py-sandboxes.planted', 0o755)\n"
        + _native(PLANT, b"expose-ro=/\n").replace("import ctypes, sys\n", "import sys\n")
    )
    (project / ".py-sandboxes").write_text(
        "expose-ro=.\nexpose-rw=./tools\npython-api=ALLOW:native\npython-import=*\n"
    )
    assert py("tools/main.py", "tools/.py-sandboxes").stdout == "DONE\n"
    assert "tools/.py-sandboxes" in _rules_shown(sb, "tools/main.py")
    (tools / ".py-sandboxes").unlink()
    (tools / ".py-sandboxes.planted").rmdir()
    result = sb("tools/main.py", "tools/.py-sandboxes")
    assert result.stdout == "DONE\n", result.stderr
    assert not (tools / ".py-sandboxes").exists(), "the planted rule file stayed"
    assert "moved to tools/.py-sandboxes.planted-" in result.stderr


# Native code retargets a link on the way to the rule file: no name the Python layer sees.
RETARGET = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.mkdir(b"conf/v2", 0o755)
fd = libc.open(b"conf/v2/rules", 0o1101, 0o644)
libc.write(fd, b"expose-ro=/\\n", 12)
libc.close(fd)
libc.symlink(b"v2", b"conf/next")
print("DONE" if libc.rename(b"conf/next", b"conf/current") == 0 else "REFUSED")
"""


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cant_retarget_a_link_on_the_way_to_the_rule_file_natively(
    sb: Runner, py: Runner, project: Path, provider: str
) -> None:
    reason = unavailable_reason(provider)
    if reason is not None:
        pytest.skip(f"{provider} cannot run here: {reason}")
    import os

    (project / "conf" / "v1").mkdir(parents=True)
    reviewed = f"expose-rw=.\npython-api=ALLOW:native\npython-import=*\nos-sandbox={provider}\n"
    (project / "conf" / "v1" / "rules").write_text(reviewed)
    os.symlink("v1", project / "conf" / "current")
    os.symlink("conf/current/rules", project / ".py-sandboxes")
    (project / "app.py").write_text(RETARGET)
    # Control: under plain python the next run obeys conf/v2/rules.
    assert py("app.py").stdout == "DONE\n"
    assert "expose-ro=/" in _rules_shown(sb, "app.py")
    os.unlink(project / "conf" / "current")
    os.symlink("v1", project / "conf" / "current")
    (project / "conf" / "v2" / "rules").unlink()
    (project / "conf" / "v2").rmdir()
    result = sb("app.py")
    output = result.stdout + result.stderr
    if provider == "subprocess":  # no kernel layer: the trusted side sets it back at exit
        assert "a link on the way to a rule file, was changed" in result.stderr, output
    else:  # no kernel can keep a link the sandbox may write: nothing starts, and says why
        assert result.returncode == 255, output
        assert "the rules are read through the link 'conf/current'" in result.stderr, output
        assert not (project / "conf" / "v2").exists()
    assert os.readlink(project / "conf" / "current") == "v1", output
    assert "expose-ro=/" not in _rules_shown(sb, "app.py")


# Native code renames the directory holding an included rule file, then plants its own.
RENAME_HOLDER = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
moved = libc.rename(b"conf", b"old-conf") == 0
if moved:
    libc.mkdir(b"conf", 0o755)
    fd = libc.open(b"conf/rules", 0o1101, 0o644)
    libc.write(fd, b"expose-ro=/\\n", 12)
    libc.close(fd)
print("DONE" if moved else "REFUSED")
"""


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cant_move_the_directory_of_an_included_rule_file_natively(
    sb: Runner, py: Runner, project: Path, provider: str
) -> None:
    reason = unavailable_reason(provider)
    if reason is not None:
        pytest.skip(f"{provider} cannot run here: {reason}")
    import shutil

    def fresh() -> None:
        for name in ("conf", "old-conf"):
            shutil.rmtree(project / name, ignore_errors=True)
        (project / "conf").mkdir()
        (project / "conf" / "rules").write_text("python-api=ALLOW:native\npython-import=*\n")

    (project / ".py-sandboxes").write_text(
        f'expose-rw=.\ninclude "conf/rules"\nos-sandbox={provider}\n'
    )
    (project / "app.py").write_text(RENAME_HOLDER)
    fresh()
    assert py("app.py").stdout == "DONE\n"  # the control: the next run would obey it
    assert "expose-ro=/" in (project / "conf" / "rules").read_text()
    fresh()
    result = sb("app.py")
    if provider == "subprocess":  # no kernel layer: the trusted side sets it back at exit
        assert "conf/rules was changed while the program ran" in result.stderr
    else:  # a mount point: the kernel refuses to move it
        assert result.stdout == "REFUSED\n", result.stderr
        assert not (project / "old-conf").exists()
    assert (project / "conf" / "rules").read_text().startswith("python-api=ALLOW:native")


def test_cant_plant_a_rule_file_through_a_descriptor_of_a_directory_beyond_path_max(
    sb: Runner, py: Runner, project: Path
) -> None:
    # In a directory whose real path is a few bytes short of PATH_MAX, notes links to
    # tools/.py-sandboxes; the C FileIO writes /proc/self/fd/<O_PATH of it>/notes. The
    # guard's lstat of "<4,093 bytes>/notes" failed with ENAMETOOLONG, taken for "missing".

    (project / "tools").mkdir()
    (project / "tools" / "report.py").write_text("print('report')\n")
    beyond_path_max(project, "deep", "notes", str(project / "tools" / ".py-sandboxes"), 4093)
    (project / ".py-sandboxes").write_text("expose-rw=.\npython-import=*\n")
    (project / "app.py").write_text(
        "import _io, os\n"
        "fd = os.open('deep', os.O_PATH)\n"
        "try:\n"
        "    _io.FileIO(f'/proc/self/fd/{fd}/notes', 'w').write(b'expose-ro=/\\n')\n"
        "    print('DONE')\n"
        "except OSError as exc:\n"
        "    print('REFUSED', type(exc).__name__, exc)\n"
    )
    planted = project / "tools" / ".py-sandboxes"
    assert py("app.py").stdout == "DONE\n"
    assert planted.exists()
    planted.unlink()
    result = sb("app.py")
    assert "REFUSED RulePermissionError" in result.stdout, result.stdout + result.stderr
    assert "ENAMETOOLONG" in result.stdout
    assert not planted.exists()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cant_plant_a_rule_file_natively_for_another_scripts_run(
    sb: Runner, py: Runner, project: Path, provider: str
) -> None:
    # expose-rw=./tools: native code makes tools/.py-sandboxes, where this run's search
    # never looked (main.py is in the project), but `python-sb tools/report.py` will.
    reason = unavailable_reason(provider)
    if reason is not None:
        pytest.skip(f"{provider} cannot run here: {reason}")
    tools = project / "tools"
    tools.mkdir()
    (tools / "deeper").mkdir()
    (tools / "report.py").write_text("print('report')\n")
    (project / "main.py").write_text(_native(PLANT, b"expose-ro=../..\n"))
    reviewed = (
        "expose-ro=.\nexpose-rw=./tools\npython-api=ALLOW:native\npython-import=*\n"
        f"os-sandbox={provider}\n"
    )
    (project / ".py-sandboxes").write_text(reviewed)
    for place in ("tools/.py-sandboxes", "tools/deeper/.py-sandboxes"):
        planted = project / place
        assert py("main.py", place).stdout == "DONE\n"
        assert place in _rules_shown(sb, place.replace(".py-sandboxes", "report.py"))
        planted.unlink()
        result = sb("main.py", place)
        assert result.stdout == "DONE\n", result.stderr  # no kernel refuses a new name there
        assert not planted.exists(), f"{place} stayed"
        assert f"{place} was made or changed while the program ran" in result.stderr
        assert (project / (place + ".planted")).read_text() == "expose-ro=../..\n"
    assert "tools/.py-sandboxes" not in _rules_shown(sb, "tools/report.py")


def test_cant_give_another_scripts_rule_file_an_include_natively(
    sb: Runner, py: Runner, project: Path
) -> None:
    # tools/.py-sandboxes (reviewed, unchanged) includes profiles/extra.profile, missing
    # yet: native code makes it, and `python-sb tools/report.py` would obey it.
    tools = project / "tools"
    (tools / "profiles").mkdir(parents=True)
    (tools / "report.py").write_text("print('report')\n")
    (tools / ".py-sandboxes").write_text('expose-ro=.\ninclude-optional "profiles/extra.profile"\n')
    (project / "main.py").write_text(_native(PLANT, b"expose-ro=/\n"))
    (project / ".py-sandboxes").write_text(
        "expose-ro=.\nexpose-rw=./tools\npython-api=ALLOW:native\npython-import=*\n"
    )
    include = tools / "profiles" / "extra.profile"
    assert py("main.py", "tools/profiles/extra.profile").stdout == "DONE\n"
    assert "expose-ro=/" in _rules_shown(sb, "tools/report.py")
    include.unlink()
    result = sb("main.py", "tools/profiles/extra.profile")
    assert result.stdout == "DONE\n", result.stderr
    assert not include.exists(), "the include made by the sandbox stayed"
    assert "tools/profiles/extra.profile, included by tools/.py-sandboxes" in result.stderr
    assert "expose-ro=/" not in _rules_shown(sb, "tools/report.py")
