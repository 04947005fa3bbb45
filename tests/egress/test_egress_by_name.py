"""The trusted side's egress connect: a name resolved, judged and connected in one place.

Threats: a name the rules do not grant; a wildcard reaching loopback or the cloud
metadata service; a name granted by rule that resolves (or is rebound between two
lookups) to a defaulted address. Each probe is first shown to work without the rule or
the default (a plain connect, or a judge without defaulted classes), then refused, with
nothing reaching the listener behind it. ``169.254.169.254`` is never connected to: a
socket factory that fails the test stands in for the real one whenever it is judged.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest
from egresslab import PLAYS_PUBLIC, Hosts

from listener import Listener
from pysandboxes._host import egress
from pysandboxes._policy.judge import NetJudge
from pysandboxes._policy.parser import parse_policy
from pysandboxes.errors import RuleSocketConnectionRefusedError


def judge(hosts: Hosts, *lines: str, classes: Any = None) -> NetJudge:
    resolve = egress.hosts_file_resolver(str(hosts.path))
    policy = parse_policy(None, extra_rules=list(lines), cwd="/", env={}, resolve_host=resolve)
    return NetJudge(policy.net, classes=classes)


def read(fd: int) -> bytes:
    with socket.socket(fileno=fd) as sock:
        sock.settimeout(5)
        return sock.recv(10)


@pytest.fixture
def no_connect(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any socket made from here on fails the test: the verdict must come first."""

    def refuse(*args: object, **kwargs: object) -> socket.socket:
        raise AssertionError("a socket was made for a refused address")

    monkeypatch.setattr(egress.socket, "socket", refuse)


def test_a_granted_name_is_resolved_judged_and_connected_here(hosts: Hosts, api: Listener) -> None:
    rules = judge(hosts, f"net=ALLOW|tcp|api.example.test|{api.port}|OUT", classes=PLAYS_PUBLIC)
    resolver = egress.hosts_file_resolver(str(hosts.path))
    made = egress.judged_connect("API.Example.Test.", api.port, "tcp", rules, resolver)
    assert made.address == "127.0.0.2"
    assert made.rule is not None
    assert made.rule.text.startswith("net=ALLOW|tcp|api.example.test")
    assert read(made.fd) == b"hello\n"
    assert api.received == 1


def test_cant_reach_loopback_by_a_granted_name(hosts: Hosts, api: Listener) -> None:
    line = f"net=ALLOW|tcp|api.example.test|{api.port}|OUT"
    resolver = egress.hosts_file_resolver(str(hosts.path))
    with pytest.raises(RuleSocketConnectionRefusedError) as refused:
        egress.connect_by_name("api.example.test", api.port, "tcp", judge(hosts, line), resolver)
    message = str(refused.value)
    assert "the address is loopback" in message
    assert f"'net=ALLOW|tcp|127.0.0.2|{api.port}|OUT' would allow it" in message
    assert api.received == 0
    # The line the message gives does allow it.
    explicit = judge(hosts, line, f"net=ALLOW|tcp|127.0.0.2|{api.port}|OUT")
    fd = egress.connect_by_name("api.example.test", api.port, "tcp", explicit, resolver)
    assert read(fd) == b"hello\n"


def test_cant_reach_a_name_no_rule_grants(hosts: Hosts, api: Listener, evil: Listener) -> None:
    with socket.create_connection(("127.0.0.3", evil.port), timeout=5) as probe:
        assert probe.recv(10) == b"hello\n"  # reachable without the sandbox
    before = evil.received
    rules = judge(hosts, "net=ALLOW|tcp|api.example.test|*|OUT", classes=PLAYS_PUBLIC)
    resolver = egress.hosts_file_resolver(str(hosts.path))
    with pytest.raises(RuleSocketConnectionRefusedError, match=r"evil\.example\.test"):
        egress.connect_by_name("evil.example.test", evil.port, "tcp", rules, resolver)
    assert evil.received == before


def test_a_wildcard_reaches_names_but_not_loopback(
    hosts: Hosts, api: Listener, evil: Listener
) -> None:
    resolver = egress.hosts_file_resolver(str(hosts.path))
    for line in ("net=ALLOW|tcp|*.example.test|*|OUT", "net=ALLOW|tcp|*|*|OUT"):
        rules = judge(hosts, line, classes=PLAYS_PUBLIC)
        assert read(egress.connect_by_name("api.example.test", api.port, "tcp", rules, resolver))
        with pytest.raises(RuleSocketConnectionRefusedError, match="the address is loopback"):
            egress.connect_by_name("evil.example.test", evil.port, "tcp", rules, resolver)
    assert (api.received, evil.received) == (2, 0)


