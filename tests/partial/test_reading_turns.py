"""The child's reading turn (``_inside/turns.py``): a worker that runs a call sent alone
keeps the turn, and a relief byte from the trusted side must always pass it on to a
worker that reads, whichever comes first, the byte or the call. A relief lost here is a
connection nobody reads: the calls behind it, and the credit a call's output waits for,
would never be read (a hang)."""

from __future__ import annotations

import threading

from pysandboxes._inside.turns import Turns


def _sleeper(turns: Turns) -> tuple[threading.Lock, threading.Thread, list[bool]]:
    token = turns.member()
    woke: list[bool] = []
    thread = threading.Thread(target=lambda: (turns.wait_turn(token), woke.append(True)))
    thread.start()
    return token, thread, woke


def test_a_relief_that_overtakes_its_call_cant_leave_the_connection_unread() -> None:
    turns = Turns()
    reader = turns.member()
    turns.wait_turn(reader)
    _, thread, woke = _sleeper(turns)
    turns.relieve(7)  # the id comes before the reader has read call 7, sent alone
    assert turns.keep(reader, 7) is False  # so it does not keep the turn...
    turns.pass_on(reader)  # ...and passes it on, as for any call
    thread.join(5)
    assert woke == [True]


def test_a_relief_during_a_call_sent_alone_passes_the_turn_on() -> None:
    turns = Turns()
    reader = turns.member()
    turns.wait_turn(reader)
    _, thread, woke = _sleeper(turns)
    assert turns.keep(reader, 7) is True
    turns.relieve(7)
    thread.join(5)
    assert woke == [True]
    assert turns.kept(reader) is False  # its call ended: it waits for its next turn


def test_a_relief_cant_be_taken_by_another_call_than_its_own() -> None:
    # Under load the relief of call 8 (read later) came while call 7 was being read: it
    # must not be spent on 7, or 8 would keep the turn with the calls behind it unread.
    turns = Turns()
    reader = turns.member()
    turns.wait_turn(reader)
    turns.relieve(8)
    assert turns.keep(reader, 7) is True  # 7 was not relieved
    assert turns.kept(reader) is True
    assert turns.keep(reader, 8) is False  # 8 was: it passes the turn on


def test_a_late_relief_is_held_for_nothing_and_for_a_bounded_few() -> None:
    turns = Turns()
    reader = turns.member()
    turns.wait_turn(reader)
    assert turns.keep(reader, 7) is True
    assert turns.kept(reader) is True  # the call ended before its relief came
    for late in range(1000, 3000):
        turns.relieve(late)  # late ones, for calls that ended
    assert turns.keep(reader, 9) is True  # a new call is not held back by them
    assert turns.kept(reader) is True
