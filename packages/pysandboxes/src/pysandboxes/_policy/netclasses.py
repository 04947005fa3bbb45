"""The addresses no wide ``net=`` rule reaches: SSRF-safe defaults, as data.

A rule that names a host by name (``net=ALLOW|tcp|api.github.com|443|OUT``) or a wildcard
(``net=ALLOW|tcp|*|443|OUT``) means "that service" or "the internet". It does not mean the
machine itself, the LAN, or the cloud's metadata service, which a name can be made to
resolve to (DNS rebinding) and a wildcard covers by accident. So an outgoing connection
or datagram to an address of a class below is refused, whatever such a rule allows,
unless a rule names that address or a range of its class explicitly
(``net=ALLOW|tcp|127.0.0.1|8000|OUT``, ``net=ALLOW|tcp|10.0.0.0/8|*|OUT``), or, for
loopback, names ``localhost`` (or ``*.localhost``, which RFC 6761 keeps on loopback).

The classes are judged on the address as the host reaches it (``netaddr.reached``): the
IPv4-mapped, translated, compatible and NAT64 spellings of ``169.254.169.254`` are that
address. ``0.0.0.0/0`` and ``::/0`` are wildcards here too: a range counts as explicit
only when it lies inside the class it reaches. Binds (``IN``) are not concerned: a server
listening on ``0.0.0.0`` is the program's own business, and its rule says which port.
"""

from __future__ import annotations

from ipaddress import IPv4Network, IPv6Network

from pysandboxes._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pysandboxes._policy.netaddr import IPAddress, IPNetwork


@record
class AddressClass:
    """One range of addresses a wide rule does not reach.

    Attributes:
        network: the range.
        label: what it is, as a refusal says it ("link-local (cloud metadata)").
    """

    network: IPv4Network | IPv6Network
    label: str


def _table(*rows: tuple[str, str]) -> tuple[AddressClass, ...]:
    made: list[AddressClass] = []
    for text, label in rows:
        network: IPv4Network | IPv6Network = IPv6Network(text) if ":" in text else IPv4Network(text)
        made.append(AddressClass(network, label))
    return tuple(made)


#: The defaulted classes, most specific first: an address takes the label of the first
#: range holding it. Documentation ranges (``192.0.2.0/24``, ``2001:db8::/32``) are not
#: here: nothing answers there, and examples use them.
DEFAULTED: tuple[AddressClass, ...] = _table(
    ("169.254.169.254/32", "link-local (cloud metadata)"),
    ("fd00:ec2::254/128", "link-local (cloud metadata)"),
    ("127.0.0.0/8", "loopback"),
    ("::1/128", "loopback"),
    ("10.0.0.0/8", "private (RFC 1918)"),
    ("172.16.0.0/12", "private (RFC 1918)"),
    ("192.168.0.0/16", "private (RFC 1918)"),
    ("fc00::/7", "private (unique local)"),
    ("fec0::/10", "private (site-local)"),
    ("169.254.0.0/16", "link-local"),
    ("fe80::/10", "link-local"),
    ("100.64.0.0/10", "shared (CGNAT)"),
    ("224.0.0.0/4", "multicast"),
    ("ff00::/8", "multicast"),
    ("255.255.255.255/32", "broadcast"),
    ("0.0.0.0/8", "unspecified (this network)"),
    ("::/128", "unspecified"),
    ("240.0.0.0/4", "reserved"),
    ("192.0.0.0/24", "reserved (IETF protocol assignments)"),
    ("198.18.0.0/15", "reserved (benchmarking)"),
)

#: Names that mean this machine (RFC 6761 for ``localhost`` and below it; the last two
#: are the C library's): a rule naming one names loopback explicitly.
LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost", "ip6-loopback"})


def names_loopback(pattern: str) -> bool:
    """Whether a rule's host (a name or ``*.name`` pattern) can only mean loopback."""
    pattern = pattern.lower().rstrip(".")
    return pattern in LOOPBACK_NAMES or pattern.endswith(".localhost")


class Classifier:
    """Finds the class of an address in a handful of integer operations (it runs for
    every judged connection, so no ``ipaddress`` containment test is made)."""

    def __init__(self, table: tuple[AddressClass, ...] = DEFAULTED) -> None:
        self.table = table
        self._rows = {
            version: [
                (int(row.network.network_address), int(row.network.netmask), row)
                for row in table
                if row.network.version == version
            ]
            for version in (4, 6)
        }

    def classify(self, ip: IPAddress) -> AddressClass | None:
        """The class of the folded address ``ip``, ``None`` for an ordinary one."""
        value = int(ip)
        for start, mask, row in self._rows[ip.version]:
            if value & mask == start:
                return row
        return None

    def inside(self, network: IPNetwork) -> bool:
        """Whether ``network`` lies inside one defaulted class: naming it is explicit."""
        return any(
            row.network.version == network.version and network.subnet_of(row.network)  # type: ignore[arg-type]
            for row in self.table
        )
