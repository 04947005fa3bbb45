"""The decoder of what a sandboxed child sends, fuzzed: whatever the bytes, it returns
values or refuses them (``RefusedValue``), never raises anything else, never builds
anything but values, and values cross whole.

These tests call the decoder directly (the installed one), with hypothesis generating
values, arbitrary bytes, and valid streams cut short or altered.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import fractions
import ipaddress
import pathlib
import pickle
import socket
import struct
import uuid
import zoneinfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pysandboxes._wire import frames
from pysandboxes._wire.codec import RefusedValue, decode_value
from pysandboxes._wire.makers import MAKERS
from pysandboxes._wire.replies import encode_result
from pysandboxes._wire.values import CONTAINERS, SCALARS, VALUE_CLASSES, value_types

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.complex_numbers(allow_nan=False),
    st.text(max_size=20),
    st.binary(max_size=20),
)
value_instances = st.one_of(
    st.dates(),
    st.times(),
    st.datetimes(
        timezones=st.sampled_from([None, datetime.UTC, zoneinfo.ZoneInfo("Europe/Paris")])
    ),
    st.timedeltas(),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.fractions(),
    st.uuids(),
    st.ip_addresses(),
    st.builds(pathlib.PurePosixPath, st.text("abc/", max_size=10)),
    st.builds(range, st.integers(-5, 5), st.integers(-5, 5), st.integers(1, 3)),
    st.builds(ipaddress.ip_network, st.sampled_from(["10.0.0.0/8", "::/64", "192.0.2.0/24"])),
)
hashables = st.one_of(scalars, value_instances)
values = st.recursive(
    st.one_of(scalars, value_instances, st.builds(bytearray, st.binary(max_size=10))),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(hashables, inner, max_size=4),
        st.frozensets(hashables, max_size=4),
        st.sets(hashables, max_size=4),
        st.builds(collections.deque, st.lists(inner, max_size=3)),
        st.builds(collections.OrderedDict, st.dictionaries(st.text(max_size=3), inner, max_size=3)),
        st.builds(collections.Counter, st.dictionaries(st.text(max_size=3), st.integers())),
    ),
    max_leaves=12,
)
ALLOWED = frozenset({*SCALARS, *CONTAINERS}) | value_types()


def _only_values(value: object, depth: int = 0) -> bool:
    kind = type(value)
    if kind not in ALLOWED or depth > 300:
        return False
    if isinstance(value, dict):
        return all(
            _only_values(k, depth + 1) and _only_values(v, depth + 1) for k, v in value.items()
        )
    if kind in (list, tuple, set, frozenset, collections.deque):
        return all(_only_values(item, depth + 1) for item in value)  # type: ignore[attr-defined]
    if kind is slice:
        return all(_only_values(x, depth + 1) for x in (value.start, value.stop, value.step))  # type: ignore[attr-defined]
    return True


def _decoded_or_refused(data: bytes) -> None:
    try:
        value = decode_value(data)
    except RefusedValue:
        return
    assert _only_values(value), repr(value)[:200]


@FUZZ
@given(values)
def test_values_cross_whole(value: object) -> None:
    back = decode_value(encode_result(value))
    assert back == value
    assert type(back) is type(value)


@FUZZ
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_refused_or_values(data: bytes) -> None:
    _decoded_or_refused(data)


@FUZZ
@given(st.binary(max_size=200))
def test_arbitrary_opcodes_after_a_pickle_header_are_refused_or_values(data: bytes) -> None:
    _decoded_or_refused(b"\x80\x05" + data)


@FUZZ
@given(values, st.data())
def test_altered_streams_are_refused_or_values(value: object, data: st.DataObject) -> None:
    stream = bytearray(encode_result(value))
    for _ in range(data.draw(st.integers(1, 4))):
        where = data.draw(st.integers(0, len(stream) - 1))
        action = data.draw(st.sampled_from(["flip", "insert", "delete"]))
        if action == "flip":
            stream[where] = data.draw(st.integers(0, 255))
        elif action == "insert":
            stream.insert(where, data.draw(st.integers(0, 255)))
        elif len(stream) > 1:
            del stream[where]
    _decoded_or_refused(bytes(stream))


@FUZZ
@given(values, st.data())
def test_a_stream_cut_short_is_refused(value: object, data: st.DataObject) -> None:
    stream = encode_result(value)
    cut = data.draw(st.integers(0, len(stream) - 1))
    with pytest.raises(RefusedValue):
        decode_value(stream[:cut])


@FUZZ
@given(st.binary(min_size=13, max_size=64), st.integers(0, 64))
def test_malformed_frames_are_read_or_dropped_never_fatal(header: bytes, limit: int) -> None:
    ours, theirs = socket.socketpair()
    reader = frames.Reader(ours)
    try:
        theirs.sendall(header)
        theirs.close()
        while True:
            frame = reader.receive(limit)
            if frame is None:
                break
            kind, _, payload = frame
            assert 0 <= kind <= 255
            assert payload is None or len(payload) <= limit
    finally:
        reader.close()
        ours.close()


def test_every_value_class_has_a_maker_that_checks_its_arguments() -> None:
    assert set(MAKERS) == set(VALUE_CLASSES)
    for key, maker in MAKERS.items():
        with pytest.raises(RefusedValue):
            maker(object())  # no value class is made from an arbitrary object
        with pytest.raises(RefusedValue):
            maker.anything = 1  # type: ignore[attr-defined]
        assert repr(maker) == f"<maker of {key[0]}.{key[1]}>"


@pytest.mark.parametrize(
    "value",
    [
        uuid.uuid4(),
        zoneinfo.ZoneInfo("America/New_York"),
        datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=zoneinfo.ZoneInfo("Asia/Tokyo")),
        decimal.Decimal("-1.25e-3"),
        fractions.Fraction(-7, 3),
        collections.deque([1, 2, 3], maxlen=5),
        pathlib.PureWindowsPath("c:/x/y"),
        slice(1, None, 2),
        1 + 2j,
    ],
    ids=lambda v: type(v).__name__,
)
def test_value_classes_pickled_by_value_cross_whole(value: object) -> None:
    back = decode_value(encode_result(value))
    assert back == value
    assert type(back) is type(value)


@pytest.mark.parametrize(
    "stream",
    [
        pickle.dumps(uuid.uuid4(), protocol=5),  # NEWOBJ then BUILD
        pickle.dumps(zoneinfo.ZoneInfo("Europe/Paris"), protocol=5),  # builtins.getattr
        pickle.dumps([1, 2], protocol=0),  # text opcodes
        b"\x80\x05\x8c\x08builtins\x8c\x05range\x93.",  # a class as the value itself
        b"\x80\x05K\x01K\x02.",  # two values, one STOP
        b"\x80\x05K\x01.extra",  # bytes after STOP
    ],
    ids=["standard-uuid", "standard-zoneinfo", "protocol-0", "class-as-value", "two", "trailing"],
)
def test_streams_the_encoder_never_writes_are_refused(stream: bytes) -> None:
    with pytest.raises(RefusedValue):
        decode_value(stream)


def test_objects_mode_names_only_what_the_allowlist_returns() -> None:
    class Record:
        def __init__(self) -> None:
            raise AssertionError("__init__ ran")

        def __setstate__(self, state: object) -> None:
            raise AssertionError("__setstate__ ran")

    Plain = type("Plain", (), {"__module__": "app.models", "__qualname__": "Plain"})
    assert Record.__init__ is not None

    def allowed(module: str, qualname: str) -> type | None:
        return Plain if (module, qualname) == ("app.models", "Plain") else None

    def encode(pid: object) -> bytes:
        class Pickler(pickle.Pickler):
            def persistent_id(self, obj: object) -> object:
                return pid if obj == "here" else None

        import io

        out = io.BytesIO()
        Pickler(out, protocol=5).dump(["here"])
        return out.getvalue()

    made = decode_value(encode(("object", "app.models", "Plain", {"x": 1}, {})), objects=allowed)
    assert type(made[0]) is Plain  # type: ignore[index]
    assert made[0].x == 1  # type: ignore[index]
    for pid in [
        ("object", "subprocess", "Popen", {"args": "sh"}, {}),
        ("object", "app.models", "Plain", {1: "not a name"}, {}),
        ("object", "app.models", "Plain", [], {}),
        ("tuple", "app.models", "Plain", (), {}),
        ("member", "app.models", "Plain", "X"),
        ("object", "app.models"),
        "app.models.Plain",
    ]:
        with pytest.raises(RefusedValue):
            decode_value(encode(pid), objects=allowed)
    with pytest.raises(RefusedValue):
        decode_value(encode(("object", "app.models", "Plain", {}, {})))  # values mode


def test_frames_header_is_length_call_id_kind() -> None:
    assert frames.HEADER.size == 13
    assert frames.pack(10, 7, b"xy") == struct.pack("<IQB", 2, 7, 10) + b"xy"


def test_cant_slip_a_class_through_a_large_stream_read_in_place() -> None:
    # A payload of 64 KiB or more is unpickled in place, not through io.BytesIO: the same
    # checks hold, and values still cross whole.
    import os

    from gadgets import Call  # type: ignore[import-not-found]

    padding = b"x" * (frames.LARGE * 2)
    hostile = bytearray(pickle.dumps([padding, Call(os.system, "true")], protocol=5))
    with pytest.raises(RefusedValue):
        decode_value(hostile)
    plain = {"blob": padding, "keys": {(i, str(i)): i for i in range(5000)}}
    for stream in (bytearray(encode_result(plain)), encode_result(plain)):
        assert len(stream) >= frames.LARGE
        assert decode_value(stream) == plain


def test_frames_in_parts_larger_than_the_buffer_or_over_the_limit_are_read_whole() -> None:
    ours, theirs = socket.socketpair()
    reader = frames.Reader(ours, size=256)
    big = b"y" * 5000
    parts = frames.Parts()
    pickle.Pickler(parts, protocol=5).dump(("m", "f", (big,), {}))
    sent = [(1, 1, b"a" * 10), (1, 2, b""), (1, 3, b"z" * 300)]
    try:
        for kind, call_id, payload in sent:
            frames.send(theirs, kind, call_id, payload)
        frames.send(theirs, 2, 4, parts)
        frames.send(theirs, 1, 5, b"q" * 1000)  # over the limit: dropped, the rest read
        frames.send(theirs, 1, 6, b"end")
        theirs.close()
        got = [reader.receive(1 << 20) for _ in range(3)]
        assert got == [(kind, call_id, bytearray(payload)) for kind, call_id, payload in sent]
        kind, call_id, payload = reader.receive(1 << 20)  # type: ignore[misc]
        assert (kind, call_id) == (2, 4)
        assert pickle.loads(payload) == ("m", "f", (big,), {})
        assert reader.receive(999) == (1, 5, None)
        assert reader.receive(999) == (1, 6, bytearray(b"end"))
        assert reader.receive(999) is None
    finally:
        ours.close()
