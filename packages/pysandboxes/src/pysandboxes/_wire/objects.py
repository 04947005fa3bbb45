"""``remote-result-mode=objects``: instances of allowed classes, sent as their data.

An object never travels as a pickle of itself (its class's ``__reduce__``,
``__setstate__`` or ``__init__`` would run in the caller, with arguments the sandboxed
side chose). The sandboxed side's encoder (``replies``) replaces each instance that is
not a value by a persistent id holding only names and values:

- ``("object", module, qualname, attributes, slots)``: a plain instance;
- ``("tuple", module, qualname, items, attributes)``: a ``tuple`` subclass (a named tuple);
- ``("member", module, qualname, name)``: a member of an ``Enum``.

The caller (``codec``) hands each to ``rebuild`` with its allowlist, which looks the
class up (already imported, never importing), makes a bare instance with the built-in
allocator of its base (``object.__new__``, ``tuple.__new__``), and writes the attributes
into the instance's ``__dict__`` and slot descriptors directly. Nothing of the class
runs: no ``__init__``, ``__new__``, ``__setstate__``, property setter or ``__reduce__``.
"""

from __future__ import annotations

from pysandboxes._wire.values import RefusedValue

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

KINDS = ("object", "tuple", "member")
#: What a metaclass of the program's may not define: the decoder hashes a class rebuilt
#: (its tables) and reads its names, which would run them.
_LOOKUP = ("__hash__", "__eq__", "__getattribute__", "__getattr__")


def rebuild(
    pid: Any, allowed: Callable[[str, str], type | None], built: dict[type, bool]
) -> object:
    """The instance a persistent id describes, if its class is allowed; its class is
    added to ``built`` (the walk after loading accepts instances of those, and walks
    into them when the value is ``True``: an enum member is the class's own)."""
    size = 4 if _exact(pid, tuple) and pid[:1] == ("member",) else 5
    if not _exact(pid, tuple) or len(pid) != size:
        raise RefusedValue("a persistent id that is not an object description")
    fields: tuple[Any, ...] = (*pid, None)[:5]
    kind, module, qualname, extra, last = fields
    if kind not in KINDS or not _exact(module, str) or not _exact(qualname, str):
        raise RefusedValue("a persistent id that is not an object description")
    cls: Any = allowed(module, qualname)  # refuses one whose metaclass fails plain_lookup
    if cls is None or not plain_lookup(cls):
        raise RefusedValue(f"{module}.{qualname}")
    if cls.__module__ != module or cls.__qualname__ != qualname:
        raise RefusedValue(f"{module}.{qualname} (defined as {cls.__module__}.{cls.__qualname__})")
    if _subclass(cls, (BaseException, type)) or _own(cls, "__setstate__"):
        raise RefusedValue(f"{module}.{qualname}: its instances are not plain data")
    if kind != "member" and _own(cls, "__del__"):
        # Its finalizer would run in the caller on the child's data (remove self.path).
        raise RefusedValue(
            f"{module}.{qualname}: it defines __del__, which would run in the caller on "
            "data the sandbox chose; return its data instead"
        )
    if kind == "member":
        if _defines(cls, ("__hash__", "__eq__")):  # it may be a dict key: hashed on load
            raise RefusedValue(f"{module}.{qualname}: its __hash__ or __eq__ is the program's")
        namespace: Any = cls.__dict__
        members: Any = namespace.get("_member_map_")
        usable = _exact(members, dict) and _exact(extra, str)
        found: object = members.get(extra) if usable else None
        if found is None:
            raise RefusedValue(f"{module}.{qualname}: no member {extra!r}")
        built.setdefault(cls, False)
        return found  # an existing member: nothing is made
    made: Any
    slots: Any
    if kind == "tuple":
        attributes, slots = last, {}
        if not _subclass(cls, (tuple,)) or not _exact(extra, tuple):
            raise RefusedValue(f"{module}.{qualname}: not a tuple")
        made = _TUPLE_NEW(cls, extra)
    else:
        attributes, slots = extra, last
        try:
            made = object.__new__(cls)  # refuses a class whose base is not a plain object
        except TypeError as exc:
            raise RefusedValue(f"{module}.{qualname}: {exc}") from None
    _fill(made, cls, attributes, slots)
    built[cls] = True
    return made


def plain_lookup(cls: type) -> bool:
    """Whether reading the names of ``cls`` and hashing it (the decoder's tables) runs no
    code of the program's: its metaclass defines none of ``_LOOKUP``."""
    return not _defines(type(cls), _LOOKUP)


def _defines(cls: type, names: tuple[str, ...]) -> bool:
    """Whether a class of the program (not ``enum``'s or a built-in one) defines one of
    ``names``."""
    bases = [b for b in cls.__mro__ if b.__module__ not in ("enum", "builtins")]
    return any(name in vars(base) for base in bases for name in names)


