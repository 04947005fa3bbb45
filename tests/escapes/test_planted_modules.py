"""A module named like a standard one, planted next to the program, never runs unguarded.

Python puts the working directory (or the script's directory) first on ``sys.path``. The
sandbox itself imports standard modules (fnmatch, struct...) before its walls are up; a
planted ``fnmatch.py`` there would run with python-sb's rights. Each probe's planted module
writes a marker outside the project: plain python shows the file is importable, python-sb
must run the program without ever running it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner


@pytest.mark.parametrize(
    ("folder", "module"), [(".", "fnmatch"), ("scripts", "struct"), ("scripts", "shutil")]
)
def test_a_planted_standard_module_never_runs_before_the_walls(
    sb: Runner, py: Runner, project: Path, tmp_path: Path, folder: str, module: str
) -> None:
    marker = tmp_path / "outside-marker"
    place = project / folder
    place.mkdir(exist_ok=True)
    (place / f"{module}.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (place / "prog.py").write_text("print('program ok')\n")
    py("-c", f"import sys; sys.path.insert(0, {str(place)!r}); import {module}")
    assert marker.exists(), "the planted module is not importable: the probe proves nothing"
    marker.unlink()
    (project / ".py-sandboxes").write_text("expose-ro=.\npython-import=json\n")
    result = sb(f"{folder}/prog.py")
    assert result.stdout == "program ok\n", result.stderr
    assert not marker.exists()


def test_the_programs_listing_shows_only_what_the_rules_show(
    sb: Runner, py: Runner, project: Path
) -> None:
    # The program's directory is listed for the import system before the walls; that
    # listing must not show what the rules hide (here: a module no rule exposes).
    (project / "helper.py").write_text("print('helper ran')\n")
    (project / "hidden_helper.py").write_text("print('hidden ran')\n")
    (project / "prog.py").write_text(
        "import helper\ntry:\n    import hidden_helper\nexcept ImportError:\n"
        "    print('hidden not found')\n"
    )
    assert py("prog.py").stdout == "helper ran\nhidden ran\n"
    rules = "expose-ro=./prog.py\nexpose-ro=./helper.py\npython-import=helper, hidden_helper\n"
    (project / ".py-sandboxes").write_text(rules)
    result = sb("prog.py")
    assert result.stdout == "helper ran\nhidden not found\n", result.stderr


@pytest.mark.parametrize(
    ("entry", "module"), [("pp", "sitecustomize"), ("./pp", "ctypes"), ("pp/", "fnmatch")]
)
def test_nothing_in_a_forwarded_pythonpath_runs_before_the_walls(
    sb: Runner, project: Path, tmp_path: Path, entry: str, module: str
) -> None:
    # sitecustomize runs at start-up from any sys.path entry; a planted ctypes would be
    # what the kernel layer's own binding imports. PYTHONPATH waits for the walls.
    marker = tmp_path / "outside-marker"
    (project / "pp").mkdir()
    planted = project / "pp" / (f"{module}.py" if module != "ctypes" else "ctypes/__init__.py")
    planted.parent.mkdir(exist_ok=True)
    planted.write_text(f"open({str(marker)!r}, 'w').close()\nraise ImportError\n")
    (project / "prog.py").write_text("print('program ok')\n")
    rules = f"expose-ro=./prog.py\nenv=PYTHONPATH={project}/{entry}\npython-import=json\n"
    (project / ".py-sandboxes").write_text(rules)
    result = sb("prog.py")
    assert "program ok" in result.stdout, result.stderr
    assert not marker.exists()


def test_a_forwarded_pycache_prefix_feeds_nothing_to_the_start_up(
    sb: Runner, project: Path
) -> None:
    # A bytecode cache the sandbox may write, used by the next start-up before the walls,
    # would run whatever .pyc a sandbox planted there for a module the start-up imports.
    (project / "cache").mkdir()
    rules = "expose-rw=./cache\nenv=PYTHONPYCACHEPREFIX=${PWD}/cache\npython-import=sys\n"
    (project / ".py-sandboxes").write_text(rules)
    code = "import sys; print(sys.pycache_prefix)"
    result = sb("-c", code, env={"PWD": str(project)})
    assert result.stdout == f"{project}/cache\n", result.stderr  # the program still gets it
    written = [str(p) for p in (project / "cache").rglob("*.pyc")]
    assert not [p for p in written if "pysandboxes" in p], written


def test_a_pycache_prefix_option_feeds_nothing_to_the_start_up(
    sb: Runner, py: Runner, project: Path
) -> None:
    # -X pycache_prefix= is PYTHONPYCACHEPREFIX given as an option: the start-up would
    # read (and write) there the cache of every module it imports before the walls.
    (project / "cache").mkdir()
    (project / ".py-sandboxes").write_text("expose-rw=./cache\npython-import=sys\n")
    prefix = f"pycache_prefix={project}/cache"
    py("-X", prefix, "-c", "import json")
    assert list((project / "cache").rglob("*.pyc")), "no cache written: the probe proves nothing"
    for cached in (project / "cache").rglob("*.pyc"):
        cached.unlink()
    result = sb("-X", prefix, "-c", "import sys; print(sys.pycache_prefix)")
    assert result.stdout == f"{project}/cache\n", result.stderr  # the program still gets it
    assert not list((project / "cache").rglob("*.pyc"))


def test_a_loader_variable_naming_a_writable_place_stops_the_run(sb: Runner, project: Path) -> None:
    (project / "rw").mkdir()
    rules = "expose-rw=./rw\nenv=LD_PRELOAD=${PWD}/rw/evil.so\n"
    (project / ".py-sandboxes").write_text(rules)
    result = sb("-c", "print('ran')", env={"PWD": str(project)})
    assert result.returncode == 255
    assert "LD_PRELOAD names" in result.stderr
    assert "where the sandbox may write" in result.stderr
    assert "ran" not in result.stdout


EVIL_LIBRARY = r"""
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
    FILE *out = fopen(MARKER, "w");
    if (out) fclose(out);
}
"""


@pytest.mark.parametrize("value", [":/opt/none", "/opt/none::/usr/lib", "lib"])
def test_a_loader_variable_reading_the_working_directory_stops_the_run(
    sb: Runner, py: Runner, project: Path, tmp_path: Path, value: str
) -> None:
    # "export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/opt/lib" with the variable unset gives an
    # empty first entry: the loader searches the working directory, which a sandbox
    # with expose-rw=. fills with a libm.so.6 that the next start-up loads before the walls.
    import shutil
    import subprocess

    compiler = shutil.which("cc") or shutil.which("gcc")
    libm = Path("/lib/x86_64-linux-gnu/libm.so.6")
    if compiler is None or not libm.exists():
        pytest.skip("no C compiler or no x86-64 libm to stand in for")
    marker = tmp_path / "outside-marker"
    source = tmp_path / "evil.c"
    source.write_text(EVIL_LIBRARY.replace("MARKER", f'"{marker}"'))
    place = project / ("lib" if value == "lib" else ".")
    place.mkdir(exist_ok=True)
    command = [compiler, "-shared", "-fPIC", "-o", str(place / "libm.so.6"), str(source)]
    command += [f"-Wl,--filter={libm}", "-Wl,-soname,libm.so.6"]
    subprocess.run(command, check=True)
    env = {"LD_LIBRARY_PATH": value}
    py("-c", "pass", env=env)
    assert marker.exists(), "the planted library is not loaded: the probe proves nothing"
    marker.unlink()
    # The value is the rule's own: python-sb's environment must not load it itself.
    (project / ".py-sandboxes").write_text(f"expose-rw=.\nenv=LD_LIBRARY_PATH={value}\n")
    result = sb("-c", "print('ran')")
    assert result.returncode == 255, result.stderr
    assert "LD_LIBRARY_PATH names" in result.stderr
    assert "ran" not in result.stdout
    assert not marker.exists()


@pytest.mark.parametrize("token", ["$PLATFORM", "$LIB"])
def test_a_loader_token_naming_a_writable_place_stops_the_run(
    sb: Runner, py: Runner, project: Path, tmp_path: Path, token: str
) -> None:
    # The loader expands $PLATFORM (x86_64) and $LIB (lib64, lib/x86_64-linux-gnu...) in
    # LD_PRELOAD and LD_LIBRARY_PATH: LD_PRELOAD=<project>/$PLATFORM/evil.so with
    # expose-rw=./x86_64 loads, on the next start-up and before the walls, what the
    # sandbox put there.
    import shutil
    import subprocess

    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    marker = tmp_path / "outside-marker"
    source = tmp_path / "evil.c"
    source.write_text(EVIL_LIBRARY.replace("MARKER", f'"{marker}"'))
    library = tmp_path / "evil.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    value = f"{project}/{token}/evil.so"
    # glibc names x86-64 machines by their CPU's level: x86_64, or haswell, xeon_phi.
    platforms = ("x86_64", "haswell", "xeon_phi", "aarch64")
    for directory in (*platforms, "lib", "lib64", "lib/x86_64-linux-gnu"):
        (project / directory).mkdir(parents=True, exist_ok=True)
        shutil.copy(library, project / directory / "evil.so")
    py("-c", "pass", env={"LD_PRELOAD": value})
    assert marker.exists(), "the planted library is not loaded: the probe proves nothing"
    marker.unlink()
    writable = "".join(f"expose-rw=./{d}\n" for d in (*platforms, "lib", "lib64"))
    (project / ".py-sandboxes").write_text(f"expose-ro=.\n{writable}env=LD_PRELOAD={value}\n")
    result = sb("-c", "print('ran')")
    assert result.returncode == 255, result.stderr
    assert "LD_PRELOAD names a directory in" in result.stderr
    assert "ran" not in result.stdout
    assert not marker.exists()


@pytest.mark.parametrize("where", ["pythonpath", "site-packages"])
def test_a_writable_module_search_path_stops_the_run(
    sb: Runner, py: Runner, project: Path, tmp_path: Path, where: str
) -> None:
    # A directory on the module search path (PYTHONPATH, site-packages, the directory of
    # a project installed in editable mode) is read at the next start-up, by python-sb
    # itself first: a sitecustomize.py planted there runs with the user's rights.
    import site
    import sys

    marker = tmp_path / "outside-marker"
    (project / "payload.txt").write_text(f"open({str(marker)!r}, 'w').close()\n")
    plant = "open('sitecustomize.py', 'w').write(open('payload.txt').read())\nprint('planted')\n"
    (project / "plant.py").write_text(plant)
    env = {"PYTHONPATH": str(project)} if where == "pythonpath" else {}
    if where == "pythonpath":
        py("plant.py")
        py("-c", "pass", env=env)
        assert marker.exists(), "sitecustomize.py did not run: the probe proves nothing"
        marker.unlink()
        (project / "sitecustomize.py").unlink()
        rules = "expose-rw=.\n"
    else:
        site_packages = next(p for p in sys.path if p.endswith("site-packages"))
        assert site_packages in [*site.getsitepackages(), site_packages]
        rules = f"expose-rw=.\nexpose-rw={site_packages}\n"
    (project / ".py-sandboxes").write_text(rules)
    result = sb("plant.py", env=env)
    assert result.returncode == 255, result.stderr
    assert "where python-sb's own interpreter loads code from" in result.stderr
    assert "planted" not in result.stdout
    assert not (project / "sitecustomize.py").exists()


def test_a_user_site_the_sandbox_may_write_is_not_read_at_start_up(
    sb: Runner, project: Path
) -> None:
    (project / "home").mkdir()
    rules = "expose-rw=./home\nenv=HOME=${PWD}/home\npython-import=sys\n"
    (project / ".py-sandboxes").write_text(rules)
    result = sb("-c", "import sys; print(sys.flags.no_user_site)", env={"PWD": str(project)})
    assert result.stdout == "1\n", result.stderr


def test_an_inherited_descriptor_does_not_reach_the_sandbox(
    sb: Runner, py: Runner, project: Path, tmp_path: Path
) -> None:
    # A descriptor python-sb inherited (on a file outside the rules) would be a way to it
    # that no rule judged; the kernel layer does not check descriptors already open.
    import os
    import subprocess

    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    code = (
        "import os, sys\ntry:\n    print(os.read(int(sys.argv[1]), 100))\n"
        "except OSError as exc:\n    print(exc)\n"
    )
    (project / "app.py").write_text(code)
    (project / ".py-sandboxes").write_text("expose-ro=./app.py\npython-import=os, sys\n")
    fd = os.open(secret, os.O_RDONLY)
    try:
        for runner, leaks in ((py, True), (sb, False)):
            result = subprocess.run(
                [*runner.command, "app.py", str(fd)],
                cwd=project,
                capture_output=True,
                text=True,
                pass_fds=(fd,),
                check=False,
            )
            assert ("TOPSECRET" in result.stdout) is leaks, result.stdout + result.stderr
    finally:
        os.close(fd)


def test_the_program_cannot_point_openssl_at_a_module_it_wrote(sb: Runner, project: Path) -> None:
    # OpenSSL reads OPENSSL_CONF when it first starts, after the walls: a configuration
    # naming a module the program wrote would load it (native code without a grant).
    code = (
        "import os\ntry:\n    os.environ['OPENSSL_CONF'] = '/tmp/x.cnf'\n"
        "except PermissionError as exc:\n    print('REFUSED', exc)\n"
    )
    (project / ".py-sandboxes").write_text("expose-ro=.\npython-import=os\n")
    result = sb("-c", code)
    assert "REFUSED Setting OPENSSL_CONF is refused" in result.stdout, result.stderr
