"""Rule files inside a read-write exposure: kept read-only by the kernel, not the Python layer.

Landlock cannot take one file back from a directory it lets the sandbox write: with
``expose-rw=.``, native code could rewrite ``./.py-sandboxes`` and the next run would obey
it. Where the provider can make a mount namespace (``landlock`` and ``unshare`` with a user
namespace, ``bwrap`` by its view), each rule file is bound read-only onto itself: writes
fail with ``EROFS``, removing or replacing it with ``EBUSY``. Where none can
(``subprocess``), the trusted side compares the rule files at exit with what it read at
start, puts the reviewed version back and says so. ``--show-layers`` says which applies.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kernelprobes import NATIVE

from pysandboxes._host.select import unavailable_reason

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

O_WRONLY, O_CREAT, O_TRUNC, O_APPEND = 0o1, 0o100, 0o1000, 0o2000

#: Every native way to change what a rule file says, each printing DONE or REFUSED.
ATTACKS = {
    "append": (
        f"fd = libc.open(TARGET, {O_WRONLY | O_APPEND})\n"
        "outcome(fd)\n"
        "libc.write(fd, b'expose-ro=/\\n', 12)"
    ),
    "truncate": "outcome(libc.truncate(TARGET, 0))",
    "open_truncate": f"outcome(libc.open(TARGET, {O_WRONLY | O_TRUNC}))",
    "chmod": "outcome(libc.chmod(TARGET, 0o666))",
    "unlink": "outcome(libc.unlink(TARGET))",
    "rename_away": "outcome(libc.rename(TARGET, b'moved-away'))",
    "rename_over": (
        f"fd = libc.open(b'staged', {O_WRONLY | O_CREAT}, 0o644)\n"
        "libc.write(fd, b'expose-ro=/\\n', 12)\n"
        "libc.close(fd)\n"
        "outcome(libc.rename(b'staged', TARGET))"
    ),
    "symlink_over": (
        "libc.symlink(b'/etc/hostname', b'link')\noutcome(libc.rename(b'link', TARGET))"
    ),
}
RULES = "expose-rw=.\npython-api=ALLOW:native\npython-import=*\n"
#: Every attack on the rule file; two on an include, which is held the same way.
CASES = [(attack, ".py-sandboxes") for attack in sorted(ATTACKS)] + [
    ("append", "extra.profile"),
    ("rename_over", "extra.profile"),
]


def _probe(project: Path, attack: str, target: str) -> str:
    body = f"TARGET = {target.encode()!r}\n" + ATTACKS[attack] + "\n"
    (project / "probe.py").write_text(NATIVE + body)
    return "probe.py"


def _control(py: Runner, project: Path, attack: str, target: str) -> None:
    before = (project / target).read_bytes()
    assert py(_probe(project, attack, target)).stdout == "DONE\n"
    path = project / target
    changed = not path.exists() or path.is_symlink() or path.read_bytes() != before
    assert changed or path.stat().st_mode & 0o777 == 0o666, "the control changed nothing"


def _setup(project: Path, provider: str) -> str:
    reason = unavailable_reason(provider)
    if reason is not None:
        pytest.skip(f"{provider} cannot run here: {reason}")
    for name in ("moved-away", "staged", "link", ".py-sandboxes", "extra.profile"):
        (project / name).unlink(missing_ok=True)  # never write through a control's link
    for planted in project.glob("*.planted*"):
        planted.unlink()
    rules = RULES + f"os-sandbox={provider}\n" + 'include "extra.profile"\n'
    (project / ".py-sandboxes").write_text(rules)
    (project / ".py-sandboxes").chmod(0o644)
    (project / "extra.profile").write_text("python-import=json\n")
    (project / "extra.profile").chmod(0o644)
    return rules


@pytest.mark.parametrize(("attack", "target"), CASES)
@pytest.mark.parametrize("provider", ["landlock", "unshare", "bwrap"])
def test_cant_change_a_rule_file_natively_inside_a_writable_exposure(
    sb: Runner, py: Runner, project: Path, provider: str, attack: str, target: str
) -> None:
    _setup(project, provider)
    _control(py, project, attack, target)
    rules = _setup(project, provider)
    result = sb(_probe(project, attack, target))
    assert result.stdout in ("REFUSED EROFS\n", "REFUSED EBUSY\n"), result.stderr
    assert (project / ".py-sandboxes").read_text() == rules
    assert (project / "extra.profile").read_text() == "python-import=json\n"
    assert (project / target).stat().st_mode & 0o777 == 0o644
    assert "changed while the program ran" not in result.stderr  # nothing to set back


@pytest.mark.parametrize(("attack", "target"), CASES)
def test_a_rule_file_changed_where_no_kernel_layer_refuses_is_set_back(
    sb: Runner, py: Runner, project: Path, attack: str, target: str
) -> None:
    # os-sandbox=subprocess: the Python layer alone, which native code does not ask.
    _setup(project, "subprocess")
    _control(py, project, attack, target)
    rules = _setup(project, "subprocess")
    result = sb(_probe(project, attack, target))
    assert result.stdout == "DONE\n", result.stderr  # nothing refused it...
    assert f"{target} was changed while the program ran" in result.stderr
    # ...and the trusted side put the reviewed version back.
    assert (project / ".py-sandboxes").read_text() == rules
    assert (project / "extra.profile").read_text() == "python-import=json\n"
    assert not (project / target).is_symlink()
    assert (project / target).stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize(
    ("provider", "kernel"),
    [
        ("landlock", "read-only bind (mount namespace) + Landlock"),
        ("unshare", "read-only bind (mount namespace) + Landlock"),
        ("bwrap", "read-only bind (mount namespace) + bwrap mount view + Landlock"),
        ("subprocess", ""),
    ],
)
def test_show_layers_says_how_the_rule_files_are_kept(
    sb: Runner, project: Path, provider: str, kernel: str
) -> None:
    # It once said Landlock protected them, whatever the exposures.
    _setup(project, provider)
    report = json.loads(sb("--show-layers=json").stdout)
    row = next(r for r in report["rules"] if r["rule"] == "the rule files cannot be changed")
    assert row["kernel"] == kernel
    if not kernel:
        assert "the trusted side compares them" in row["note"]
    planted = next(r for r in report["rules"] if r["rule"].startswith("no rule file can be"))
    assert "the trusted side moves a new rule file there aside" in planted["note"]
    lifetime = next(r for r in report["rules"] if r["rule"].startswith("nothing the program"))
    assert lifetime["kernel"] == "PID namespace"


SWAP = """
import os
project = os.getcwd()
outcome(libc.rename(project.encode(), (project + ".old").encode()))
libc.mkdir(project.encode(), 0o755)
fd = libc.open((project + "/.py-sandboxes").encode(), 0o101, 0o644)  # O_WRONLY | O_CREAT
libc.write(fd, b"expose-ro=/\\n", 12)
libc.close(fd)
"""


@pytest.mark.parametrize("provider", ["landlock", "unshare", "bwrap", "subprocess"])
def test_cant_swap_the_directory_holding_the_rule_file(
    sb: Runner, py: Runner, project: Path, provider: str
) -> None:
    # A read-only bind keeps the file, not its path: with the directory above writable,
    # the program moves the whole project away and makes a new one with its own rules.
    reason = unavailable_reason(provider)
    if reason is not None:
        pytest.skip(f"{provider} cannot run here: {reason}")
    moved = project.with_name(project.name + ".old")
    rules = "expose-ro=.\nexpose-rw=..\npython-api=ALLOW:native\npython-import=*\n"
    rules += f"os-sandbox={provider}\n"

    def reset() -> None:
        if moved.exists():
            for entry in project.iterdir():
                entry.unlink()
            project.rmdir()
            moved.rename(project)
        (project / ".py-sandboxes").write_text(rules)
        (project / "probe.py").write_text(NATIVE + SWAP)

    reset()
    assert py("probe.py").stdout == "DONE\n"
    assert "expose-ro=/" in sb("--show-rules").stdout  # the next run would obey it
    reset()
    result = sb("probe.py")
    assert (project / ".py-sandboxes").read_text() == rules
    if result.stdout == "REFUSED EBUSY\n":  # bwrap: the project is a mount of its own
        return
    assert result.stdout == "DONE\n", result.stderr  # the directory above is writable...
    assert ".py-sandboxes was changed while the program ran" in result.stderr  # ...and set back
    assert (project / ".py-sandboxes.planted").read_text() == "expose-ro=/\n"
