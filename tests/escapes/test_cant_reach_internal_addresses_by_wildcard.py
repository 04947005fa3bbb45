"""A ``*.suffix`` rule in the Python layer: a name below the suffix may be looked up, and
the addresses its answer holds may be connected to, unless they are of a defaulted class
(loopback, private, link-local and cloud metadata...). An address the answer did not hold
is judged as an address alone: a name cannot lend its rule to another address.

The guard is driven in this process, its resolver a fixed table (``_getaddrinfo``, as
the guard keeps it): the audit events are those CPython raises for ``getaddrinfo`` and
``connect``, and nothing is connected to (each event is judged, then recorded).
"""

from __future__ import annotations

import socket
import tempfile
from typing import Any

from pysandboxes._inside.enforce import Connection, Recording
from pysandboxes._inside.guards.network import NetworkGuard
from pysandboxes._policy.judge import NetJudge
from pysandboxes._policy.parser import parse_policy

ANSWERS = {
    "raw.cdn.example.test": "192.0.2.20",  # documentation addresses: nothing answers there
    "rebound.cdn.example.test": "169.254.169.254",
    "lan.cdn.example.test": "10.0.0.7",
    "other.example.test": "192.0.2.30",
}


class Messages(Recording):
    """Records the refusals' messages too."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def refuse_connection(
        self, message: str, address: str, rule: str | None, target: Connection | None = None
    ) -> None:
        self.messages.append(message)
        super().refuse_connection(message, address, rule, target)


def _fake_getaddrinfo(host: str, port: Any, family: int = 0, *args: Any) -> list[Any]:
    if host not in ANSWERS:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ANSWERS[host], port or 0))]


def guard(*lines: str, classes: bool = True) -> tuple[NetworkGuard, Messages]:
    policy = parse_policy(None, extra_rules=list(lines), cwd=tempfile.gettempdir(), env={})
    enforcer = Messages()
    judge = NetJudge(policy.net) if classes else NetJudge(policy.net, classes=())
    made = NetworkGuard(judge, policy, enforcer, ".py-sandboxes")
    made._getaddrinfo = _fake_getaddrinfo  # type: ignore[assignment]  # pyright: ignore[reportPrivateUsage]
    return made, enforcer


RULE = "net=ALLOW|tcp|*.cdn.example.test|443|OUT"


def _connect(network: NetworkGuard, host: str, port: int = 443, lookup: bool = True) -> None:
    events = network.events
    if lookup:
        events["socket.getaddrinfo"]((host, port, 0, 0, 0, 0))
        host = ANSWERS[host]  # create_connection connects to the address it was given
    with socket.socket() as sock:
        events["socket.connect"]((sock, (host, port)))


def test_a_wildcard_name_is_looked_up_and_its_address_reached() -> None:
    network, enforcer = guard(RULE)
    _connect(network, "raw.cdn.example.test")
    _connect(network, "raw.cdn.example.test", lookup=False)  # connect(("name", 443))
    assert enforcer.connections == []


def test_cant_look_up_a_name_outside_the_pattern() -> None:
    network, enforcer = guard(RULE)
    network.events["socket.getaddrinfo"](("other.example.test", 443, 0, 0, 0, 0))
    assert enforcer.connections == ["other.example.test"]


def test_cant_reach_cloud_metadata_through_a_wildcard_name() -> None:
    without, quiet = guard(RULE, classes=False)
    _connect(without, "rebound.cdn.example.test")  # the probe passes without the default
    assert quiet.connections == []
    network, enforcer = guard(RULE)
    _connect(network, "rebound.cdn.example.test")
    assert enforcer.connections == ["169.254.169.254:443"]
    (message,) = enforcer.messages
    assert "link-local (cloud metadata)" in message
    assert "net=ALLOW|tcp|169.254.169.254|443|OUT" in message


def test_cant_reach_the_lan_through_a_wildcard_name() -> None:
    network, enforcer = guard(RULE)
    _connect(network, "lan.cdn.example.test", lookup=False)
    assert enforcer.connections == ["lan.cdn.example.test:443"]
    assert "private (RFC 1918)" in enforcer.messages[0]


def test_cant_lend_a_names_rule_to_an_address_it_did_not_answer() -> None:
    network, enforcer = guard(RULE)
    _connect(network, "raw.cdn.example.test")
    with socket.socket() as sock:
        network.events["socket.connect"]((sock, ("192.0.2.21", 443)))
    assert enforcer.connections == ["192.0.2.21:443"]
    assert "no net= rule allows it" in enforcer.messages[0]
