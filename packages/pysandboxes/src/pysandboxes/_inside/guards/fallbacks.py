"""Whether the code importing a module goes on without it: the import sits in a ``try``
whose ``except`` names ``ImportError`` (or ``ModuleNotFoundError``, ``Exception``).

While learning, a native extension imported that way (pytest's ``import readline``
workaround, a library probing for ``_tkinter``) is not learned as a ``native`` grant: under
the rules the import is refused with a ``ModuleNotFoundError`` and the code falls back, as
it does where the module is not installed. Read from the bytecode's exception table
(``dis``, 3.11 and later), never by running anything of the program's.
"""

from __future__ import annotations

import dis

from pysandboxes._inside.guards.askers import OWN_DIRS
from pysandboxes._inside.guards.audit import current_frame

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import CodeType
    from typing import Any

#: The exceptions an ``except`` may name to catch a refused import.
_CAUGHT = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
#: The frames between the import and the code that asked: the sandbox's, its sealed
#: copies' (``_imp.create_dynamic``), and the import system's.
_PASSED = (*OWN_DIRS, "<pysandboxes ", "<frozen importlib.")


#: The exceptions an ``except`` may name to catch a refused bind (a probe for IPv6).
_OS_CAUGHT = frozenset({"OSError", "PermissionError", "error", "Exception", "BaseException"})


def import_falls_back() -> bool:
    """Whether the code that asked for the import under way catches its failure."""
    return _caller_catches(_CAUGHT)


def failure_caught() -> bool:
    """Whether the code behind the call under way (a bind) catches an ``OSError`` from it:
    a probe, such as urllib3 binding ``::1`` port 0 to learn whether IPv6 works."""
    return _caller_catches(_OS_CAUGHT)


def _caller_catches(names: frozenset[str]) -> bool:
    frame = current_frame()
    for _ in range(64):
        if frame is None:
            return False
        if not frame.f_code.co_filename.startswith(_PASSED):
            return _caught(frame.f_code, frame.f_lasti, names)
        frame = frame.f_back
    return False


def _caught(code: CodeType, lasti: int, names: frozenset[str]) -> bool:
    """Whether the handler of the ``try`` around ``lasti`` names an import failure."""
    try:
        bytecode: Any = dis.Bytecode(code)  # exception_entries: 3.11 and later
        entries: list[Any] = list(bytecode.exception_entries)
        target = next((e.target for e in entries if e.start <= lasti < e.end), None)
        if target is None:
            return False
        for instruction in dis.get_instructions(code):
            if instruction.offset < target:
                continue
            if instruction.opname == "RERAISE":
                return False  # no clause matched: the failure goes on
            if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_ATTR") and (
                instruction.argval in names
            ):
                return True
    except Exception:  # an unreadable code object: learn the grant
        return False
    return False
