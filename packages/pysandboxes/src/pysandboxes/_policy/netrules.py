"""``net=ACTION|PROTO|NETWORK|PORTS|DIRECTION`` lines and the hostnames they pin.

A hostname in a rule is resolved once, when the rules are read, and the addresses are
kept: the sandbox answers name lookups for it with exactly those addresses (DNS pinning),
so a later change of the name's records cannot widen what the rule allows.
"""

from __future__ import annotations

import time

from pysandboxes._policy import netaddr
from pysandboxes._policy.model import NetRule, Origin

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from pysandboxes._policy.lines import Sink

if TYPE_CHECKING:
    #: Resolves a hostname to its addresses; raises ``OSError`` when it cannot.
    Resolver = Callable[[str], list[str]]

FORMAT = "net=ACTION|PROTO|NETWORK|PORTS|DIRECTION"
#: What a label of a host name may hold (ASCII letters and digits, ``_`` and ``-``).
_LABEL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def is_name_pattern(text: str) -> bool:
    """Whether ``text`` is ``*.`` followed by a host name of at least two labels (a
    pattern over a top-level domain, ``*.com``, would be nearly as wide as ``*``), or
    ``*.localhost`` (RFC 6761: loopback); see ``netnames`` for how it matches."""
    if not text.startswith("*."):
        return False
    suffix = text[2:-1] if text.endswith(".") else text[2:]
    return is_host_name(suffix) and ("." in suffix or suffix.lower() == "localhost")


def is_host_name(text: str) -> bool:
    """Whether ``text`` is a host name a ``net=`` rule accepts: 1 to 253 characters,
    labels of 1 to 63 characters joined by dots, the first not starting with ``-``, one
    final dot allowed. By hand, not by ``re``: reading the rules must not pay for
    importing it (milliseconds of every start)."""
    if not 0 < len(text) <= 253:
        return False
    labels = (text[:-1] if text.endswith(".") else text).split(".")
    if labels[0].startswith("-"):
        return False
    return all(0 < len(label) <= 63 and _LABEL.issuperset(label) for label in labels)


_BUILTIN_HOSTS = {
    "localhost": ["127.0.0.1", "::1"],
    "ip6-localhost": ["::1"],
    "ip6-loopback": ["::1"],
}
_RETRY_DELAYS = (0.2, 0.4)


#: The test-only hosts file (``_host.egress``): read instead of the system's, when set.
HOSTS_VARIABLE = "PYSANDBOXES_TEST_HOSTS"


def hosts_file_resolver(path: str) -> Resolver:
    """A resolver that reads ``path`` (``hosts(5)``: ``address name...``, ``#`` comments)
    at each lookup; a name it does not hold does not resolve."""

    def resolve(name: str) -> list[str]:
        import socket

        wanted = name.lower().rstrip(".")
        found: list[str] = []
        with open(path, encoding="utf-8") as file:
            for line in file:
                fields = line.partition("#")[0].split()
                if len(fields) >= 2 and wanted in (f.lower() for f in fields[1:]):
                    found.append(fields[0])
        if not found:
            raise socket.gaierror(socket.EAI_NONAME, f"{name} is not in the hosts file {path}")
        return found

    return resolve


def system_resolver(host: str) -> list[str]:
    """Resolve with the system resolver (``/etc/hosts`` first), retrying transient errors;
    with the test-only ``PYSANDBOXES_TEST_HOSTS`` set, from that file alone."""
    import os
    import socket

    path = os.environ.get(HOSTS_VARIABLE)
    if path:
        return hosts_file_resolver(path)(host)

    for delay in (*_RETRY_DELAYS, None):
        try:
            # As ASCII bytes: a str goes through the idna codec, whose import (re,
            # stringprep, unicodedata) would cost milliseconds of a start.
            name = host.encode("ascii") if host.isascii() else host
            infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
        except socket.gaierror as exc:
            if exc.errno in (socket.EAI_AGAIN, socket.EAI_SYSTEM) and delay is not None:
                time.sleep(delay)
                continue
            if host.lower() in _BUILTIN_HOSTS:
                return list(_BUILTIN_HOSTS[host.lower()])
            raise
        return list(dict.fromkeys(str(info[4][0]).split("%")[0] for info in infos))
    raise OSError(f"cannot resolve {host}")  # pragma: no cover - the loop always returns


