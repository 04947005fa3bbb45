"""Bytecode that names itself after a standard-library file must not pass for it.

The dynamic-code guard lets the interpreter's own modules generate code; it knows them by
the file their code is named after. A .pyc without source keeps whatever name its bytes
hold, so the import system unmarshals it for the program, not for itself.
"""

from __future__ import annotations

from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # another directory's conftest may hold the name 'conftest'
    from conftest import Runner


def test_cant_pass_bytecode_off_as_the_standard_library(
    sb: Runner, py: Runner, project: Path
) -> None:
    (project / ".py-sandboxes").write_text("expose-rw=.\npython-import=*\n")
    probe = (
        "import enum, importlib.util, marshal\n"
        "def payload():\n"
        "    exec(\"print('EXEC RAN')\")\n"
        "data = marshal.dumps(payload.__code__)\n"
        "old, new = __file__.encode(), enum.__file__.encode()\n"
        "for tag in (b'z', b'Z', b'\\xda', b'\\xfa'):\n"
        "    data = data.replace(tag + bytes([len(old)]) + old, tag + bytes([len(new)]) + new)\n"
        "assert new in data\n"
        "open('forged.pyc', 'wb').write(importlib.util.MAGIC_NUMBER + bytes(12) + data)\n"
    )
    (project / "forge.py").write_text(probe)
    run = "import forged\n"  # the module's code is payload's: running it runs exec()
    # Plain python: the forged module imports and its exec() runs.
    assert py("forge.py").returncode == 0
    assert "EXEC RAN" in py("-c", run).stdout
    (project / "forged.pyc").unlink()
    # The sandbox may write the file (the rules allow it), but not run it as the stdlib.
    result = sb("forge.py")
    assert result.returncode == 0, result.stderr
    assert (project / "forged.pyc").exists()
    result = sb("-c", run)
    assert "EXEC RAN" not in result.stdout
    assert "marshal.loads() is denied by the API guard" in result.stderr, result.stderr
