"""Where learned rules go: a new file, an edited one, pyproject.toml, and the lock."""

from __future__ import annotations

import os
from pathlib import Path

from learnlab import granted

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

EDITED = """\
# My reviewed rules for the report tool.
# Keep the data read-only: see TICKET-12.
expose-ro=./data.txt   # the input

# <learning_guard_files>
# </learning_guard_files>

python-import=json  # parsing
# <learning_guard_import>
# A comment inside the block stays where it is.
# </learning_guard_import>
"""


def test_relearning_keeps_every_line_and_adds_only_the_new_rules(sb: Runner, project: Path) -> None:
    (project / "data.txt").write_text("1")
    (project / "more.txt").write_text("2")
    (project / "app.py").write_text(
        "import json, csv\nopen('data.txt').read()\nopen('more.txt').read()\n"
    )
    rule_file = project / ".py-sandboxes"
    rule_file.write_text(EDITED)
    rule_file.chmod(0o600)
    refused = sb("app.py")
    assert refused.returncode == 1  # the rules exist: the run enforces them
    assert "python-import=csv" in refused.stderr

    result = sb("--learn", "app.py")
    assert result.returncode == 0, result.stderr
    new = rule_file.read_text().splitlines()
    old = EDITED.splitlines()
    kept = iter(new)
    assert all(line in kept for line in old), "every old line is kept, in order"
    added = [line for line in new if line not in old]
    assert [line for line in added if not line.startswith("#")] == [
        "expose-ro=./more.txt  # learned: read by app.py:3",
        "python-import=csv  # learned: imported by app.py:1",
    ]
    assert (project / ".py-sandboxes.old").read_text() == EDITED
    assert rule_file.stat().st_mode & 0o777 == 0o600
    assert sb("app.py").returncode == 0  # the rules now cover the run

    again = sb("--learn", "app.py")
    assert again.returncode == 0
    assert "nothing new to learn" in again.stderr
    assert not (project / ".py-sandboxes.old_1").exists()


def test_learn_false_refuses_a_learning_run_and_names_its_line(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text("expose-ro=.\nlearn=false\n")
    result = sb("--learn", "-c", "print('ran')")
    assert result.returncode == 255
    assert ".py-sandboxes(2): learning is locked by learn=false" in result.stderr
    assert result.stdout == ""
    (project / "other.rules").write_text("learn=out.rules\n")
    (project / ".py-sandboxes").write_text('include "other.rules"\nlearn=false\n')
    result = sb("-c", "print('ran')")
    assert result.returncode == 255
    assert "learning is locked by learn=false, but requested by 'learn=out.rules'" in (
        result.stderr
    )


def test_learn_to_another_file(sb: Runner, project: Path) -> None:
    (project / "data.txt").write_text("1")
    (project / ".py-sandboxes").write_text("python-import=csv\n")
    result = sb("--learn=learned.rules", "-c", "import csv; open('data.txt').read()")
    assert result.returncode == 0, result.stderr
    assert (project / ".py-sandboxes").read_text() == "python-import=csv\n"
    assert granted(project / "learned.rules") == ["expose-ro=./data.txt"]


def test_learn_key_in_the_rules_turns_learning_on(sb: Runner, project: Path) -> None:
    (project / "data.txt").write_text("1")
    (project / ".py-sandboxes").write_text("learn=learned.rules\n")
    result = sb("-c", "open('data.txt').read(); print('read')")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "read\n"
    assert granted(project / "learned.rules") == ["expose-ro=./data.txt"]
    assert "remove 'learn=learned.rules' (.py-sandboxes(1))" in result.stderr


def test_learning_into_pyproject(sb: Runner, project: Path) -> None:
    (project / "data.txt").write_text("1")
    pyproject = project / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "demo"  # the name\n\n[tool.py-sandboxes]\n'
        'python-import = ["json"]  # reviewed\n'
    )
    result = sb("--learn", "-c", "import json, csv; open('data.txt').read()")
    assert result.returncode == 0, result.stderr
    text = pyproject.read_text()
    assert 'name = "demo"  # the name' in text
    assert '"csv", # learned: imported by <string>:1' in text
    assert '"./data.txt", # learned: read by <string>:1' in text
    assert sb("-c", "import json, csv; open('data.txt').read()").returncode == 0


