"""``remote-result-mode=objects`` is an allowlist: instances of the application's own
classes (modules it imported from its own directories) and of the classes
``remote-result-class=`` names come back, rebuilt from their data without running any
code of theirs; any other class stays refused, whatever the sandboxed side claims.
"""

from __future__ import annotations

import pickle
import textwrap
from pathlib import Path

from partiallab import App  # type: ignore[import-not-found]

RULES = "python-import=os, stat, struct, sys, time, dataclasses, enum, typing, models, zipfile\n"
TOOLS = """
    import dataclasses, enum, os, stat, struct, time, typing
    from zipfile import ZipFile  # a standard class this module merely imports
    from pysandboxes import sandbox

    @dataclasses.dataclass(frozen=True)
    class Point:
        x: int
        y: int

    class Slotted:
        __slots__ = ("a", "b")

    class Pair(typing.NamedTuple):
        left: int
        right: str

    class Color(enum.Enum):
        RED = 1

    class Loud:
        def __init__(self):
            self.state = "made by __init__"

        def __setattr__(self, name, value):
            if name == "armed":
                open(os.environ["MARK"], "w").close()
            object.__setattr__(self, name, value)

    class Restoring:
        def __setstate__(self, state):
            pass

    @sandbox
    def own():
        slotted = Slotted()
        slotted.a, slotted.b = 1, [2]
        loud = Loud()
        object.__setattr__(loud, "armed", True)
        return [Point(1, 2), slotted, Pair(3, "x"), Color.RED, loud]

    @sandbox
    def restoring():
        return Restoring()

    @sandbox
    def not_imported():
        import helpers
        return helpers.Thing()

    @sandbox
    def library():
        import sys
        sys.path.insert(0, os.path.abspath(".venv/lib/python3/site-packages"))
        import models
        return models.Row(7)

    def _connection():
        for fd in range(3, 1024):
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    return fd
            except OSError:
                continue

    @sandbox
    def forge(payload, call_id):
        os.write(_connection(), struct.pack("<IQB", len(payload), call_id, 10) + payload)
        time.sleep(0.3)
"""
HELPERS = """
class Thing:
    pass
"""
MODELS = """
class Row:
    def __init__(self, n):
        self.n = n
"""


def _project(app: App, mark: Path, extra: str = "") -> None:
    (app.project / "helpers.py").write_text(HELPERS)
    library = app.project / ".venv" / "lib" / "python3" / "site-packages"
    library.mkdir(parents=True)
    (library / "models.py").write_text(MODELS)
    (app.project / ".py-sandboxes").write_text(
        RULES
        + f"env=MARK={mark}\nexpose-ro={library}\nexpose-ro=helpers.py\npython-import=helpers\n"
        + "remote-result-mode=objects\n"
        + extra
    )


PATH = "import sys; sys.path.insert(0, '.venv/lib/python3/site-packages')\n"


