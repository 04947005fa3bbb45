"""ctypes without C: what a program imports as ``ctypes`` without a ``native`` grant.

Libraries import ctypes to read the sizes of C types or to probe the platform (numpy,
scipy, sympy, pandas). This module has the same names: the C types, their sizes and
alignments, structures, unions, arrays, pointers to objects and callbacks, with values held
in Python and no memory behind them, so nothing here reaches an address. What needs C or
memory (loading a library, calling or casting to an address, ``from_address``,
``memmove``, ``string_at``, a pointer indexed past its object...) raises the
``pysandboxes.native`` audit event, which the call guard turns into a refusal naming the
rule that would allow it. Loaded as ``ctypes`` by the sandbox; it imports nothing of it.
"""

from __future__ import annotations

from ._cdata import _ADDRESS, _blank, _CData, _CDataType, _native, _Pointer, _SimpleCData, _size
from ._cdata import ARRAY as ARRAY
from ._cdata import ArgumentError as ArgumentError
from ._cdata import Array as Array
from ._cdata import BigEndianStructure as BigEndianStructure
from ._cdata import BigEndianUnion as BigEndianUnion
from ._cdata import LittleEndianStructure as LittleEndianStructure
from ._cdata import LittleEndianUnion as LittleEndianUnion
from ._cdata import Structure as Structure
from ._cdata import Union as Union

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__version__ = "1.1.0"
DEFAULT_MODE = RTLD_LOCAL = 0
RTLD_GLOBAL = 256
_FUNCFLAG_CDECL, _FUNCFLAG_PYTHONAPI = 1, 4
_FUNCFLAG_USE_ERRNO, _FUNCFLAG_USE_LASTERROR = 8, 16


_pointer_type_cache: dict[Any, type[_Pointer]] = {}


def POINTER(kind: Any) -> type[_Pointer]:
    made = _pointer_type_cache.get(kind)
    if made is None:
        name = f"LP_{kind.__name__}" if isinstance(kind, type) else f"LP_{kind}"
        made = _pointer_type_cache[kind] = _CDataType(name, (_Pointer,), {"_type_": kind})
    return made


def pointer(target: Any) -> _Pointer:
    return POINTER(type(target))(target)


class _CFuncPtr(_CData):
    """A function prototype's instance: a Python callback only, never an address."""

    _flags_ = _FUNCFLAG_CDECL
    _restype_: Any = None
    _argtypes_: tuple[Any, ...] = ()
    _size_ = _align_ = _size("P")
    restype = argtypes = errcheck = None

    def __init__(self, target: object = None, *more: object) -> None:
        super().__init__()
        if not callable(target):
            _native("function address")  # an address, (name, library) or a COM slot
        self._objects[0] = target

    def __call__(self, *args: object) -> Any:
        target: Any = self._objects.get(self._o_)
        if target is None or target is _ADDRESS:
            return _native("function address")
        return target(*args)


_c_functype_cache: dict[Any, type[_CFuncPtr]] = {}


def CFUNCTYPE(
    restype: Any, *argtypes: Any, use_errno: bool = False, use_last_error: bool = False
) -> type[_CFuncPtr]:
    flags = (
        _FUNCFLAG_CDECL
        | (_FUNCFLAG_USE_ERRNO if use_errno else 0)
        | (_FUNCFLAG_USE_LASTERROR if use_last_error else 0)
    )
    return _functype(restype, argtypes, flags)


def PYFUNCTYPE(restype: Any, *argtypes: Any) -> type[_CFuncPtr]:
    return _functype(restype, argtypes, _FUNCFLAG_CDECL | _FUNCFLAG_PYTHONAPI)


def _functype(restype: Any, argtypes: tuple[Any, ...], flags: int) -> type[_CFuncPtr]:
    key = (restype, argtypes, flags)
    made = _c_functype_cache.get(key)
    if made is None:
        body = {"_restype_": restype, "_argtypes_": argtypes, "_flags_": flags}
        made = _c_functype_cache[key] = _CDataType("CFunctionType", (_CFuncPtr,), body)
    return made


class CDLL:
    """A shared library: never loaded here."""

    _func_flags_ = _FUNCFLAG_CDECL

    def __init__(self, name: object, *args: object, **kwargs: object) -> None:
        _native("CDLL")


class PyDLL(CDLL):
    """A shared library called with the GIL held: never loaded here."""

    def __init__(self, name: object, *args: object, **kwargs: object) -> None:
        _native("PyDLL")


