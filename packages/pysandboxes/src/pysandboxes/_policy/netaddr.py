"""Addresses, networks and ports as the ``net=`` rules and the network guard see them.

An address is judged as the host it reaches, whatever its spelling: the alternative IPv4
forms the C library accepts (``127.1``, ``0x7f.1``, ``2130706433``, ``0177.0.0.1``), and
the IPv6 encodings of an IPv4 address (mapped ``::ffff:a.b.c.d``, translated
``::ffff:0:a.b.c.d``, compatible ``::a.b.c.d``, NAT64 ``64:ff9b::/96``) all fold into the
plain IPv4 address, so a rule on ``127.0.0.1`` cannot be walked around by a respelling.
"""

from __future__ import annotations

from ipaddress import (
    IPv4Address,
    IPv4Network,
    IPv6Address,
    IPv6Network,
    ip_address,
    ip_network,
)

IPAddress = IPv4Address | IPv6Address
IPNetwork = IPv4Network | IPv6Network

_NAT64 = IPv6Network("64:ff9b::/96")
_TRANSLATED = IPv6Network("::ffff:0:0:0/96")
_COMPATIBLE = IPv6Network("::/96")
_ANY_V4 = IPv4Address("0.0.0.0")
_ANY_V6 = IPv6Address("::")

#: Every address, for ``*`` in a rule.
EVERYWHERE: tuple[IPNetwork, ...] = (IPv4Network("0.0.0.0/0"), IPv6Network("::/0"))


def _inet_aton_part(text: str) -> int | None:
    if not text:
        return None
    try:
        if text[:2] in ("0x", "0X"):
            return int(text[2:], 16) if text[2:] else 0
        if len(text) > 1 and text[0] == "0":
            return int(text[1:], 8)
        return int(text, 10) if text.isdigit() else None
    except ValueError:
        return None


def parse_ipv4_loose(text: str) -> IPv4Address | None:
    """Parse the IPv4 spellings of ``inet_aton``: 1 to 4 parts, decimal, octal or hex."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4 or any(not p.isalnum() for p in parts):
        return None
    numbers = [_inet_aton_part(p) for p in parts]
    if any(n is None for n in numbers):
        return None
    values = [n for n in numbers if n is not None]
    *head, last = values
    if any(n > 255 for n in head) or last >= 1 << (8 * (4 - len(head))):
        return None
    value = 0
    for n in head:
        value = value << 8 | n
    value = value << (8 * (4 - len(head))) | last
    return IPv4Address(value)


def parse_address(text: str) -> IPAddress | None:
    """Parse an address in any spelling the system accepts; ``None`` for a hostname.

    Brackets (``[::1]``) and an IPv6 zone (``fe80::1%eth0``) are accepted and dropped.
    """
    candidate = text.strip()
    if candidate.startswith("[") and candidate.endswith("]"):
        candidate = candidate[1:-1]
    if ":" in candidate:
        candidate = candidate.split("%", 1)[0]
        try:
            return ip_address(candidate)
        except ValueError:
            return None
    return parse_ipv4_loose(candidate)


def canonical(address: IPAddress) -> IPAddress:
    """The address as the host it reaches: IPv6 encodings of IPv4 become IPv4."""
    if isinstance(address, IPv4Address):
        return address
    mapped = address.ipv4_mapped
    if mapped is not None:
        return mapped
    if address in _NAT64 or address in _TRANSLATED:
        return IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _COMPATIBLE and int(address) > 1:
        return IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def reached(address: IPAddress, *, outgoing: bool) -> IPAddress:
    """The address a connection really reaches: ``0.0.0.0`` and ``::`` mean this host."""
    address = canonical(address)
    if outgoing and address == _ANY_V4:
        return IPv4Address("127.0.0.1")
    if outgoing and address == _ANY_V6:
        return IPv6Address("::1")
    return address


def parse_network(text: str) -> IPNetwork | None:
    """Parse an address or CIDR network (host bits allowed); IPv4 encodings folded."""
    address_part, slash, prefix = text.partition("/")
    address = parse_address(address_part)
    if address is None:
        return None
    folded = canonical(address)
    if not slash:
        return ip_network(folded)
    if not prefix.isdigit():
        return None
    length = int(prefix)
    if folded is not address:
        # An IPv6 prefix over an IPv4 encoding: keep the IPv4 part of it.
        length -= 96
        if length < 0:
            return None
    try:
        return ip_network(f"{folded}/{length}", strict=False)
    except ValueError:
        return None


def parse_ports(text: str) -> tuple[tuple[int, int], ...] | None:
    """Parse ``*``, ``N``, ``A-B``, ``A-`` and comma lists of them; ``None`` when invalid.

    An empty text gives no port at all (the rule then matches nothing).
    """
    text = text.strip()
    if text == "*":
        return ((0, 65535),)
    if not text:
        return ()
    ranges: list[tuple[int, int]] = []
    for item in text.split(","):
        low_text, dash, high_text = item.strip().partition("-")
        if not low_text.isdigit() or (high_text and not high_text.isdigit()):
            return None
        low = int(low_text)
        high = int(high_text) if high_text else (65535 if dash else low)
        if not 0 <= low <= high <= 65535:
            return None
        ranges.append((low, high))
    return tuple(ranges)


def format_ports(ranges: tuple[tuple[int, int], ...]) -> str:
    """The inverse of ``parse_ports``, for messages and learned rules."""
    if ranges == ((0, 65535),):
        return "*"
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in ranges)
