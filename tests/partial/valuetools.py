"""A real tools module of the application's, next to its tests (imported by the test
process itself, as an application imports its tools): @sandbox functions and classes of
the application's own."""

from __future__ import annotations

import dataclasses
import enum
import sys
from collections import namedtuple

from pysandboxes import sandbox

#: The rules its tests run under: this module and its own imports, nothing else.
RULES = "python-import=valuetools, dataclasses, enum, collections\n"


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: object


class Plain:
    def __init__(self, value: object) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return type(other) is Plain and other.value == self.value

    def __hash__(self) -> int:
        return hash(("Plain", repr(self.value)))

    def __repr__(self) -> str:
        return f"Plain({self.value!r})"

    @sandbox
    def doubled(self, times: int = 2) -> object:
        """A @sandbox method: called on an instance, the instance crosses as ``self``."""
        return [self.value] * times


class Color(enum.Enum):
    RED = 1
    GREEN = "green"


Pair = namedtuple("Pair", "left right")


class AppError(Exception):
    """An exception whose constructor takes more than its message."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


class AppLookupError(LookupError):
    pass


class Interrupt(BaseException):
    """An application's BaseException: never the caller's control flow."""


@sandbox
def echo(value: object) -> object:
    return value


@sandbox
def seen(value: object) -> tuple[str, str]:
    """What the child received: its type's name and its repr."""
    return type(value).__qualname__, repr(value)


@sandbox
def size(path: object) -> int:
    return path.stat().st_size  # type: ignore[attr-defined]


@sandbox
def fail(kind: str) -> None:
    if kind == "app":
        raise AppError("it broke", code=3)
    if kind == "lookup":
        try:
            {}["missing"]
        except KeyError as exc:
            raise AppLookupError("not there") from exc
    if kind == "base":
        raise BaseException("the end")
    if kind == "interrupt":
        raise Interrupt("stop")
    if kind == "exit":
        sys.exit(4)
    if kind == "group":
        raise BaseExceptionGroup("both", [AppError("one", 1), KeyboardInterrupt()])
    raise ValueError(kind)


@sandbox
def unpickle(data: bytes) -> object:
    """The function's own pickle.loads: judged by the rules (deserialization)."""
    import pickle

    return pickle.loads(data)


@sandbox
def talk(tag: str, lines: int) -> str:
    for number in range(lines):
        print(f"{tag} line {number}")
    return tag