def _own(cls: type, name: str) -> bool:
    """Whether a class of the program defines ``name`` (not ``object``/``tuple``)."""
    return any(name in vars(base) for base in cls.__mro__ if base not in (object, tuple))


def _fill(made: object, cls: type, attributes: object, slots: object) -> None:
    if type(attributes) is not dict or type(slots) is not dict:
        raise RefusedValue(f"{cls.__qualname__}: attributes that are not a dict")
    state: dict[object, object] = attributes  # type: ignore[assignment]
    values: dict[object, object] = slots  # type: ignore[assignment]
    if any(type(k) is not str for k in (*state, *values)):
        raise RefusedValue(f"{cls.__qualname__}: an attribute name that is not a string")
    if state:
        holder = _descriptor(cls, "__dict__", "getset_descriptor")
        if holder is None:
            raise RefusedValue(f"{cls.__qualname__}: attributes for a class without __dict__")
        instance_dict: dict[object, object] = holder.__get__(made, cls)
        instance_dict.update(state)
    for name, value in values.items():
        slot = _descriptor(cls, name, "member_descriptor")  # type: ignore[arg-type]
        if slot is None:
            raise RefusedValue(f"{cls.__qualname__}: no slot named {name!r}")
        slot.__set__(made, value)


def _descriptor(cls: type, name: str, kind: str) -> Any:
    """The C descriptor ``name`` of ``cls`` (the first in its MRO), if it is a ``kind``:
    never a property or anything else of the program's."""
    for base in cls.__mro__:
        found = vars(base).get(name)
        if found is not None:
            return found if type(found).__name__ == kind else None
    return None


def describe(value: object, plain: Callable[[type], bool]) -> tuple[object, ...] | None:
    """Runs in the sandboxed child: the persistent id of ``value``, or ``None`` when it is
    pickled as itself (``plain``: scalars, containers, value classes).

    Raises:
        TypeError: the object cannot cross as data (its class pickles itself its own
            way, restores itself with ``__setstate__``, or it is a list or dict subclass).
    """
    kind = type(value)
    if plain(kind) or isinstance(value, type):
        return None  # a class is pickled by its name (a value's, e.g. ``Path``'s own)
    module, qualname = kind.__module__, kind.__qualname__
    member_name = getattr(value, "_name_", None) if _is_enum(kind) else None
    if type(member_name) is str:
        return ("member", module, qualname, member_name)
    where = f"{module}.{qualname}"
    if _own(kind, "__setstate__"):
        raise TypeError(f"{where} restores itself with __setstate__: return its data instead")
    reduced: Any = value.__reduce_ex__(5)
    import copyreg

    newobj: object = vars(copyreg)["__newobj__"]
    shaped = _exact(reduced, tuple) and len(reduced) >= 2 and _exact(reduced[1], tuple)
    if not shaped or reduced[0] is not newobj or reduced[1][:1] != (kind,):
        raise TypeError(f"{where} pickles itself with its own __reduce__: return its data instead")
    if len(reduced) > 3 and (reduced[3] is not None or reduced[4:5] not in ((), (None,))):
        raise TypeError(f"{where} is a list or dict subclass: return a list or dict instead")
    state: Any = reduced[2] if len(reduced) > 2 else None
    attributes: Any
    slots: Any
    attributes, slots = state if _exact(state, tuple) else (state, None)
    arguments: tuple[object, ...] = reduced[1][1:]
    if isinstance(value, tuple):
        return ("tuple", module, qualname, arguments, dict(attributes or {}))
    return ("object", module, qualname, dict(attributes or {}), dict(slots or {}))


_TUPLE_NEW: Any = vars(tuple)["__new__"]


def _subclass(cls: Any, bases: tuple[type, ...]) -> bool:
    """``issubclass``, without narrowing ``cls`` for the type checker."""
    return issubclass(cls, bases)


def _exact(value: object, kind: type) -> bool:
    """``type(value) is kind``, without narrowing ``value`` for the type checker."""
    return type(value) is kind


def _is_enum(kind: type) -> bool:
    return any(base.__module__ == "enum" and base.__name__ == "Enum" for base in kind.__mro__)


_TUPLE_ITER: Any = vars(tuple)["__iter__"]  # a named tuple's items, never its own __iter__


def held(item: Any) -> list[object]:
    """What a rebuilt object holds (``codec`` walks it): its ``__dict__`` and slots, as
    ``rebuild`` set them (read back the same way: no attribute of the class's is called)."""
    found: list[object] = list(_TUPLE_ITER(item)) if tuple in type(item).__mro__ else []
    for base in type(item).__mro__:
        for name, slot in vars(base).items():
            kind = type(slot).__name__
            if kind == "getset_descriptor" and name == "__dict__":
                state: dict[str, object] = slot.__get__(item)
                found += state.values()
            elif kind == "member_descriptor":
                try:
                    found.append(slot.__get__(item))
                except AttributeError:
                    continue  # an empty slot
    return found