@pytest.mark.usefixtures("no_connect")
def test_cant_reach_cloud_metadata_by_name(hosts: Hosts) -> None:
    resolver = egress.hosts_file_resolver(str(hosts.path))
    lines = ("net=ALLOW|tcp|metadata.example.test|80|OUT", "net=ALLOW|tcp|*|*|OUT")
    for line in lines:
        without = judge(hosts, line, classes=())
        assert without.judge("tcp", "169.254.169.254", 80, "OUT", "metadata.example.test").allowed
        with pytest.raises(RuleSocketConnectionRefusedError) as refused:
            egress.connect_by_name("metadata.example.test", 80, "tcp", judge(hosts, line), resolver)
        assert "link-local (cloud metadata)" in str(refused.value)
        assert "'net=ALLOW|tcp|169.254.169.254|80|OUT' would allow it" in str(refused.value)


def test_cant_rebind_a_granted_name_to_a_refused_address(
    hosts: Hosts, api: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = judge(hosts, "net=ALLOW|tcp|*.example.test|*|OUT", classes=PLAYS_PUBLIC)
    resolver = egress.hosts_file_resolver(str(hosts.path))
    hosts.write("127.0.0.2 rebind.example.test\n")
    assert read(egress.connect_by_name("rebind.example.test", api.port, "tcp", rules, resolver))
    hosts.write("169.254.169.254 rebind.example.test\n")  # the second answer
    made: list[object] = []
    monkeypatch.setattr(egress.socket, "socket", lambda *a, **k: made.append(a))  # pyright: ignore[reportUnknownLambdaType]
    with pytest.raises(RuleSocketConnectionRefusedError, match="cloud metadata"):
        egress.connect_by_name("rebind.example.test", api.port, "tcp", rules, resolver)
    assert made == []
    assert api.received == 1


def test_refused_addresses_of_an_answer_are_skipped_never_tried(
    hosts: Hosts, api: Listener
) -> None:
    rules = judge(hosts, "net=ALLOW|tcp|*.example.test|*|OUT", classes=PLAYS_PUBLIC)
    resolver = egress.hosts_file_resolver(str(hosts.path))
    hosts.write("169.254.169.254 mixed.example.test\n127.0.0.2 mixed.example.test\n")
    made = egress.judged_connect("mixed.example.test", api.port, "tcp", rules, resolver)
    assert made.address == "127.0.0.2"
    os.close(made.fd)


def test_an_address_is_judged_as_an_address(hosts: Hosts, evil: Listener) -> None:
    rules = judge(hosts, "net=ALLOW|tcp|evil.example.test|*|OUT")  # a name, not its address
    with pytest.raises(RuleSocketConnectionRefusedError, match="loopback"):
        egress.connect_by_name("127.0.0.3", evil.port, "tcp", rules)
    explicit = judge(hosts, f"net=ALLOW|tcp|127.0.0.3|{evil.port}|OUT")
    assert read(egress.connect_by_name("127.0.0.3", evil.port, "tcp", explicit)) == b"hello\n"


def test_what_a_prompt_allowed_is_connected_by_the_same_rules(
    hosts: Hosts, evil: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(egress.HOSTS_VARIABLE, str(hosts.path))
    # A name a person allowed: it still may not lead to loopback...
    with pytest.raises(RuleSocketConnectionRefusedError, match="loopback"):
        egress.connect_asked("evil.example.test", evil.port)
    assert evil.received == 0
    # ...but the address itself, or localhost, was named explicitly.
    assert read(egress.connect_asked("127.0.0.3", evil.port)) == b"hello\n"
    local = Listener()
    try:
        assert read(egress.connect_asked("localhost", local.port)) == b"hello\n"
    finally:
        local.close()


def test_the_hosts_file_is_read_only_where_the_variable_says(hosts: Hosts) -> None:
    assert egress.resolver_from_environment({}) is egress.system_resolver
    resolve = egress.resolver_from_environment({egress.HOSTS_VARIABLE: str(hosts.path)})
    assert resolve("api.example.test") == ["127.0.0.2"]
    with pytest.raises(OSError, match="not in the hosts file"):
        resolve("www.example.test")