def test_the_applications_own_classes_come_back_without_running_their_code(
    app: App, tmp_path: Path
) -> None:
    mark = tmp_path / "ran"
    _project(app, mark)
    result = app.run(
        PATH
        + """
import tools
from pysandboxes import sandboxes
with sandboxes():
    point, slotted, pair, color, loud = tools.own()
print(point == tools.Point(1, 2), type(point) is tools.Point)
print(slotted.a, slotted.b, type(slotted) is tools.Slotted)
print(pair == tools.Pair(3, "x"), type(pair) is tools.Pair)
print(color is tools.Color.RED)
print(vars(loud))
""",
        TOOLS,
        env={"MARK": str(mark)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "True True",
        "1 [2] True",
        "True True",
        "True",
        "{'state': 'made by __init__', 'armed': True}",
    ]
    assert not mark.exists()  # rebuilt: its __setattr__ (and __init__) never ran here


def test_cant_rebuild_a_class_the_application_did_not_import_or_does_not_own(
    app: App, tmp_path: Path
) -> None:
    mark = tmp_path / "ran"
    _project(app, mark)
    main = (
        PATH
        + """
import sys, tools
from pysandboxes import sandboxes, RuleResultRefusedError
{setup}
with sandboxes():
    for call in (tools.not_imported, tools.library, tools.restoring):
        try:
            print("rebuilt", type(call()).__name__)
        except RuleResultRefusedError as exc:
            print("refused", str(exc).split(",")[0])
        except TypeError as exc:
            print("not sent", str(exc).split(": ")[1])
print("helpers imported", "helpers" in sys.modules)
"""
    )
    refused = app.run(main.format(setup="import models"), TOOLS, env={"MARK": str(mark)})
    assert refused.returncode == 0, refused.stderr
    assert refused.stdout.splitlines() == [
        "refused the sandboxed function returned a helpers.Thing",
        "refused the sandboxed function returned a models.Row",  # an installed package's
        "not sent tools.Restoring restores itself with __setstate__",
        "helpers imported False",  # nothing is imported on the child's say
    ]
    (app.project / ".py-sandboxes").write_text(
        (app.project / ".py-sandboxes").read_text() + "remote-result-class=models.Row\n"
    )
    named = app.run(main.format(setup="import models"), TOOLS, env={"MARK": str(mark)})
    assert named.returncode == 0, named.stderr
    assert named.stdout.splitlines()[1] == "rebuilt Row"


def _describing(pid: object) -> bytes:
    """A result whose only item is the object description ``pid``, as a hostile
    child would write it."""
    import io

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj: object) -> object:
            return pid if obj == "here" else None

    out = io.BytesIO()
    Pickler(out, protocol=5).dump(["here"])
    return out.getvalue()


def test_cant_claim_a_class_imported_into_an_own_module_or_run_a_setter(
    app: App, tmp_path: Path
) -> None:
    mark = tmp_path / "ran"
    _project(app, mark)
    forged = {
        "imported": ("object", "tools", "ZipFile", {"filename": str(mark)}, {}),
        "renamed": ("object", "tools", "Point.__init__", {}, {}),
        "setter": ("object", "tools", "Loud", {"armed": True}, {}),
        "slot_of_another": ("object", "tools", "Slotted", {}, {"armed": 1}),
    }
    for name, pid in forged.items():
        (app.project / f"{name}.bin").write_bytes(_describing(pid))
    result = app.run(
        PATH
        + """
import pathlib, tools
from pysandboxes import sandboxes, RuleResultRefusedError
with sandboxes():
    for call_id, name in enumerate(("imported", "renamed", "setter", "slot_of_another"), 1):
        try:
            got = tools.forge(pathlib.Path(name + ".bin").read_bytes(), call_id)
            print(name, "rebuilt", vars(got[0]))
        except RuleResultRefusedError as exc:
            print(name, "refused")
""",
        TOOLS,
        env={"MARK": str(mark)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "imported refused",
        "renamed refused",
        "setter rebuilt {'armed': True}",  # written as data: Loud.__setattr__ never ran
        "slot_of_another refused",
    ]
    assert not mark.exists()


def test_cant_reach_a_class_an_own_module_imported_by_its_name_there(
    app: App, tmp_path: Path
) -> None:
    mark = tmp_path / "ran"
    _project(app, mark)
    name = str(mark).encode()
    # Popen(["touch", mark]), naming the class as tools.Popen (tools imported it).
    payload = (
        b"\x80\x05\x8c\x05tools\x8c\x05Popen\x93]\x8c\x05toucha\x8c"
        + bytes([len(name)])
        + name
        + b"a\x85R."
    )
    (app.project / "popen.bin").write_bytes(payload)
    (app.project / "tools.py").write_text(textwrap.dedent(TOOLS) + "from subprocess import Popen\n")
    result = app.run(
        PATH
        + """
import os, pathlib, pickle, time, tools
from pysandboxes import sandboxes, RuleResultRefusedError
payload = pathlib.Path("popen.bin").read_bytes()
pickle.loads(payload).wait()  # control: plain pickle runs it
print("control", os.path.exists(os.environ["MARK"]))
os.remove(os.environ["MARK"])
with sandboxes(python_import="subprocess"):
    try:
        tools.forge(payload, 1)
    except RuleResultRefusedError as exc:
        print("refused", str(exc).split(",")[0])
time.sleep(0.3)
print("ran", os.path.exists(os.environ["MARK"]))
""",
        env={"MARK": str(mark)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "control True",
        "refused the sandboxed function returned a tools.Popen",
        "ran False",
    ]
