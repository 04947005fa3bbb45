"""The ``net=`` verdict: an address (and the name it was asked by) against the rules.

Order, for each address:

1. a matching ``DENY`` (by address, or by the name asked for) refuses, whatever the widths;
2. a matching ``ALLOW`` (by address or by name) is needed; nothing matching is the
   default deny, whose verdict names the line to add;
3. an outgoing connection to an address of a defaulted class (``netclasses``: loopback,
   private, link-local and cloud metadata, CGNAT, multicast...) needs, besides, a rule
   that names that address or a range of its class explicitly, or names ``localhost``
   for loopback. A wildcard or a name does not: the verdict says which class refused and
   the line that would allow it.

Every user of the rules asks this one judge: the Python layer's guards, the socket
broker judging native code, the trusted side's egress connect and CONNECT proxy, replay.
"""

from __future__ import annotations

from pysandboxes._policy.model import Verdict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from ipaddress import IPv4Address, IPv6Address

    from pysandboxes._policy.model import NetRule
    from pysandboxes._policy.netaddr import IPNetwork
    from pysandboxes._policy.netclasses import AddressClass


class _NetIndex:
    """The rules of one action, indexed for a lookup per distinct prefix length.

    For each (protocol, direction, IP version, prefix length) present in the rules, a dict
    maps the masked network to its rules: judging an address costs a handful of dict
    lookups, not a scan of every rule. ``keep`` says which of a rule's networks count.
    """

    def __init__(
        self,
        rules: Iterable[NetRule],
        keep: Callable[[NetRule, IPNetwork], bool] | None = None,
    ) -> None:
        self._buckets: dict[tuple[str, str, int], list[_Prefix]] = {}
        for rule in rules:
            for network in rule.networks:
                if keep is not None and not keep(rule, network):
                    continue
                version = network.version
                for proto in rule.protos:
                    for direction in rule.directions:
                        prefixes = self._buckets.setdefault((proto, direction, version), [])
                        prefix = next((p for p in prefixes if p.length == network.prefixlen), None)
                        if prefix is None:
                            prefix = _Prefix(network.prefixlen, int(network.netmask), {})
                            prefixes.append(prefix)
                        key = int(network.network_address)
                        prefix.networks.setdefault(key, []).append(rule)

    def find(
        self, proto: str, direction: str, ip: IPv4Address | IPv6Address, port: int
    ) -> NetRule | None:
        prefixes = self._buckets.get((proto, direction, ip.version))
        if not prefixes:
            return None
        value = int(ip)
        for prefix in prefixes:
            rules = prefix.networks.get(value & prefix.mask)
            if rules:
                for rule in rules:
                    for low, high in rule.ports:
                        if low <= port <= high:
                            return rule
        return None


class _Prefix:
    __slots__ = ("length", "mask", "networks")

    def __init__(self, length: int, mask: int, networks: dict[int, list[NetRule]]) -> None:
        self.length = length
        self.mask = mask
        self.networks = networks


