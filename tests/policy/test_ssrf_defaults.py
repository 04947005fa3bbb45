"""SSRF-safe defaults: a wildcard or a host name never reaches loopback, the LAN, link-local
(cloud metadata), CGNAT, multicast or the unspecified address, whatever its spelling;
only a rule naming the address or a range of its class does.

Each property first shows the probe passes without the defaults (a judge given no
defaulted class), then that the defaults refuse it and that an explicit rule allows it.
No address is connected to here: these are verdicts.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysandboxes._policy.netclasses import DEFAULTED
from pysandboxes._policy.netjudge import NetJudge, refusal_reason
from pysandboxes._policy.parser import parse_policy

HOSTS = {
    "localhost": ["127.0.0.1", "::1"],
    "metadata.example.test": ["169.254.169.254"],
    "lan.example.test": ["10.0.0.5"],
    "api.example.test": ["192.0.2.10"],
}


def judge(*lines: str, classes: bool = True) -> NetJudge:
    policy = parse_policy(
        None, extra_rules=list(lines), cwd="/", env={}, resolve_host=lambda h: HOSTS[h]
    )
    return NetJudge(policy.net) if classes else NetJudge(policy.net, classes=())


WIDE = ("net=ALLOW|tcp,udp|*|*|OUT",)
V4_CLASSES = [c.network for c in DEFAULTED if isinstance(c.network, IPv4Network)]
V6_CLASSES = [c.network for c in DEFAULTED if isinstance(c.network, IPv6Network)]


def _in(network: IPv4Network | IPv6Network) -> st.SearchStrategy[int]:
    start = int(network.network_address)
    return st.integers(min_value=start, max_value=start + network.num_addresses - 1)


V4_DEFAULTED = st.sampled_from(V4_CLASSES).flatmap(_in).map(IPv4Address)
V6_DEFAULTED = st.sampled_from(V6_CLASSES).flatmap(_in).map(IPv6Address)


def _spellings(ip: IPv4Address) -> list[str]:
    """What the C library and the IPv6 stack accept for ``ip``."""
    value = int(ip)
    a, b, c, d = ip.packed
    return [
        str(ip),
        str(value),  # 2130706433
        hex(value),  # 0x7f000001
        f"{a}.{(b << 16) | (c << 8) | d}",  # 127.1
        f"0{a:o}.0{b:o}.0{c:o}.0{d:o}",  # octal parts
        f"0x{a:x}.0x{b:x}.0x{c:x}.0x{d:x}",
        f"::ffff:{ip}",  # mapped
        str(IPv6Address((0xFFFF << 32) | value)),  # mapped, hexadecimal
        f"::ffff:0:{ip}",  # translated
        f"64:ff9b::{ip}",  # NAT64
        f"[::ffff:{ip}]",
        *([f"::{ip}"] if value > 1 else []),  # compatible (::1 and :: are not)
    ]


@settings(max_examples=300)
@given(V4_DEFAULTED, st.sampled_from(["tcp", "udp"]), st.integers(0, 65535))
def test_cant_reach_a_defaulted_ipv4_address_by_any_spelling_under_a_wildcard(
    ip: IPv4Address, proto: str, port: int
) -> None:
    without, wide = judge(*WIDE, classes=False), judge(*WIDE)
    explicit = judge(*WIDE, f"net=ALLOW|{proto}|{ip}|{port}|OUT")
    for spelling in _spellings(ip):
        assert without.judge(proto, spelling, port, "OUT").allowed, spelling
        refused = wide.judge(proto, spelling, port, "OUT")
        shown = "127.0.0.1" if int(ip) == 0 else ip  # 0.0.0.0 reaches this host
        assert not refused.allowed, spelling
        assert refused.address_class is not None
        assert refused.fix == f"net=ALLOW|{proto}|{shown}|{port}|OUT"
        if int(ip) != 0:
            assert explicit.judge(proto, spelling, port, "OUT").allowed, spelling


@settings(max_examples=300)
@given(V6_DEFAULTED, st.integers(0, 65535))
def test_cant_reach_a_defaulted_ipv6_address_under_a_wildcard(ip: IPv6Address, port: int) -> None:
    without, wide = judge(*WIDE, classes=False), judge(*WIDE)
    if ip.ipv4_mapped is not None or ip == IPv6Address("::"):
        return  # folded into IPv4 (::ffff:0:0/96 is ULA-free), or reaches ::1
    explicit = judge(*WIDE, f"net=ALLOW|tcp|{ip}|{port}|OUT")
    for spelling in (str(ip), ip.exploded, f"[{ip}]"):
        assert without.judge("tcp", spelling, port, "OUT").allowed
        assert wide.judge("tcp", spelling, port, "OUT").address_class is not None
        assert explicit.judge("tcp", spelling, port, "OUT").allowed


@settings(max_examples=200)
@given(st.sampled_from(V4_CLASSES + V6_CLASSES), st.data())
def test_a_rule_naming_the_range_reaches_it(
    network: IPv4Network | IPv6Network, data: st.DataObject
) -> None:
    ip = data.draw(_in(network))
    address = IPv4Address(ip) if network.version == 4 else IPv6Address(ip)
    if address in (IPv4Address(0), IPv6Address(0)):
        return  # connecting to the unspecified address reaches loopback
    ranged = judge(*WIDE, f"net=ALLOW|tcp|{network}|*|OUT")
    assert ranged.judge("tcp", str(address), 443, "OUT").allowed


@settings(max_examples=200)
@given(st.integers(0, 2**32 - 1).map(IPv4Address))
def test_a_wildcard_still_reaches_ordinary_addresses(ip: IPv4Address) -> None:
    if any(ip in c.network for c in DEFAULTED):
        return
    assert judge(*WIDE).judge("tcp", str(ip), 443, "OUT").allowed


def test_cant_reach_cloud_metadata_by_a_name_granted_by_rule() -> None:
    rule = "net=ALLOW|tcp|metadata.example.test|80|OUT"  # a name that resolved there
    assert judge(rule, classes=False).judge("tcp", "169.254.169.254", 80, "OUT").allowed
    verdict = judge(rule).judge("tcp", "169.254.169.254", 80, "OUT")
    assert (verdict.allowed, verdict.address_class) == (False, "link-local (cloud metadata)")
    assert verdict.fix == "net=ALLOW|tcp|169.254.169.254|80|OUT"
    assert "link-local (cloud metadata)" in refusal_reason(verdict)
    assert not judge(rule).judge("tcp", "fd00:ec2::254", 80, "OUT").allowed


def test_cant_reach_the_lan_by_a_name_or_a_wide_range() -> None:
    for rules in (("net=ALLOW|tcp|lan.example.test|22|OUT",), ("net=ALLOW|tcp|0.0.0.0/0|22|OUT",)):
        verdict = judge(*rules).judge("tcp", "10.0.0.5", 22, "OUT")
        assert verdict.address_class == "private (RFC 1918)"
    assert judge("net=ALLOW|tcp|10.0.0.0/8|*|OUT").judge("tcp", "10.0.0.5", 22, "OUT").allowed


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "::ffff:127.0.0.1", "0.0.0.0"])
def test_localhost_names_loopback(address: str) -> None:
    assert judge("net=ALLOW|tcp|localhost|8000|OUT").judge("tcp", address, 8000, "OUT").allowed
    loopback = judge("net=ALLOW|tcp|*.localhost|8000|OUT")
    assert loopback.judge("tcp", address, 8000, "OUT", name="app.localhost").allowed
    wildcard = judge("net=ALLOW|tcp|*.example.test|8000|OUT")
    assert not wildcard.judge("tcp", address, 8000, "OUT", name="app.example.test").allowed


def test_deny_still_wins_and_binds_are_not_concerned() -> None:
    rules = ("net=ALLOW|tcp|127.0.0.0/8|*|OUT", "net=DENY|tcp|127.0.0.2|*|OUT")
    verdict = judge(*rules).judge("tcp", "127.0.0.2", 80, "OUT")
    assert (verdict.allowed, verdict.address_class) == (False, None)
    assert verdict.rule is not None
    assert judge("net=ALLOW|tcp|*|8000|IN").judge("tcp", "0.0.0.0", 8000, "IN").allowed
