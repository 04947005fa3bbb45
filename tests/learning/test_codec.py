"""The trusted side reads the child's events strictly: the child is untrusted."""

from __future__ import annotations

from pysandboxes._wire.codec import decode_event, decode_events
from pysandboxes._wire.events import MAX_EVENTS, MAX_LINE, Event, encode_event


def test_events_round_trip_one_line_each() -> None:
    events = [
        Event("file", "/data/in.txt", "read", where="app.py:3"),
        Event("net", "localhost", "OUT", "tcp", 8080, ("127.0.0.1",), "app.py:9"),
        Event("env", "APP_USER", "read"),
        Event("call", "subprocess.Popen", "process-exec"),
    ]
    data = b"".join(encode_event(event) for event in events)
    assert data.count(b"\n") == len(events)
    assert decode_events([data]) == (events, 0)


def test_events_split_anywhere_are_joined() -> None:
    data = encode_event(Event("import", "csv", "module")) * 3
    chunks = [data[i : i + 5] for i in range(0, len(data), 5)]
    assert decode_events(chunks) == ([Event("import", "csv", "module")] * 3, 0)


def test_malformed_events_are_dropped_and_counted() -> None:
    good = encode_event(Event("env", "HOME", "read"))
    bad = [
        b"not json",
        b'{"f":"file","n":"/x","a":"read","extra":1}',  # an unknown field
        b'{"f":"rules","n":"expose-rw=/","a":"read"}',  # an unknown family
        b'{"f":"file","n":"/x","a":"own"}',  # an unknown access
        b'{"f":"net","n":"h","a":"OUT","p":"tcp","port":70000}',  # no such port
        b'{"f":"net","n":"h","a":"OUT","p":"tcp","port":true}',  # not an int
        b'{"f":"file","n":["/x"],"a":"read"}',  # not a string
        b'{"f":"file","n":"","a":"read"}',  # nothing named
        b"[1, 2]",
        b'"' + b"x" * (MAX_LINE + 10) + b'"',  # too long
    ]
    data = b"\n".join([good, *bad, good]) + b"\n"
    events, dropped = decode_events([data])
    assert events == [Event("env", "HOME", "read")] * 2
    assert dropped == len(bad)


def test_a_line_cut_by_a_kill_is_dropped() -> None:
    good = encode_event(Event("env", "HOME", "read"))
    events, dropped = decode_events([good + good[:-7]])
    assert events == [Event("env", "HOME", "read")]
    assert dropped == 1


def test_a_flood_of_events_is_bounded() -> None:
    line = encode_event(Event("env", "HOME", "read"))
    events, dropped = decode_events([line * (MAX_EVENTS + 5)])
    assert len(events) == MAX_EVENTS
    assert dropped == 5


def test_an_endless_line_is_not_buffered() -> None:
    events, dropped = decode_events([b"x" * (MAX_LINE + 1)] * 100)
    assert events == []
    assert dropped >= 1


def test_a_name_that_is_not_utf8_is_dropped() -> None:
    # A lone surrogate (a file name that is not UTF-8) cannot be written in a rule file:
    # keeping it made the writer fail, and every later run learned again, unsandboxed.
    assert decode_event(rb'{"f": "file", "n": "/tmp/\udcff.txt", "a": "read"}') is None
    assert decode_event(rb'{"f": "file", "n": "/tmp/a.txt", "a": "read", "w": "\ud800"}') is None
    assert decode_event(b'{"f": "file", "n": "/tmp/a.txt", "a": "read"}') is not None


def test_a_name_with_a_nul_is_dropped() -> None:
    # os.path.realpath raises on a NUL: one such event used to lose every learned rule.
    line = b'{"f":"file","n":"/tmp/x\\u0000y","a":"read"}'
    good = encode_event(Event("env", "HOME", "read"))
    assert decode_events([line + b"\n" + good]) == ([Event("env", "HOME", "read")], 1)
