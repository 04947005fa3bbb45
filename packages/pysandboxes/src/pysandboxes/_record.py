"""Frozen value classes without importing ``dataclasses``.

``dataclasses`` pulls in ``inspect`` and costs about 10 ms to import here; both processes
of every ``python-sb`` run would pay it. ``@record`` gives what the policy model needs:
slots, an ``__init__`` taking the fields in order (with class-level defaults), equality,
hashing, ``repr``, immutability, ``replace`` and pickling. Type checkers see it as a
frozen dataclass (``dataclass_transform``).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar

    from typing_extensions import dataclass_transform

    T = TypeVar("T")

    @dataclass_transform(frozen_default=True)
    def record(cls: type[T]) -> type[T]:
        """Make ``cls`` a frozen record of its annotated fields."""
        ...

else:

    def record(cls):
        """Make ``cls`` a frozen record of its annotated fields."""
        names = tuple(cls.__dict__.get("__annotations__", {}))  # noqa: RUF063 - no inspect
        defaults = {n: cls.__dict__[n] for n in names if n in cls.__dict__}
        namespace = {
            key: value
            for key, value in cls.__dict__.items()
            if key not in names and key not in ("__dict__", "__weakref__")
        }
        namespace["__slots__"] = names
        namespace["_fields"] = names
        namespace["_defaults"] = defaults
        namespace["__match_args__"] = names
        for method in (_init, _eq, _hash, _repr, _setattr, _delattr, _reduce):
            namespace.setdefault(method.__name__.replace("_", "__", 1) + "__", method)
        built = type(cls.__name__, cls.__bases__, namespace)
        built.__qualname__ = cls.__qualname__
        built.__module__ = cls.__module__
        return built


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    fields = self._fields
    if len(args) > len(fields):
        raise TypeError(f"{type(self).__name__}() takes {len(fields)} arguments")
    setter = object.__setattr__
    for name, value in zip(fields, args, strict=False):
        setter(self, name, value)
    for name in fields[len(args) :]:
        if name in kwargs:
            setter(self, name, kwargs.pop(name))
        elif name in self._defaults:
            setter(self, name, self._defaults[name])
        else:
            raise TypeError(f"{type(self).__name__}() missing argument '{name}'")
    if kwargs:
        raise TypeError(f"{type(self).__name__}() got unexpected {', '.join(kwargs)}")


def _values(self: Any) -> tuple[Any, ...]:
    return tuple(getattr(self, name) for name in self._fields)


def _eq(self: Any, other: object) -> bool:
    if type(other) is not type(self):
        return NotImplemented
    return _values(self) == _values(other)


def _hash(self: Any) -> int:
    return hash((type(self).__name__, _values(self)))


def _repr(self: Any) -> str:
    inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
    return f"{type(self).__name__}({inner})"


def _setattr(self: Any, name: str, value: object) -> None:
    raise AttributeError(f"cannot assign to field '{name}': {type(self).__name__} is frozen")


def _delattr(self: Any, name: str) -> None:
    raise AttributeError(f"cannot delete field '{name}': {type(self).__name__} is frozen")


def _reduce(self: Any) -> tuple[Any, ...]:
    return (self.__class__, _values(self))


def replace(instance: T, **changes: Any) -> T:
    """A copy of a record with some fields changed."""
    fields: tuple[str, ...] = getattr(instance, "_fields")  # noqa: B009
    values: dict[str, Any] = {name: getattr(instance, name) for name in fields}
    values.update(changes)
    return type(instance)(**values)
