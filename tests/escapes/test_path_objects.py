"""Attack class 1, path objects: an API the audit hook alone judges (``io.FileIO`` is not
wrapped) gets the path object itself, and the guard reads the text its conversion left
in the object's slot (``_inside/guards/pathobjects``). A class that looks like a
``pathlib`` path but converts to another path than its slot holds must be refused;
``pathlib`` itself is not loaded by the sandbox's start, so nothing the guard relies on
comes from the program's copy of it."""

from __future__ import annotations

import pytest
from escapelab import Lab

# Each converts to SECRET_FILE while its _str slot says an exposed file.
FORGED = {
    "a subclass's own __fspath__": """
        import io, pathlib
        class Where(pathlib.PosixPath):
            def __fspath__(self):
                return SECRET_FILE
        path = Where(DATA + "/config.txt")
        str(path)
        print('GOT', io.FileIO(path).read())
        """,
    "a subclass's own __str__": """
        import io, pathlib
        class Where(pathlib.PosixPath):
            def __str__(self):
                self._str = DATA + "/config.txt"
                return SECRET_FILE
        print('GOT', io.FileIO(Where(DATA)).read())
        """,
    "a __getattribute__ that answers _str": """
        import io, pathlib
        class Where(pathlib.PosixPath):
            def __getattribute__(self, name):
                if name == "_str":
                    return SECRET_FILE
                return super().__getattribute__(name)
        path = Where(DATA + "/config.txt")
        pathlib.PurePath.__str__.__get__(path)  # no: str() goes through the class
        object.__setattr__(path, "_str", DATA + "/config.txt")
        print('GOT', io.FileIO(path).read())
        """,
    "pathlib's global str shadowed": """
        import io, pathlib, sys
        path = pathlib.Path(DATA + "/config.txt")
        str(path)
        module = sys.modules[pathlib.PurePath.__module__]
        module.str = lambda self: SECRET_FILE
        print('GOT', io.FileIO(path).read())
        """,
    "the standard methods on a class of the program's": """
        import io, pathlib
        class Where:
            __slots__ = ("_str",)
            __fspath__ = pathlib.PurePath.__fspath__
            __str__ = lambda self: SECRET_FILE
        path = Where()
        path._str = DATA + "/config.txt"
        print('GOT', io.FileIO(path).read())
        """,
}


@pytest.mark.parametrize("case", list(FORGED))
def test_cant_read_a_secret_through_a_forged_path_object(lab: Lab, case: str) -> None:
    code = lab.probe(FORGED[case])
    assert lab.secret in lab.control(code).stdout
    lab.refused(code, "RuleFileNotFoundError")


def test_a_standard_path_or_plain_subclass_reads_an_exposed_file(lab: Lab) -> None:
    code = lab.probe(
        """
        import sys
        print("loaded at start", "pathlib" in sys.modules)
        import io, pathlib
        class Mine(pathlib.PosixPath):
            pass
        for path in (pathlib.Path(DATA + "/config.txt"), Mine(DATA + "/config.txt")):
            print("read", len(io.FileIO(path).read()) > 0)
        """
    )
    result = lab.run_sandboxed(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["loaded at start False", "read True", "read True"]
