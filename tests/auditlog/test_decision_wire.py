"""What the sandboxed process sends for the log is decoded by the trusted side alone
(``_wire.codec``): only well-formed decisions get a line, each line stays one line."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from pysandboxes._record import replace
from pysandboxes._wire.codec import decode_decision, decode_decisions
from pysandboxes._wire.decisions import Decision, encode_decision, log_line, read_log_line

GOOD = Decision(
    "file", "/srv/data/in.csv", "read", True, ".py-sandboxes:1", "expose-ro=.", "a.py:3"
)


def test_a_decision_travels_whole() -> None:
    assert decode_decision(encode_decision(GOOD).rstrip(b"\n")) == GOOD


def test_malformed_or_unknown_lines_are_dropped() -> None:
    wire = json.loads(encode_decision(GOOD))
    for forged in (
        {**wire, "k": "shell"},  # an unknown kind
        {**wire, "a": "own"},  # an access the kind does not have
        {**wire, "n": 0},  # no decision at all
        {**wire, "n": -5},
        {**wire, "v": 2},
        {**wire, "t": "/etc/\x00passwd"},  # a NUL names nothing
        {**wire, "t": "x" * 5000},  # longer than any target sent
        {**wire, "extra": 1},  # a field the format does not have
        {**wire, "s": 1},  # an allowed decision cannot be a surfaced refusal
        [wire],
    ):
        assert decode_decision(json.dumps(forged).encode()) is None, forged
    assert decode_decision(b"not json") is None
    assert decode_decision(b"{" * 100_000) is None


def test_a_line_cut_short_waits_for_its_end() -> None:
    line = encode_decision(GOOD)
    found, pending, dropped = decode_decisions(line + line[:10])
    assert (found, pending, dropped) == ([GOOD], line[:10], 0)
    found, pending, dropped = decode_decisions(pending + line[10:] + b"garbage\n")
    assert (found, pending, dropped) == ([GOOD], b"", 1)


def test_a_target_cannot_add_a_line_to_the_log() -> None:
    sneaky = Decision("env", 'X"}\n{"v":1,"verdict":"allowed', "read", False)
    decoded = decode_decision(encode_decision(sneaky).rstrip(b"\n"))
    assert decoded == sneaky
    written = log_line(decoded, "2026-12-01T00:00:00.000Z", "complete")
    assert written.count("\n") == 1
    assert read_log_line(written).target == sneaky.target


# Targets, locations and rule texts are whatever the program names: any characters, the
# quotes, backslashes, controls and lone surrogates of a hostile name included.
_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)


@settings(max_examples=300, deadline=None)
@given(
    target=_TEXT,
    where=_TEXT,
    rule_text=_TEXT,
    allowed=st.booleans(),
    count=st.integers(1, 2**40),
)
def test_any_named_target_travels_whole_and_as_json_writes_it(
    target: str, where: str, rule_text: str, allowed: bool, count: int
) -> None:
    decision = Decision("env", target, "read", allowed, ".py-sandboxes:2", rule_text, where)
    decision = replace(decision, count=count)
    line = encode_decision(decision)
    if not line:  # too long to send: dropped whole, never cut
        return
    assert line.count(b"\n") == 1
    # The child writes the line without the json package: the same bytes json writes.
    fields = json.loads(line)
    assert line == json.dumps(fields, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"
    decoded = decode_decision(line.rstrip(b"\n"))
    if decoded is not None:  # a NUL, an empty target, a lone surrogate...: dropped whole
        assert (decoded.target, decoded.where, decoded.count) == (target, where, count)
    if all(t.isprintable() for t in (target, where, rule_text)) and target.strip():
        assert decoded is not None