class NetJudge:
    """Judges (protocol, address, port, direction), and the name asked for, against the
    ``net=`` rules and the SSRF-safe defaults (see the module docstring).

    ``classes`` replaces the defaulted classes (``netclasses.DEFAULTED``); only tests
    pass it, to let a loopback address play a public one.
    """

    def __init__(
        self, rules: Sequence[NetRule], classes: tuple[AddressClass, ...] | None = None
    ) -> None:
        # ipaddress is loaded only when the network is judged, not at every start.
        from pysandboxes._policy import netaddr, netclasses, netnames

        self._netaddr = netaddr
        self._names_loopback = netclasses.names_loopback
        self._classes = netclasses.Classifier(netclasses.DEFAULTED if classes is None else classes)
        self._deny = _NetIndex(r for r in rules if not r.allow)
        self._allow = _NetIndex(r for r in rules if r.allow)
        self._explicit = _NetIndex((r for r in rules if r.allow), self._names_explicitly)
        self._deny_names = netnames.NameIndex(r for r in rules if not r.allow)
        self._allow_names = netnames.NameIndex(r for r in rules if r.allow)
        self._anywhere = next(
            (r for r in rules if r.allow and _reaches_out(r) and any(_wide(n) for n in r.networks)),
            None,
        )

    def _names_explicitly(self, rule: NetRule, network: IPNetwork) -> bool:
        """Whether ``rule`` names ``network`` explicitly: an address or a range inside a
        defaulted class, or a loopback address of a rule naming ``localhost``."""
        if not self._classes.inside(network):
            return False
        if rule.host is None:
            return True
        found = self._classes.classify(network.network_address)
        return self._names_loopback(rule.host) and found is not None and found.label == "loopback"

    @property
    def names_hosts(self) -> bool:
        """Whether a rule names a host by name or ``*.suffix`` pattern."""
        return bool(self._allow_names or self._deny_names)

    def allows_lookup(self, name: str) -> NetRule | None:
        """The first ALLOW rule naming ``name`` for outgoing TCP, whatever its ports, or
        reaching every address (``*``): a lookup the trusted side answers (each
        connection is judged with its port and its address)."""
        for rule in self._allow_names.rules(name):
            if _reaches_out(rule):
                return rule
        return self._anywhere

    def allows_name(self, proto: str, name: str, port: int, direction: str) -> NetRule | None:
        """The ALLOW rule naming ``name`` (by name or pattern), unless a DENY names it."""
        if self._deny_names.find(proto, name, port, direction) is not None:
            return None
        return self._allow_names.find(proto, name, port, direction)

    def judge(
        self,
        proto: str,
        address: str | IPv4Address | IPv6Address,
        port: int,
        direction: str,
        name: str | None = None,
    ) -> Verdict:
        """The verdict for one address; ``address`` may use any accepted spelling, and
        ``name`` is the host name the program asked for, when it asked by name."""
        netaddr = self._netaddr
        parsed = netaddr.parse_address(address) if isinstance(address, str) else address
        if parsed is None:
            return Verdict(False, None, fix=None)
        ip = netaddr.reached(parsed, outgoing=direction == "OUT")
        rule = self._deny.find(proto, direction, ip, port)
        if rule is None and name is not None and self._deny_names:
            rule = self._deny_names.find(proto, name, port, direction)
        if rule is not None:
            return Verdict(False, rule.origin)
        by_name = None
        if name is not None and self._allow_names:
            by_name = self._allow_names.find(proto, name, port, direction)
        rule = self._allow.find(proto, direction, ip, port) or by_name
        found = self._classes.classify(ip) if direction == "OUT" else None
        if rule is None:
            shown = name if name is not None and found is None else ip
            return Verdict(False, None, fix=f"net=ALLOW|{proto}|{shown}|{port}|{direction}")
        if found is None:
            return Verdict(True, rule.origin)
        if (
            by_name is not None
            and found.label == "loopback"
            and by_name.host is not None
            and self._names_loopback(by_name.host)
        ):
            return Verdict(True, by_name.origin)  # net=ALLOW|tcp|localhost|...
        explicit = self._explicit.find(proto, direction, ip, port)
        if explicit is not None:
            return Verdict(True, explicit.origin)
        return Verdict(
            False,
            None,
            fix=f"net=ALLOW|{proto}|{ip}|{port}|{direction}",
            address_class=found.label,
        )


_TCP, _OUT = frozenset({"tcp"}), frozenset({"OUT"})


def _reaches_out(rule: NetRule) -> bool:
    return "tcp" in rule.protos and "OUT" in rule.directions


def _wide(network: IPNetwork) -> bool:
    return network.prefixlen == 0


def brokered(rules: Sequence[NetRule]) -> bool:
    """Whether the broker connects for this run (``_host.egressroutes``): an ALLOW rule
    reaches out by name, pattern or wildcard (``*``), and every ALLOW rule is outgoing
    TCP. A rule that listens (``IN``) or speaks UDP keeps the host's network, judged by
    the Python layer and Landlock's ports as before: the empty namespace would have no
    way in, and the broker hands over connections, not datagrams."""
    allowed = [rule for rule in rules if rule.allow]
    if not allowed or any(r.protos != _TCP or r.directions != _OUT for r in allowed):
        return False
    return any(r.host is not None or any(_wide(n) for n in r.networks) for r in allowed)


def refusal_reason(verdict: Verdict) -> str:
    """Why ``verdict`` refuses, in a few words: ``by 'net=DENY|...' from f(3)``, ``the
    address is loopback, which no rule names explicitly``, ``no net= rule allows it``."""
    if verdict.rule is not None:
        return f"by {verdict.rule}"
    if verdict.address_class is not None:
        return (
            f"the address is {verdict.address_class}, which a wildcard or a host name does "
            "not reach: only a rule naming the address or its range does"
        )
    return "no net= rule allows it"