def test_a_rule_file_that_cannot_be_written_loses_nothing(sb: Runner, project: Path) -> None:
    (project / "data.txt").write_text("1")
    (project / "taken").mkdir()  # a directory where the rule file should go
    result = sb("--learn=taken", "-c", "open('data.txt').read(); print('ran')")
    assert result.returncode == 0
    assert result.stdout == "ran\n"
    assert "the rules could not be written to taken" in result.stderr
    assert "\nexpose-ro=./data.txt\n" in result.stderr  # printed instead: nothing is lost


def test_a_read_only_line_is_not_contradicted(sb: Runner, project: Path) -> None:
    (project / "data").mkdir()
    (project / ".py-sandboxes").write_text("expose-ro=./data  # reviewed\n")
    result = sb("--learn", "-c", "open('data/new.txt', 'w').write('x')")
    assert result.returncode == 0, result.stderr
    assert "'expose-ro=./data' is in the file: change it to 'expose-rw=./data'" in result.stderr
    assert granted(project / ".py-sandboxes") == ["expose-ro=./data"]
    assert sb("-c", "print('still parses')").stdout == "still parses\n"


def test_cant_write_a_rule_file_even_while_learning(sb: Runner, py: Runner, project: Path) -> None:
    (project / "sub").mkdir()
    code = (
        "import sys\n"
        "for target in ('.py-sandboxes', 'sub/.py-sandboxes'):\n"
        "    try:\n"
        "        open(target, 'a').write('expose-rw=/\\n')\n"
        "        print('WROTE', target)\n"
        "    except OSError as exc:\n"
        "        print('REFUSED', target, type(exc).__name__)\n"
    )
    assert "WROTE sub/.py-sandboxes" in py("-c", code).stdout  # the probe works unsandboxed
    (project / "sub" / ".py-sandboxes").unlink()
    (project / ".py-sandboxes").unlink()
    result = sb("--learn", "-c", code)
    assert "REFUSED .py-sandboxes RulePermissionError" in result.stdout, result.stderr
    assert "REFUSED sub/.py-sandboxes RulePermissionError" in result.stdout
    assert not (project / "sub" / ".py-sandboxes").exists()
    assert "expose-rw=/" not in (project / ".py-sandboxes").read_text()


def test_a_rule_file_changed_during_the_run_is_not_built_upon(sb: Runner, project: Path) -> None:
    (project / "data.txt").write_text("1")
    rule_file = project / ".py-sandboxes"
    rule_file.write_text("python-import=subprocess\n")
    # Outside the Python layer (a shell), a learning program can rewrite its rule file.
    code = (
        "import subprocess\n"
        "subprocess.run(['sh', '-c', 'echo expose-rw=/ >> .py-sandboxes'], check=True)\n"
        "open('data.txt').read()\n"
    )
    result = sb("--learn", "-c", code, env={"PATH": os.environ.get("PATH", "")})
    assert result.returncode == 0, result.stderr
    # The reviewed rules are put back, the changed ones kept aside, nothing learned added.
    assert ".py-sandboxes was changed while the program ran" in result.stderr
    assert "the program changed the rules of the next run (above): nothing is written" in (
        result.stderr
    )
    assert "\nexpose-ro=./data.txt\n" in result.stderr  # shown, not written
    assert rule_file.read_text() == "python-import=subprocess\n"
    planted = project / ".py-sandboxes.planted"
    assert planted.read_text() == "python-import=subprocess\nexpose-rw=/\n"
    assert not (project / ".py-sandboxes.old").exists()


def test_cant_plant_a_rule_file_under_the_name_given(sb: Runner, py: Runner, project: Path) -> None:
    # --pysandboxes-config=app.rules looks next to the program first: a sandbox that may
    # write there planted app.rules (os-sandbox=none) for the next run.
    (project / "scripts").mkdir()
    (project / "app.rules").write_text("expose-rw=./scripts\n")
    code = (
        "import os\n"
        "here = os.path.dirname(os.path.abspath(__file__))\n"
        "try:\n"
        "    open(os.path.join(here, 'app.rules'), 'w').write('os-sandbox=none\\n')\n"
        "    print('planted')\n"
        "except OSError as exc:\n"
        "    print('refused', type(exc).__name__)\n"
    )
    (project / "scripts" / "app.py").write_text(code)
    assert py("scripts/app.py").stdout == "planted\n"
    (project / "scripts" / "app.rules").unlink()
    (project / "app.rules").write_text("expose-rw=./scripts\npython-import=os\n")
    result = sb("--pysandboxes-config=app.rules", "scripts/app.py")
    assert result.stdout == "refused RulePermissionError\n", result.stderr
    assert not (project / "scripts" / "app.rules").exists()