def parse_net(sink: Sink, origin: Origin, value: str, resolve: Resolver) -> None:
    """Validate one ``net=`` value and add the ``NetRule`` (and its pin) to ``sink``."""
    fields = value.split("|")
    if len(fields) != 5:
        sink.issue(origin, f"'{origin.text}': expected {FORMAT} (5 fields, found {len(fields)})")
        return
    action, proto, network, ports_text, direction = (f.strip() for f in fields)
    problems: list[str] = []
    if action not in ("ALLOW", "DENY"):
        problems.append(f"action '{action}' must be ALLOW or DENY")
    protos = _protos(proto, problems)
    ports = netaddr.parse_ports(ports_text)
    if ports is None:
        problems.append(f"invalid port list '{ports_text}' (use *, N, A-B, A- or a comma list)")
    elif not ports:
        sink.warn(origin, f"'{origin.text}' names no port: it matches nothing")
    directions = _directions(direction, problems)
    for problem in problems:
        sink.issue(origin, f"'{origin.text}': {problem}")
    if problems or ports is None:
        return
    allow = action == "ALLOW"
    host: str | None = None
    if network == "*":
        networks = netaddr.EVERYWHERE
    else:
        parsed = netaddr.parse_network(network)
        if parsed is not None:
            networks = (parsed,)
        elif is_name_pattern(network):
            # Matched against the name the program asks for; nothing to pin.
            host, networks = network.lower().rstrip("."), ()
        elif "/" not in network and is_host_name(network):
            host = network.lower().rstrip(".")
            resolved = _resolve(sink, origin, host, allow, resolve)
            if resolved is None:
                return
            networks = resolved
        elif "*" in network:
            sink.issue(
                origin,
                f"'{origin.text}': '{network}': a wildcard stands for whole labels at the "
                "start of a name of two labels or more (*.example.com), or alone (*)",
            )
            return
        else:
            sink.issue(origin, f"'{origin.text}': '{network}' is not an address, network or name")
            return
    sink.add("net", NetRule(allow, protos, networks, host, ports, directions, origin))


def _protos(text: str, problems: list[str]) -> frozenset[str]:
    items = [p.strip().lower() for p in text.split(",")]
    if items in (["*"], ["any"]):
        return frozenset({"tcp", "udp"})
    if "*" in items or "any" in items:
        problems.append(f"protocol '{text}': a wildcard stands alone")
    bad = [p for p in items if p not in ("tcp", "udp", "*", "any")]
    if bad:
        problems.append(f"unknown protocol '{bad[0]}' (use tcp, udp or *)")
    return frozenset(p for p in items if p in ("tcp", "udp"))


def _directions(text: str, problems: list[str]) -> frozenset[str]:
    items = [d.strip() for d in text.split(",")]
    if items == ["*"]:
        return frozenset({"IN", "OUT"})
    if any(d not in ("IN", "OUT") for d in items):
        problems.append(f"direction '{text}' must be IN, OUT, IN,OUT or *")
    return frozenset(d for d in items if d in ("IN", "OUT"))


def _resolve(
    sink: Sink, origin: Origin, host: str, allow: bool, resolve: Resolver
) -> tuple[netaddr.IPNetwork, ...] | None:
    try:
        addresses = resolve(host)
    except (OSError, UnicodeError) as exc:
        addresses = []
        reason = str(exc) or type(exc).__name__
    else:
        reason = "no address"
    networks: list[netaddr.IPNetwork] = []
    for text in addresses:
        network = netaddr.parse_network(text)
        if network is not None and network not in networks:
            networks.append(network)
    if networks:
        sink.add("pins", (host, tuple(str(n.network_address) for n in networks)))
        return tuple(networks)
    if allow:
        sink.warn(origin, f"'{host}' does not resolve ({reason}): the rule allows nothing")
    else:
        # A DENY that silently matched nothing would open what it was meant to close.
        sink.issue(origin, f"'{origin.text}': '{host}' does not resolve ({reason})")
    return None


def merge_pins(
    pins: Iterable[tuple[str, tuple[str, ...]]],
) -> Iterator[tuple[str, tuple[str, ...]]]:
    """Each pinned hostname once, its addresses merged in order."""
    merged: dict[str, list[str]] = {}
    for host, addresses in pins:
        known = merged.setdefault(host, [])
        known.extend(a for a in addresses if a not in known)
    for host, addresses in merged.items():
        yield host, tuple(addresses)
