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
    turns.relieve()  # the byte comes before the reader has read the call sent alone
    assert turns.keep(reader) is False  # so it does not keep the turn...
    turns.pass_on(reader)  # ...and passes it on, as for any call
    thread.join(5)
    assert woke == [True]


def test_a_relief_during_a_call_sent_alone_passes_the_turn_on() -> None:
    turns = Turns()
    reader = turns.member()
    turns.wait_turn(reader)
    _, thread, woke = _sleeper(turns)
    assert turns.keep(reader) is True
    turns.relieve()
    thread.join(5)
    assert woke == [True]
    assert turns.kept(reader) is False  # its call ended: it waits for its next turn


def test_a_late_relief_costs_the_next_call_sent_alone_one_pass_only() -> None:
    turns = Turns()
    reader = turns.member()
    turns.wait_turn(reader)
    assert turns.keep(reader) is True
    assert turns.kept(reader) is True  # the call ended before its relief came
    turns.relieve()  # late: held for the next call sent alone
    assert turns.keep(reader) is False
    assert turns.keep(reader) is True  # and no further
    assert turns.kept(reader) is True