class LibraryLoader:
    """``cdll.name``, ``cdll[name]``, ``cdll.LoadLibrary(name)``: each would load it."""

    def __init__(self, dlltype: type) -> None:
        self._dlltype = dlltype

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._dlltype(name)

    def __getitem__(self, name: str) -> Any:
        return self._dlltype(name)

    def LoadLibrary(self, name: str) -> Any:
        return self._dlltype(name)


cdll, pydll = LibraryLoader(CDLL), LibraryLoader(PyDLL)


def __getattr__(name: str) -> Any:
    if name == "pythonapi":
        return _native("pythonapi")
    raise AttributeError(f"module 'ctypes' has no attribute {name!r}")


def sizeof(what: Any) -> int:
    kind = what if isinstance(what, type) else type(what)
    if not isinstance(kind, _CDataType):
        raise TypeError("this type has no size")
    return kind._size_


def alignment(what: Any) -> int:
    kind = what if isinstance(what, type) else type(what)
    if not isinstance(kind, _CDataType):
        raise TypeError("no alignment info")
    return kind._align_


def byref(target: Any, offset: int = 0) -> Any:
    if not isinstance(target, _CData):
        raise TypeError(
            f"byref() argument must be a ctypes instance, not '{type(target).__name__}'"
        )
    return target  # only ever read by a foreign call, which is refused


def addressof(target: object) -> int:
    return _native("addressof")


def cast(target: object, kind: Any) -> Any:
    """An address only as a number (``c_void_p``), or as a pointer or function that
    refuses to be followed or called (scipy casts its own C functions at import)."""
    if isinstance(kind, type) and issubclass(kind, (_Pointer, _CFuncPtr)):
        made = _blank(kind)
        _CData.__init__(made)
        made._objects[0] = _ADDRESS
        return made
    if kind is c_void_p and (target is None or type(target) is int):
        return c_void_p(target)
    return _native("cast")


def memmove(dst: object, src: object, count: int) -> Any:
    return _native("memmove")


def memset(dst: object, c: int, count: int) -> Any:
    return _native("memset")


def string_at(ptr: object, size: int = -1) -> bytes:
    return _native("string_at")


def wstring_at(ptr: object, size: int = -1) -> str:
    return _native("wstring_at")


def resize(target: object, size: int) -> None:
    _native("resize")


def get_errno() -> int:
    return 0


def set_errno(value: int) -> int:
    return 0


def _named(name: str, code: str) -> Any:
    return _CDataType(name, (_SimpleCData,), {"_type_": code, "__module__": __name__})


c_byte, c_ubyte, c_short, c_ushort = (
    _named(n, c)
    for n, c in (("c_byte", "b"), ("c_ubyte", "B"), ("c_short", "h"), ("c_ushort", "H"))
)
c_int, c_uint, c_long, c_ulong = (
    _named(n, c) for n, c in (("c_int", "i"), ("c_uint", "I"), ("c_long", "l"), ("c_ulong", "L"))
)
c_longlong, c_ulonglong = _named("c_longlong", "q"), _named("c_ulonglong", "Q")
c_float, c_double, c_longdouble = (
    _named("c_float", "f"),
    _named("c_double", "d"),
    _named("c_longdouble", "g"),
)
c_bool, c_char, c_wchar = _named("c_bool", "?"), _named("c_char", "c"), _named("c_wchar", "u")
c_char_p, c_wchar_p = _named("c_char_p", "z"), _named("c_wchar_p", "Z")
c_void_p, py_object = _named("c_void_p", "P"), _named("py_object", "O")
c_voidp = c_void_p
c_int8, c_uint8, c_int16, c_uint16, c_int32, c_uint32 = (
    c_byte,
    c_ubyte,
    c_short,
    c_ushort,
    c_int,
    c_uint,
)
c_int64, c_uint64 = (c_long, c_ulong) if c_long._size_ == 8 else (c_longlong, c_ulonglong)
c_size_t, c_ssize_t = (c_ulong, c_long) if c_long._size_ == c_void_p._size_ else (c_uint, c_int)
c_time_t = c_int64


def create_string_buffer(init: Any, size: int | None = None) -> Array:
    if isinstance(init, int):
        return (c_char * init)()
    made = (c_char * (len(init) + 1 if size is None else size))()
    made.value = init
    return made


def create_unicode_buffer(init: Any, size: int | None = None) -> Array:
    if isinstance(init, int):
        return (c_wchar * init)()
    made = (c_wchar * (len(init) + 1 if size is None else size))()
    made.value = init
    return made


c_buffer = create_string_buffer


def SetPointerType(pointer: object, cls: object) -> None:
    _native("SetPointerType")
