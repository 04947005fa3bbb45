"""The copies guards judge are what C reads, whatever the program's classes claim."""

from __future__ import annotations

from pysandboxes._inside.guards.values import plain_bytes, plain_int, plain_str


class LyingStr(str):
    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return hash("json")

    def startswith(self, *args: object) -> bool:  # type: ignore[override]
        return True


class PosingAsStr:
    @property
    def __class__(self) -> type:  # type: ignore[override]
        return str


class LyingInt(int):
    def __index__(self) -> int:
        return 0


def test_subclasses_are_copied_as_their_raw_value() -> None:
    text = plain_str(LyingStr("/etc/shadow"))
    assert type(text) is str
    assert text == "/etc/shadow"
    assert not text.startswith("/home")
    raw = plain_bytes(type("B", (bytes,), {})(b"/etc"))
    assert type(raw) is bytes
    assert raw == b"/etc"
    number = plain_int(LyingInt(7))
    assert type(number) is int
    assert number == 7


def test_an_object_claiming_a_class_is_not_taken_for_it() -> None:
    assert isinstance(PosingAsStr(), str)  # what isinstance would have believed
    assert plain_str(PosingAsStr()) is None
    assert plain_int("7") is None
    assert plain_bytes("x") is None
