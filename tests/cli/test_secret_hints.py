"""A refusal of a secret never hands the user a grant to paste.

For a file or variable the secret list knows (keys, credentials, ``/etc/shadow``, names
like ``*_TOKEN``), the refusal and the exit summary say it is a secret and point to the
deliberate way (the learned line, commented out; the docs), with no ``expose-ro=`` or
``env=`` line that would grant it by copy and paste.
"""

from __future__ import annotations

from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner


def _key(tmp_path: Path) -> Path:
    key = tmp_path / "home" / ".ssh" / "id_ed25519"
    key.parent.mkdir(parents=True)
    key.write_text("PRIVATE KEY")
    return key


def test_a_refused_key_file_says_secret_and_suggests_no_grant(
    sb: Runner, py: Runner, project: Path, tmp_path: Path
) -> None:
    key = _key(tmp_path)
    probe = f"print(open({str(key)!r}).read())"
    assert py("-c", probe).stdout == "PRIVATE KEY\n"  # the control: the key is readable
    (project / ".py-sandboxes").write_text("python-import=os\n")
    result = sb("-c", probe, env={"HOME": str(tmp_path / "home")})
    assert result.returncode == 1
    assert "PRIVATE KEY" not in result.stdout
    assert f"Reading '{key}' is refused: it holds a secret" in result.stderr
    assert "a deliberate edit of .py-sandboxes" in result.stderr
    assert "commented out; uncomment it only if" in result.stderr
    assert "docs/learning.md#secrets" in result.stderr
    assert "expose-ro=" not in result.stderr


def test_a_refused_system_secret_says_secret_and_suggests_no_grant(
    sb: Runner, project: Path
) -> None:
    (project / ".py-sandboxes").write_text("python-import=os\n")
    result = sb("-c", "open('/etc/shadow')")
    assert result.returncode == 1
    assert "Reading '/etc/shadow' is refused: it holds a secret" in result.stderr
    assert "expose-ro=/etc/shadow" not in result.stderr


def test_an_ordinary_refusal_still_gives_the_line_to_add(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text("python-import=os\n")
    result = sb("-c", "open('/etc/hostname')")
    assert "Add 'expose-ro=/etc/hostname' to .py-sandboxes to allow it." in result.stderr


SWALLOWED = """
for path in (KEY, "/etc/hostname"):
    try:
        open(path).read()
    except OSError:
        pass
"""


def test_the_exit_summary_names_a_secret_file_without_a_grant_to_paste(
    sb: Runner, project: Path, tmp_path: Path
) -> None:
    key = _key(tmp_path)
    (project / ".py-sandboxes").write_text("python-import=os\n")
    env = {"HOME": str(tmp_path / "home")}
    result = sb("-c", SWALLOWED.replace("KEY", repr(str(key))), env=env)
    assert result.returncode == 0, result.stderr
    secret = next(line for line in result.stderr.splitlines() if str(key) in line)
    assert "a secret, no grant suggested (see docs/learning.md#secrets)" in secret
    assert "expose-ro=" + str(key) not in result.stderr
    # The others keep their line to add.
    assert "add 'expose-ro=/etc/hostname' to .py-sandboxes" in result.stderr
