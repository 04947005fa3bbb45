"""A hostile child's routed requests (``route``, ``lookup``): ``codec.decode_ask`` is the
one decoder of what the child sends, so each malformed request is refused there, before
any resolver or connect on the trusted side sees it.

Each threat is shown against a well-formed request that the decoder accepts (so the
test can fail), then with the one field made hostile.
"""

from __future__ import annotations

import json

import pytest

from pysandboxes._wire.asks import MAX_ASK, Ask, encode_ask
from pysandboxes._wire.codec import decode_ask

ROUTE = {"c": 0, "k": "net", "n": "api.example.test", "a": "route", "p": "tcp", "port": 443}
LOOKUP = {"c": 0, "k": "net", "n": "api.example.test", "a": "lookup", "p": "tcp"}


def sent(fields: dict[str, object], **changed: object) -> bytes:
    return json.dumps({**fields, **changed}).encode()


def test_well_formed_routed_requests_are_decoded() -> None:
    # The child's own encoder: what the tests below spoil one field of.
    route = Ask(0, "net", "api.example.test", "route", "", proto="tcp", port=443)
    assert decode_ask(encode_ask(route)) == route
    lookup = Ask(0, "net", "api.example.test", "lookup", proto="tcp")
    assert decode_ask(encode_ask(lookup)) == lookup
    for address in ("127.0.0.2", "::1", "[::1]"):
        assert decode_ask(sent(ROUTE, n=address)) is not None


@pytest.mark.parametrize("fields", [ROUTE, LOOKUP], ids=["route", "lookup"])
def test_cant_send_an_oversize_name(fields: dict[str, object]) -> None:
    longest = ".".join(["a" * 63] * 3 + ["a" * 61])  # 253 characters: a name still
    assert decode_ask(sent(fields, n=longest)) is not None
    assert decode_ask(sent(fields, n=longest + "a")) is None
    assert decode_ask(sent(fields, n="a" * 64 + ".test")) is None  # a label over 63
    assert decode_ask(sent(fields, n="a." * 2000)) is None


@pytest.mark.parametrize("fields", [ROUTE, LOOKUP], ids=["route", "lookup"])
@pytest.mark.parametrize(
    "name",
    [
        "ëxample.test",  # non-ASCII: IDNA would be the resolver's to fail on
        "xn--e-test\u0301.example",
        "api.example.test\0evil.test",  # a NUL ends the name C sees
        "api.example.test\nnet=ALLOW",  # a line of the log or a prompt
        "api example.test",
        "api..example.test",
        "-api.example.test",
        "",
        "\ud800.test",  # a lone surrogate: not UTF-8
        "api.example.test:443",
        "*.example.test",  # a pattern is the rules' to hold, not a request's
    ],
)
def test_cant_send_an_invalid_name(fields: dict[str, object], name: str) -> None:
    assert decode_ask(sent(fields, n=name)) is None


def test_cant_look_up_an_ipv6_address() -> None:
    # lookup is of names (the rules' spelling): an IPv6 literal is no host name
    assert decode_ask(sent(ROUTE, n="::1")) is not None
    assert decode_ask(sent(LOOKUP, n="::1")) is None


@pytest.mark.parametrize("port", [0, -1, 65536, 1 << 70, 443.0, "443", True, None])
def test_cant_route_to_a_port_out_of_range(port: object) -> None:
    assert decode_ask(sent(ROUTE, port=65535)) is not None
    assert decode_ask(sent(ROUTE, port=port)) is None


@pytest.mark.parametrize("port", [1, 443, 65535])
def test_cant_send_a_lookup_with_a_port(port: int) -> None:
    assert decode_ask(sent(LOOKUP, port=port)) is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("c", "0"),
        ("c", -1),
        ("c", 1 << 62),
        ("k", ["net"]),
        ("n", 1),
        ("n", ["api.example.test"]),
        ("n", {"api": 1}),
        ("a", None),
        ("a", "connect"),
        ("p", "udp"),
        ("p", 6),
        ("w", 3),
        ("o", 1),  # open flags: a file's alone
        ("t", "api.example.test"),  # a rename's target
    ],
)
def test_cant_send_wrong_field_types(field: str, value: object) -> None:
    for fields in (ROUTE, LOOKUP):
        assert decode_ask(sent(fields, **{field: value})) is None


def test_cant_send_a_routed_request_without_its_protocol() -> None:
    without = {key: value for key, value in ROUTE.items() if key != "p"}
    assert decode_ask(json.dumps(without).encode()) is None
    assert decode_ask(sent(ROUTE, extra=1)) is None  # a field the wire does not have


@pytest.mark.parametrize("fields", [ROUTE, LOOKUP], ids=["route", "lookup"])
def test_cant_send_a_truncated_request(fields: dict[str, object]) -> None:
    whole = sent(fields)
    assert decode_ask(whole) is not None
    for cut in range(len(whole)):
        assert decode_ask(whole[:cut]) is None, whole[:cut]


def test_cant_send_an_oversize_request() -> None:
    padded = sent(ROUTE, w=" " * MAX_ASK)
    assert len(padded) > MAX_ASK
    assert decode_ask(padded) is None
    assert decode_ask(sent(ROUTE, w="x" * 512)) is not None
    assert decode_ask(b"\xff" + sent(ROUTE)) is None  # not UTF-8
