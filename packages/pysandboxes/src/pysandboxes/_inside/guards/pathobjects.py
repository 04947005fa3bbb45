"""The text of a ``pathlib`` path, read as the system call got it, without importing
``pathlib`` at start and without running code the program supplied.

A file API converts a path object with ``type(path).__fspath__(path)``, then reports the
object itself to the audit hook. For the standard classes the conversion leaves its
answer in the object's ``_str`` slot: ``__fspath__`` is ``return str(self)``, and
``__str__`` returns ``self._str``, computing and storing it first if it is not set. The
guard reads that slot through the class's own descriptor, so the program's code does not
run again and cannot answer differently the second time.

That holds for any class whose ``__fspath__`` and ``__str__`` (looked up along its MRO,
as the interpreter looks them up) are functions with the standard library's very code
(equal code objects: same bytecode, constants and names), whose ``str`` is the real
``str`` (not shadowed by a global or a replaced builtin), and whose ``_str`` is a slot
(a member descriptor). Those conditions are checked at each use; any other path object
cannot be known (``None``) and is refused by the caller. Importing ``pathlib`` costs
every start several milliseconds (``fnmatch``, ``re``, ``enum``, ``urllib.parse``,
``ipaddress``); the standard code is read instead from the module's compiled file,
which needs no import and runs nothing. Where that file cannot be read (or does not
match its source), ``pathlib`` is imported at start and its own functions are the
reference, as before.
"""

from __future__ import annotations

import _frozen_importlib_external as _external  # type: ignore[import-not-found]
import marshal
import os
import sys
from types import CodeType, FunctionType, MemberDescriptorType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_REAL_STR = str


def _source() -> str:
    stdlib = os.path.dirname(os.__file__)
    if sys.version_info >= (3, 13):
        return os.path.join(stdlib, "pathlib", "_local.py")
    return os.path.join(stdlib, "pathlib.py")


def _compiled_references(source: str) -> tuple[CodeType, CodeType] | None:
    """``PurePath.__fspath__`` and ``PurePath.__str__`` as the standard library's
    compiled file holds them, if it is a timestamped one that matches the source."""
    try:
        cached: str = _external.cache_from_source(source)
        with open(cached, "rb") as handle:
            data = handle.read()
        stat = os.stat(source)
    except (OSError, ValueError, NotImplementedError):
        return None
    if len(data) < 16 or data[:4] != _external.MAGIC_NUMBER or data[4:8] != b"\0\0\0\0":
        return None  # not this interpreter's, or checked by hash: the import's business
    mtime, size = int.from_bytes(data[8:12], "little"), int.from_bytes(data[12:16], "little")
    if mtime != int(stat.st_mtime) & 0xFFFFFFFF or size != stat.st_size & 0xFFFFFFFF:
        return None
    try:
        module = marshal.loads(memoryview(data)[16:])
    except (EOFError, ValueError, TypeError):
        return None
    found: dict[str, CodeType] = {}
    pending = [module]
    while pending:
        code = pending.pop()
        for constant in code.co_consts:
            if type(constant) is CodeType:
                if constant.co_qualname in ("PurePath.__fspath__", "PurePath.__str__"):
                    found[constant.co_qualname] = constant
                pending.append(constant)
    fspath, text = found.get("PurePath.__fspath__"), found.get("PurePath.__str__")
    return None if fspath is None or text is None else (fspath, text)


def _imported_references() -> tuple[CodeType, CodeType]:
    import pathlib

    pure: Any = pathlib.PurePath
    return pure.__fspath__.__code__, pure.__str__.__code__


def _references() -> tuple[CodeType, CodeType]:
    if "pathlib" in sys.modules:  # loaded before the sandbox: its own code is the standard
        return _imported_references()
    return _compiled_references(_source()) or _imported_references()


_FSPATH_CODE, _STR_CODE = _references()
#: Code objects found equal to each reference so far (kept: their ids stay theirs).
_FSPATH_SEEN: list[CodeType] = [_FSPATH_CODE]
_STR_SEEN: list[CodeType] = [_STR_CODE]
#: The type's own descriptors: a metaclass cannot answer these in the class's stead.
_MRO_OF = vars(type)["__mro__"].__get__
_DICT_OF = vars(type)["__dict__"].__get__
_OBJECT = vars(object)
#: Looked up along the MRO; attribute access must be object's own, so that ``self._str``
#: in ``__str__`` is the slot the guard reads.
_NAMES = ("__fspath__", "__str__", "_str", "__getattribute__", "__setattr__", "__getattr__")


def path_object_text(value: object) -> str | None:
    """The text ``value``'s conversion left in its ``_str`` slot, or ``None`` when
    ``value`` is not a path object whose conversion the guard can know."""
    kind = type(value)
    found: dict[str, object] = {}
    for klass in _MRO_OF(kind):
        attributes = _DICT_OF(klass)
        for name in _NAMES:
            if name not in found and name in attributes:
                found[name] = attributes[name]
    fspath, text, slot = found.get("__fspath__"), found.get("__str__"), found.get("_str")
    if type(fspath) is not FunctionType or type(text) is not FunctionType:
        return None
    if type(slot) is not MemberDescriptorType or "__getattr__" in found:
        return None
    if (
        found.get("__getattribute__") is not _OBJECT["__getattribute__"]
        or found.get("__setattr__") is not _OBJECT["__setattr__"]
    ):
        return None
    if not _standard(fspath.__code__, _FSPATH_SEEN) or not _standard(text.__code__, _STR_SEEN):
        return None
    # ``str(self)``: the name must reach the real str, through no global of the module.
    if "str" in fspath.__globals__ or fspath.__builtins__.get("str") is not _REAL_STR:
        return None
    try:
        result = slot.__get__(value, kind)  # type: ignore[attr-defined]
    except (AttributeError, TypeError):  # never converted, or not this class's slot
        return None
    return result if type(result) is str else None


def _standard(code: CodeType, seen: list[CodeType]) -> bool:
    """Whether ``code`` is the standard code ``seen[0]`` (equal code objects)."""
    if any(code is known for known in seen):
        return True
    if code != seen[0]:
        return False
    if len(seen) < 16:
        seen.append(code)
    return True
