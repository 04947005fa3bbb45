"""The exit summary names refusals that changed what the program saw, not probes.

Libraries probe for files and variables that are not there (sysconfig's ``Modules/Setup``,
``NUMPY_*`` and ``SYMPY_*`` settings): refused by the sandbox, the program meets what it
would have met without it. The summary leaves those out; the log keeps every one.
"""

from __future__ import annotations

import json
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner

PROBES = """
import os
try:
    open("/etc/no-such-file-here").read()
except OSError:
    pass
os.environ.get("PYSANDBOXES_NEVER_SET")
print("probed")
"""


def test_probes_of_what_is_not_there_are_logged_but_not_summed_up(
    sb: Runner, project: Path
) -> None:
    rules = "expose-ro=.\npython-import=os\naudit-log=audit.jsonl\n"
    (project / ".py-sandboxes").write_text(rules)
    result = sb("-c", PROBES)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "probed\n"
    assert "refused by the sandbox" not in result.stderr, result.stderr
    log = [json.loads(line) for line in (project / "audit.jsonl").read_text().splitlines()]
    refused = {(line["kind"], line["target"]) for line in log if line["verdict"] == "refused"}
    assert ("file", "/etc/no-such-file-here") in refused
    assert ("env", "PYSANDBOXES_NEVER_SET") in refused


def test_a_swallowed_refusal_of_what_is_there_is_still_summed_up(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text("expose-ro=.\n")
    result = sb("-c", "try:\n    open('/etc/hostname').read()\nexcept OSError:\n    pass\n")
    assert result.returncode == 0, result.stderr
    assert "1 access was refused by the sandbox (1 file)" in result.stderr, result.stderr


COUNTED = """
import os
for name in ("/etc/hostname", "/etc/hostname", "/etc/hosts"):  # a repeat, two files
    try:
        open(name).read()
    except OSError:
        pass
for number in range(NUMBER):
    try:
        open(f"data/f{number}.txt").read()
    except OSError:
        pass
"""


def test_the_summary_lists_up_to_ten_refusals_and_counts_only_the_others_as_more(
    sb: Runner, project: Path
) -> None:
    (project / ".py-sandboxes").write_text("python-import=os\n")
    (project / "data").mkdir()
    for number in range(12):  # there, but not exposed: each refusal changes what it reads
        (project / "data" / f"f{number}.txt").write_text("x")
    # Three refused reads of two files: both listed, no "more" for the repeat.
    three = sb("-c", COUNTED.replace("NUMBER", "0"))
    assert three.returncode == 0, three.stderr
    assert "3 accesses were refused" in three.stderr, three.stderr
    assert "/etc/hostname" in three.stderr
    assert "/etc/hosts" in three.stderr
    assert "more" not in three.stderr, three.stderr
    # Fourteen distinct refusals: ten listed, "and 4 more".
    many = sb("-c", COUNTED.replace("NUMBER", "12"))
    assert many.returncode == 0, many.stderr
    listed = [line for line in many.stderr.splitlines() if "to allow it" in line]
    assert len(listed) == 10, many.stderr
    assert "  ... and 4 more" in many.stderr, many.stderr


LIBRARY = """
import os


def optional_config():
    return os.path.exists("/etc/hostname")  # a library's optional file: it copes
"""
PROGRAM = """
import os, sys
sys.path.insert(0, "vendor/site-packages")
import probelib
print(probelib.optional_config())
if USER_LOOKS:
    print(os.path.exists("/etc/hosts"))
"""


def test_a_librarys_optional_probes_are_one_harmless_line_not_a_hint_each(
    sb: Runner, py: Runner, project: Path
) -> None:
    library = project / "vendor" / "site-packages"
    library.mkdir(parents=True)
    (library / "probelib.py").write_text(LIBRARY)
    alone = PROGRAM.replace("USER_LOOKS", "False")
    assert py("-c", alone).stdout == "True\n"  # the control: the file is there
    (project / ".py-sandboxes").write_text("expose-ro=./vendor\npython-import=os, probelib\n")
    result = sb("-c", alone)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "False\n"
    assert "1 optional probe was refused, harmless" in result.stderr, result.stderr
    assert "--audit-log=FILE to see them" in result.stderr
    assert "expose-ro=/etc/hostname" not in result.stderr
    # The program's own look is the user's: it keeps its line to add.
    both = sb("-c", PROGRAM.replace("USER_LOOKS", "True"))
    assert both.stdout == "False\nFalse\n", both.stderr
    assert "add 'expose-ro=/etc/hosts' to .py-sandboxes to allow it" in both.stderr
    assert "  and 1 optional probe was refused, harmless" in both.stderr
    assert "expose-ro=/etc/hostname" not in both.stderr


def test_a_programs_own_module_in_an_unexposed_directory_keeps_its_hint(
    sb: Runner, py: Runner, project: Path
) -> None:
    # Outside a session, the import system's look into the working directory may be
    # where the program's own module is: the summary says which line would expose it.
    (project / "mymod.py").write_text("print('mine')\n")
    assert py("-c", "import mymod").stdout == "mine\n"  # the control
    (project / ".py-sandboxes").write_text("python-import=mymod\n")
    result = sb("-c", "import mymod")
    assert result.returncode == 1
    assert "No module named 'mymod'" in result.stderr
    assert "add 'expose-ro=.' to .py-sandboxes to allow it" in result.stderr, result.stderr
