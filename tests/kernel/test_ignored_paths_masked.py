"""What ``ignore=`` hides stays hidden from native code too: under a kernel provider each
ignored path found at start is covered in the sandbox's mount namespace (a file by
``/dev/null``, a directory by an empty read-only ``tmpfs``), so the C library's ``open``
reads nothing there, however the path is reached (a rename of its directory, a link, a
name longer than ``PATH_MAX``). Each probe first reads the secret without the sandbox.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kernelprobes import NATIVE

from longpaths import beyond_path_max
from pysandboxes._host.select import unavailable_reason

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

PROVIDERS = ("landlock", "unshare", "bwrap")
SECRET = "s3cr3t-api-key"

READ_NATIVELY = """
def read(path):
    fd = libc.open(path.encode(), 0)
    if fd < 0:
        return "REFUSED " + errno.errorcode[ctypes.get_errno()]
    buffer = ctypes.create_string_buffer(100)
    count = libc.read(fd, buffer, 100)
    libc.close(fd)
    return "READ " + buffer.raw[: max(count, 0)].decode()
for path in sys.argv[1:]:
    print(read(path))
"""

RENAME_THEN_READ = """
moved = libc.rename(b"app/secrets", b"app/public") == 0
print("moved" if moved else "not moved")
fd = libc.open(b"app/public/api.key" if moved else b"app/secrets/api.key", 0)
buffer = ctypes.create_string_buffer(100)
count = libc.read(fd, buffer, 100) if fd >= 0 else -1
print("READ " + buffer.raw[: max(count, 0)].decode())
"""


def _skip_unless(provider: str) -> None:
    reason = unavailable_reason(provider)
    if reason is not None:
        pytest.skip(f"{provider} cannot run here: {reason}")


def _rules(project: Path, provider: str, *lines: str) -> None:
    body = "\n".join(("python-api=ALLOW:native", "python-import=*", *lines))
    (project / ".py-sandboxes").write_text(f"{body}\nos-sandbox={provider}\n")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cant_read_an_ignored_file_or_directory_natively(
    sb: Runner, py: Runner, project: Path, provider: str
) -> None:
    _skip_unless(provider)
    (project / "conf").mkdir()
    (project / "conf" / "api.key").write_text(SECRET)
    (project / "conf" / "app.toml").write_text("name = 'app'")
    (project / "vault").mkdir()
    (project / "vault" / "keys.db").write_text(SECRET)
    os.symlink("vault", project / "%+f")  # the route SQLite's URI decoding took
    _rules(project, provider, "expose-ro=.", "ignore=conf/*.key", "ignore=vault")
    (project / "probe.py").write_text(NATIVE + READ_NATIVELY)
    paths = ("conf/api.key", "vault/keys.db", "%+f/keys.db", "conf/app.toml")
    control = py("probe.py", *paths).stdout.splitlines()
    assert control == [f"READ {SECRET}"] * 3 + ["READ name = 'app'"]
    result = sb("probe.py", *paths)
    lines = result.stdout.splitlines()
    assert len(lines) == 4, result.stderr
    assert SECRET not in result.stdout, result.stdout
    # /dev/null: the file is there, holding nothing (or refused, where Landlock sees it)
    assert lines[0] == "READ " or lines[0].startswith("REFUSED")
    assert lines[1].startswith("REFUSED")  # an empty directory
    assert lines[2].startswith("REFUSED")
    assert lines[3] == "READ name = 'app'"  # the rest of the directory as it is


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cant_rename_an_ignored_file_out_of_its_pattern_natively(
    sb: Runner, py: Runner, project: Path, provider: str
) -> None:
    # ignore=**/secrets/*.key: renamed to app/public/, the key no longer matches.
    _skip_unless(provider)

    def fresh() -> None:
        for name in ("secrets", "public"):
            folder = project / "app" / name
            if folder.exists():
                for child in folder.iterdir():
                    child.unlink()
                folder.rmdir()
        (project / "app" / "secrets").mkdir(parents=True)
        (project / "app" / "secrets" / "api.key").write_text(SECRET)

    fresh()
    _rules(project, provider, "expose-ro=.", "expose-rw=./app", "ignore=**/secrets/*.key")
    (project / "probe.py").write_text(NATIVE + RENAME_THEN_READ)
    assert py("probe.py").stdout == f"moved\nREAD {SECRET}\n"
    fresh()
    result = sb("probe.py")
    assert SECRET not in result.stdout, result.stdout + result.stderr
    # The mask moved with its directory; the host's file itself is unchanged.
    kept = [project / "app" / name / "api.key" for name in ("secrets", "public")]
    assert [path.read_text() for path in kept if path.exists()] == [SECRET]


def test_show_layers_says_the_kernel_masks_ignored_paths(sb: Runner, project: Path) -> None:
    import json

    (project / ".py-sandboxes").write_text("expose-ro=.\nignore=*.key\nos-sandbox=landlock\n")
    report = json.loads(sb("--show-layers=json").stdout)
    row = next(r for r in report["rules"] if r["rule"] == "ignore=*.key")
    assert row["kernel"] == "masked in the sandbox's mount namespace (what exists at start)"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cant_read_an_anchored_ignored_file_through_a_linked_project_natively(
    sb: Runner, py: Runner, tmp_path: Path, provider: str
) -> None:
    # Deployed as work/app -> releases/v1: the pattern is anchored where the link leads.
    _skip_unless(provider)
    release = tmp_path / "releases" / "v1"
    (release / "conf").mkdir(parents=True)
    (release / "conf" / "api.key").write_text(SECRET)
    (tmp_path / "work").mkdir()
    os.symlink(release, tmp_path / "work" / "app")
    app = tmp_path / "work" / "app"
    _rules(app, provider, "expose-ro=.", "ignore=conf/*.key")
    (app / "probe.py").write_text(NATIVE + READ_NATIVELY)
    from runner import Runner as Run

    plain = Run([py.command[0]], tmp_path / "work")
    assert plain("app/probe.py", "app/conf/api.key").stdout == f"READ {SECRET}\n"
    result = Run(sb.command, tmp_path / "work")("app/probe.py", "app/conf/api.key")
    assert result.stdout.startswith(("READ \n", "REFUSED")), result.stderr
    assert SECRET not in result.stdout


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cant_read_an_ignored_file_through_a_path_beyond_path_max_natively(
    sb: Runner, py: Runner, project: Path, provider: str
) -> None:
    # In a directory whose real path is a few bytes short of PATH_MAX, reached through a
    # short link, notes -> <abs>/conf/api.key: the guard's lstat of the long real path
    # failed with ENAMETOOLONG. The kernel's mask does not care how the file is named.
    _skip_unless(provider)
    (project / "conf").mkdir()
    (project / "conf" / "api.key").write_text(SECRET)
    beyond_path_max(project, "deep", "notes", str(project / "conf" / "api.key"), 4085)
    _rules(project, provider, "expose-ro=.", "ignore=conf/*.key")
    (project / "probe.py").write_text(NATIVE + READ_NATIVELY)
    assert py("probe.py", "deep/notes").stdout == f"READ {SECRET}\n"
    result = sb("probe.py", "deep/notes")
    assert result.stdout.startswith(("READ \n", "REFUSED")), result.stderr
    assert SECRET not in result.stdout
