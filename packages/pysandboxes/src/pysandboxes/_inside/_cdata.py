"""The C types of the stand-in ctypes (``datactypes``): sizes, layouts and values, no memory.

An instance holds its bytes (shared with the structure or array it is part of) and, beside
them, the objects its reference fields hold (``char *``, ``void *``, ``PyObject *``,
pointers): a pointer is followed to the object it was made from, never to an address.
Loaded by the sandbox as ``ctypes._cdata``; it imports nothing of it.
"""

from __future__ import annotations

import struct as _struct
import sys as _sys

#: What the stand-in module takes from here (the private names are ctypes' own).
__all__ = ["ARRAY", "Array", "Structure", "Union", "_CData", "_Pointer", "_SimpleCData"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: The C types held by reference: their values live beside the bytes, never read from them.
_REFERENCES = frozenset("zZO")
_CODES = "cbBhHiIlLqQfdg?uzZPOnNv"


_ADDRESS = object()  # what a pointer or function made by cast() points to


class ArgumentError(Exception):
    """Raised when a foreign call cannot convert an argument (never, here: none is made)."""


def _native(what: str) -> Any:
    """Refuse ``what`` (a key the call guard knows); raises whatever hook is in place."""
    _sys.audit("pysandboxes.native", what)
    raise PermissionError(f"{what}: ctypes holds no memory in this sandbox")


def _size(code: str) -> int:
    if code in "guv":
        return {"g": 16, "u": 4, "v": 2}[code]
    return _struct.calcsize("@" + ("P" if code in _REFERENCES else code))


def _blank(kind: Any) -> Any:
    """An instance of ``kind`` not yet initialised."""
    return object.__new__(kind)


def _held(made: Any) -> Any:
    """The object a reference holds; its bytes set without one (a union's other field,
    ``from_buffer_copy``, a buffer written) would be an address: refused."""
    found = made._objects.get(made._o_)
    if found is None and any(made._b_[made._o_ : made._o_ + _size("P")]):
        return _native("address")
    return found


class _CDataType(type):
    """The metaclass of every C type: ``sizeof``, arrays by ``*``, addresses refused."""

    _size_: int
    _align_: int

    def __mul__(cls, length: int) -> type[Array]:
        return ARRAY(cls, length)

    __rmul__ = __mul__

    def from_address(cls, address: int) -> Any:
        return _native("from_address")

    def from_buffer(cls, source: object, offset: int = 0) -> Any:
        return _native("from_buffer")

    def in_dll(cls, library: object, name: str) -> Any:
        return _native("in_dll")

    def from_buffer_copy(cls, source: Any, offset: int = 0) -> Any:
        data = bytes(memoryview(source).cast("B"))[offset : offset + cls._size_]
        if len(data) < cls._size_:
            raise ValueError(
                f"Buffer size too small ({len(data)} instead of at least {cls._size_} bytes)"
            )
        made = _blank(cls)
        _CData.__init__(made)
        made._b_[:] = data
        return made

    def from_param(cls, value: object) -> object:
        return value

    def __setattr__(cls, name: str, value: object) -> None:
        super().__setattr__(name, value)
        if name == "_fields_":
            _lay_out(cls, value)  # type: ignore[arg-type]


class _CData(metaclass=_CDataType):
    """An instance: its bytes (shared with the structure or array it is part of) and the
    objects its reference fields hold, by offset."""

    _size_ = 0
    _align_ = 1

    def __init__(self, *args: object, **kwargs: object) -> None:
        self._b_ = bytearray(type(self)._size_)
        self._o_ = 0
        self._objects: dict[int, object] = {}

    def _view(self, offset: int, kind: type) -> Any:
        made = _blank(kind)
        made._b_, made._o_, made._objects = self._b_, self._o_ + offset, self._objects
        return made

    def _bytes(self) -> bytes:
        return bytes(self._b_[self._o_ : self._o_ + type(self)._size_])

    def __reduce__(self) -> Any:
        return (type(self).from_buffer_copy, (self._bytes(),))


def _format(cls: Any) -> str:
    code = str(cls._type_)
    code = {"v": "h", "P": "N"}.get(code, code)
    if code == "?":
        return "@?"
    order = getattr(cls, "_order_", "@")
    if order == "@":
        return "@" + code
    standard = {1: "b", 2: "h", 4: "i", 8: "q"}.get(cls._size_, "q")
    return (
        order + (standard.upper() if code in "BHILQN" else standard)
        if code not in "fd"
        else order + code
    )


class _SimpleCData(_CData):
    """A C number, character or reference; ``value`` converts as C would."""

    _type_ = "i"

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("_type_", cls._type_)
        if type(code) is not str or len(code) != 1 or code not in _CODES:
            raise AttributeError(
                "class must define a '_type_' attribute which must be a single character "
                f"string containing one of {_CODES!r}"
            )
        cls._size_ = cls._align_ = _size(code)
        cls.__ctype_be__ = cls.__ctype_le__ = cls

    def __init__(self, value: object = None) -> None:
        super().__init__()
        if value is not None:
            self.value = value

    @property
    def value(self) -> Any:
        code = type(self)._type_
        if code in _REFERENCES:
            return _held(self)
        if code in "ug":
            return self._objects.get(self._o_, "\0" if code == "u" else 0.0)
        found = _struct.unpack(_format(type(self)), self._bytes())[0]
        return found or None if code == "P" else found

    @value.setter
    def value(self, value: object) -> None:
        code = type(self)._type_
        if code in "zZ" and type(value) is int:
            _native("address")  # a char* made from a number reads memory by address
        if code in _REFERENCES or code in "ug":
            self._objects[self._o_] = value
            return
        if code == "P" and value is None:
            value = 0
        if code == "c" and type(value) is int:
            value = bytes([value])
        if code in "bBhHiIlLqQnNP":
            bits = 8 * type(self)._size_
            value = int(value) & ((1 << bits) - 1)  # type: ignore[call-overload]
            if code in "bhilqn" and value >> (bits - 1):  # signed
                value -= 1 << bits
        self._b_[self._o_ : self._o_ + type(self)._size_] = _struct.pack(_format(type(self)), value)

    def __bool__(self) -> bool:
        return bool(self.value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"


def _lay_out(cls: Any, fields: list[tuple[Any, ...]]) -> None:
    """Offsets as the C compiler sets them (``_pack_`` honoured; a bit field takes its
    whole type)."""
    union = issubclass(cls, Union)
    pack = getattr(cls, "_pack_", 0) or 0
    offset = size = 0
    align = 1
    base = cls.__mro__[1]
    if not union and base is not Structure and issubclass(base, Structure):
        offset = size = base._size_
        align = base._align_
    for field in fields:
        name, kind = field[0], field[1]
        field_align = min(kind._align_, pack) if pack else kind._align_
        align = max(align, field_align)
        start = 0 if union else (offset + field_align - 1) // field_align * field_align
        type.__setattr__(cls, name, _Field(start, kind))
        offset = start + kind._size_
        size = max(size, offset)
    type.__setattr__(cls, "_size_", (size + align - 1) // align * align)
    type.__setattr__(cls, "_align_", align)


class _Field:
    """A field of a structure: its offset and type."""

    def __init__(self, offset: int, kind: Any) -> None:
        self.offset, self.size, self._kind = offset, kind._size_, kind

    def __get__(self, inst: Any, owner: object = None) -> Any:
        if inst is None:
            return self
        view = inst._view(self.offset, self._kind)
        return (
            view.value
            if isinstance(view, _SimpleCData) and type(view).__mro__[1] is _SimpleCData
            else view
        )

    def __set__(self, inst: Any, value: Any) -> None:
        view = inst._view(self.offset, self._kind)
        if isinstance(value, _CData):
            view._b_[view._o_ : view._o_ + self.size] = value._bytes()
            view._objects.update({view._o_ + k - value._o_: v for k, v in value._objects.items()})
        elif isinstance(view, Array):
            view[: len(value)] = value
        else:
            view.value = value

    def __repr__(self) -> str:
        return f"<Field type={self._kind.__name__}, ofs={self.offset}, size={self.size}>"


class Structure(_CData):
    """A C struct laid out from ``_fields_``."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "_fields_" in cls.__dict__:
            _lay_out(cls, cls.__dict__["_fields_"])

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__()
        names = [field[0] for field in getattr(type(self), "_fields_", ())]
        if len(args) > len(names):
            raise TypeError("too many initializers")
        for name, value in (*zip(names, args, strict=False), *kwargs.items()):
            setattr(self, name, value)


class Union(Structure):
    """A C union: every field at offset 0."""


BigEndianStructure = LittleEndianStructure = Structure
BigEndianUnion = LittleEndianUnion = Union


class Array(_CData):
    """``length * type``: indexed within its length only."""

    _type_: Any
    _length_ = 0

    def __init__(self, *args: object) -> None:
        super().__init__()
        self[: len(args)] = args

    def __len__(self) -> int:
        return type(self)._length_

    def _item(self, index: int) -> Any:
        kind = type(self)._type_
        view = self._view(index * kind._size_, kind)
        return (
            view.value
            if isinstance(view, _SimpleCData) and kind.__mro__[1] is _SimpleCData
            else view
        )

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            items = [self._item(i) for i in range(*index.indices(len(self)))]
            if type(self)._type_._type_ in "c" if hasattr(type(self)._type_, "_type_") else False:
                return b"".join(items)
            return items
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("invalid index")
        return self._item(index)

    def __setitem__(self, index: Any, value: Any) -> None:
        if isinstance(index, slice):
            for i, item in zip(range(*index.indices(len(self))), value, strict=True):
                self[i] = item
            return
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("invalid index")
        kind = type(self)._type_
        _Field(index * kind._size_, kind).__set__(self, value)

    @property
    def raw(self) -> bytes:
        return self._bytes()

    @property
    def value(self) -> Any:
        items = self[:]
        if isinstance(items, bytes):
            return items.split(b"\0", 1)[0]
        return "".join(items).split("\0", 1)[0]

    @value.setter
    def value(self, value: Any) -> None:
        if len(value) > len(self):
            raise ValueError("byte string too long")
        self[: len(value)] = value
        if len(value) < len(self):
            self[len(value)] = b"\0" if isinstance(value, bytes) else "\0"


def ARRAY(kind: Any, length: int) -> type[Array]:
    if type(length) is not int or length < 0:
        raise ValueError("Array length must be >= 0")
    name = f"{kind.__name__}_Array_{length}"
    return _CDataType(
        name,
        (Array,),
        {
            "_type_": kind,
            "_length_": length,
            "_size_": kind._size_ * length,
            "_align_": kind._align_,
        },
    )


class _Pointer(_CData):
    """A pointer to an object it holds: index 0 (``contents``) only."""

    _type_: Any
    _size_ = _align_ = _size("P")

    def __init__(self, target: object = None) -> None:
        super().__init__()
        self._objects[0] = target

    @property
    def contents(self) -> Any:
        target = _held(self)
        if target is None:
            raise ValueError("NULL pointer access")
        if target is _ADDRESS:
            return _native("cast")  # made by cast() from a number or another object
        return target

    @contents.setter
    def contents(self, target: object) -> None:
        self._objects[self._o_] = target

    def __getitem__(self, index: Any) -> Any:
        if index != 0:
            return _native("pointer index")
        target = self.contents
        return target.value if isinstance(target, _SimpleCData) else target

    def __setitem__(self, index: Any, value: Any) -> None:
        if index != 0:
            _native("pointer index")
        target = self.contents
        if isinstance(target, _SimpleCData):
            target.value = value
        else:
            _native("pointer index")

    def __bool__(self) -> bool:
        return self._objects.get(self._o_) is not None or any(self._bytes())
