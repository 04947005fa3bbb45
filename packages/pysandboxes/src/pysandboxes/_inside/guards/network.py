"""The network guard: connections, datagrams and binds judged by the ``net=`` rules.

CPython audits ``connect`` (and ``connect_ex``), ``bind``, ``sendto`` and ``sendmsg``
after converting the address; the hook judges every address a name leads to (a name is
allowed only if all its addresses are), the IPv6 spellings of an IPv4 address folded into
it. Name lookups (``getaddrinfo``, ``gethostbyname``...) are refused for names no rule
names when the rules allow only named hosts. With no ``net=`` rule, nothing passes.

AF_UNIX paths are the file guard's; abstract AF_UNIX sockets are refused (no rule can
name them). What this layer cannot see (C code, a name resolved again by the system
between the check and the call) is the kernel layer's.
"""

from __future__ import annotations

import _socket
from _socket import socket as _raw_socket
from _thread import get_ident
from posix import getcwd

from pysandboxes._inside.enforce import Connection
from pysandboxes._inside.guards.dnspins import PINNED_EVENT
from pysandboxes._inside.guards.values import plain_int, plain_str, unix_address
from pysandboxes._inside.recorder import program_site
from pysandboxes._policy import netaddr  # bound now: hidden with the guards' modules
from pysandboxes._policy import netclasses as netclasses  # for NetJudge, hidden with them
from pysandboxes._policy.netnames import NameIndex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from pysandboxes._inside.decisions import DecisionLog
    from pysandboxes._inside.enforce import Enforcer
    from pysandboxes._inside.routing import Router
    from pysandboxes._policy.judge import NetJudge
    from pysandboxes._policy.model import Origin, Policy

_FAMILY = _raw_socket.__dict__["family"]
_TYPE = _raw_socket.__dict__["type"]
_INET = (_socket.AF_INET, _socket.AF_INET6)
_DGRAM = _socket.SOCK_DGRAM
_KINDS = (_socket.SOCK_STREAM, _socket.SOCK_DGRAM)
_ANY_KIND = (_socket.AF_UNIX, -1)
_PROTOCOLS = (0, _socket.IPPROTO_TCP, _socket.IPPROTO_UDP)


def _tuple_len(value: object) -> int:
    return tuple.__len__(value)  # type: ignore[arg-type]


def _tuple_item(value: object, index: int) -> object:
    return tuple.__getitem__(value, index)  # type: ignore[arg-type]


def _text(value: object) -> str | None:
    text = plain_str(value)
    if text is not None:
        return text
    if issubclass(type(value), (bytes, bytearray)):
        # The buffer, as C reads it: a subclass's __bytes__ is never called.
        raw = memoryview(value).tobytes()  # type: ignore[arg-type]
        try:
            return raw.decode("idna") if raw[:1] != b"\0" else raw.decode("latin-1")
        except UnicodeError:
            return None  # not a name C would accept either: refused as unjudgeable
    return None


class NetworkGuard:
    """Judges socket events with the ``net=`` verdicts and refuses with a clear message."""

    def __init__(self, judge: NetJudge, policy: Policy, enforcer: Enforcer, rule_file: str) -> None:
        self._judge = judge
        self._enforcer = enforcer
        self._pinned_names = frozenset(name for name, _ in policy.pins)
        self._rule_file = rule_file
        # When every ALLOW OUT rule names a host (or one address), unknown names are not
        # even looked up: the answer could be used by code the guard does not see.
        self._only_pinned = all(
            rule.host is not None or all(n.num_addresses == 1 for n in rule.networks)
            for rule in policy.net
            if rule.allow and "OUT" in rule.directions
        )
        # The addresses the rules name one by one: the only ones a reverse lookup may ask
        # about when names are pinned (any other would carry 4 or 16 chosen bytes to
        # the DNS server in its in-addr.arpa or ip6.arpa query).
        self._named_addresses = frozenset(
            netaddr.canonical(network.network_address)
            for rule in policy.net
            if rule.allow
            for network in rule.networks
            if network.num_addresses == 1
        )
        self._getaddrinfo: Callable[..., Any] = _socket.getaddrinfo
        self._numeric: set[str] = set()  # host strings that are addresses, not names
        self._passed: set[tuple[str, str, int, str]] = set()
        self._rules: dict[tuple[str, str, int, str], Origin | None] = {}  # for the log
        #: The decision log, when allowed accesses are logged too (``audit-log=``).
        self.log: DecisionLog | None = None
        self._hosts = {rule.host.lower(): rule.origin for rule in policy.net if rule.host}
        # Names a ``*.suffix`` rule allows cannot be pinned: their lookups go to the
        # system, and the addresses answered are remembered here, so that a connection
        # to one is judged as asked by that name (the SSRF-safe defaults still apply).
        self._wildcards = NameIndex(
            r for r in policy.net if r.allow and r.host is not None and r.host.startswith("*.")
        )
        self._answered: dict[str, str] = {}
        self._resolving: set[int] = set()  # threads resolving in _answer (its own event)
        #: When the broker connects for the run (``_inside.routing``): where allowed
        #: connections go, since this process has no route.
        self.router: Router | None = None

    @property
    def events(self) -> dict[str, Callable[[tuple[Any, ...]], None]]:
        """The audit events judged here."""
        handlers: dict[str, Callable[[tuple[Any, ...]], None]] = {
            "socket.__new__": self._new,
            "socket.connect": lambda a: self._address(a, "OUT", "connection to"),
            "socket.sendto": lambda a: self._address(a, "OUT", "datagram to"),
            "socket.sendmsg": lambda a: self._address(a, "OUT", "datagram to"),
            "socket.bind": lambda a: self._address(a, "IN", "bind to"),
            "socket.getaddrinfo": lambda a: self._lookup(a[0] if a else None),
            "socket.gethostbyname": lambda a: self._lookup(a[0] if a else None),
            "socket.gethostbyname_ex": lambda a: self._lookup(a[0] if a else None),
            "socket.gethostbyaddr": lambda a: self._reverse(a[0] if a else None),
            "socket.getnameinfo": lambda a: self._reverse(
                _tuple_item(a[0], 0) if a and issubclass(type(a[0]), tuple) and a[0] else None
            ),
        }
        if self.log is not None:  # a pinned name, answered from the rules (dnspins)
            handlers[PINNED_EVENT] = lambda a: self._pinned(a[0] if a else None)
        return handlers

    def _new(self, args: tuple[Any, ...]) -> None:
        """Only sockets a net= rule can speak of: TCP and UDP over IP, and AF_UNIX."""
        if len(args) < 4:
            return
        family, kind, proto = args[1], args[2], args[3]
        if type(family) is not int or type(kind) is not int or type(proto) is not int:
            return  # not a call the socket constructor accepts
        if family in _ANY_KIND:
            return  # -1: the kind of a descriptor given by number, itself made here
        if family in _INET and kind & 0xF in _KINDS and proto in _PROTOCOLS:
            return
        self._refuse(
            f"Creating a socket of family {family}, type {kind & 0xF}, protocol {proto} is "
            "refused: net= rules speak only of TCP and UDP over IPv4 and IPv6 (and files "
            "speak of AF_UNIX), so no rule can allow raw, packet or other sockets.",
            f"family {family}",
            None,
        )

    def _address(self, args: tuple[Any, ...], direction: str, what: str) -> None:
        sock, address = args[0], args[1] if len(args) > 1 else None
        if not issubclass(type(sock), _raw_socket):
            return
        family = _FAMILY.__get__(sock)
        if family == _socket.AF_UNIX:
            raw = unix_address(address) if address is not None else None
            if raw is not None and raw[:1] == b"\0":
                name = raw.decode("latin-1")
                message = (
                    f"The {what} the abstract socket {name[1:]!r} is refused: no rule names it."
                )
                self._refuse(message, name, None)
            return  # a path, or an unknowable address: the file guard judges it
        if family not in _INET or not issubclass(type(address), tuple):
            return
        # What C reads: the tuple's own items, whatever a subclass says of itself.
        if _tuple_len(address) < 2:
            return
        host, port = _text(_tuple_item(address, 0)), plain_int(_tuple_item(address, 1))
        if host is None or port is None:
            message = (
                f"The {what} an address whose host is not a string or whose port is not an "
                "integer is refused: it cannot be judged."
            )
            self._refuse(message, "?", None)
            return
        proto = "udp" if _TYPE.__get__(sock) & 0xF == _DGRAM else "tcp"
        # The names C reads itself, before any lookup (socketmodule.c, setipaddr): "" is
        # the wildcard address (this host, when connecting) and "<broadcast>" is
        # 255.255.255.255. Neither resolves through getaddrinfo, which judged nothing.
        if host == "":
            host = "0.0.0.0" if family == _socket.AF_INET else "::"
        elif host == "<broadcast>":
            host = "255.255.255.255"
        router = self.router
        routed = router is not None and proto == "tcp" and direction == "OUT"
        if routed and self._route(router, host, port):  # type: ignore[arg-type]
            return
        key = (proto, host, port, direction)
        if key in self._passed:
            if self.log is not None:
                self.log.allowed("net", f"{proto}:{host}:{port}", direction, self._judge_rule(key))
            return  # an address (never a name: its answer may move) allowed before
        asked = host if self._wildcards and self._wildcards.rules(host) else None
        for ip in self._addresses(host, port, family):
            name = asked or (self._answered.get(ip) if self._answered else None)
            verdict = self._judge.judge(proto, ip, port, direction, name)
            if verdict.allowed and self.log is not None:
                self.log.allowed("net", f"{proto}:{host}:{port}", direction, verdict.rule)
            if not verdict.allowed:
                shown = f"[{ip}]:{port}" if host == ip else f"{host} ([{ip}]:{port})"
                if verdict.rule is not None:
                    message = f"The {what} {shown} is refused by {verdict.rule}."
                elif verdict.address_class is not None:
                    message = (
                        f"The {what} {shown} is refused: the address is "
                        f"{verdict.address_class}, which no wildcard or host name rule "
                        "reaches (an SSRF-safe default); only a rule naming the address "
                        f"or its range does. Add '{verdict.fix}' to {self._rule_file} to "
                        "allow it."
                    )
                else:
                    message = f"The {what} {shown} is refused: no net= rule allows it."
                    if verdict.fix:
                        message += f" Add '{verdict.fix}' to {self._rule_file} to allow it."
                rule = str(verdict.rule) if verdict.rule else None
                fix = verdict.fix or "" if verdict.address_class else ""  # the address's
                target = Connection(proto, host, port, direction, (ip,), fix)
                self._refuse(message, f"{host}:{port}", rule, target)
        if host in self._numeric:
            if len(self._passed) > 4096:
                self._passed.clear()
            self._passed.add(key)

    def _route(self, router: Router, host: str, port: int) -> bool:
        """Send a connection to the trusted side (``_inside.routing``) when the rules
        allow it here, or name its host (whose address only the trusted side's defaults
        judge); ``False`` when it is judged here as before (and refused, or finds no
        route). A name no rule names is looked up, and refused, as before."""
        address = host.split("%")[0]
        if netaddr.parse_address(address) is None:
            if self._judge.allows_name("tcp", host, port, "OUT") is None:
                return False
            name = host
        else:
            name = router.answered.get(address)
            verdict = self._judge.judge("tcp", address, port, "OUT", name)
            if not verdict.allowed and (name is None or verdict.address_class is None):
                return False
        # The program's line, for the decision log the trusted side writes.
        where = program_site(getcwd().rstrip("/") + "/")[0] or ""
        refusal = router.route(name or address, port, where)
        if refusal is None:
            return False  # not a connect the wrappers know of: no route
        target = Connection("tcp", host, port, "OUT", (address,), "")
        self._refuse(refusal, f"{host}:{port}", None, target)
        return True

    def _addresses(self, host: str, port: int, family: int) -> list[str]:
        if host in self._numeric or netaddr.parse_address(host) is not None:
            self._remember(host)
            return [host]
        # Judged on a fresh answer, not the pinned one: the system resolves the name again,
        # and an answer that moved outside the rule's pinned addresses must be refused.
        self._lookup(host)
        try:
            infos = self._getaddrinfo(host, port, family)
        except OSError:
            return []  # the system call will fail the same way
        return list(dict.fromkeys(str(info[4][0]).split("%")[0] for info in infos))

    def _pinned(self, name: object) -> None:
        """A name answered from the rules' pins: an allowed lookup, for the decision log."""
        host = _text(name)
        if host is not None and self.log is not None and host in self._pinned_names:
            self.log.allowed("lookup", host, "OUT", self._hosts.get(host))

    def _lookup(self, name: object) -> None:
        host = _text(name)
        if host is None or host in self._numeric:
            return
        if self._wildcards and self._wildcards.rules(host):
            if get_ident() not in self._resolving:  # not the lookup _answer makes
                self._answer(host)
                if self.log is not None:
                    self.log.allowed("lookup", host, "OUT", self._wildcards.rules(host)[0].origin)
            return
        if not self._only_pinned:
            return
        if netaddr.parse_address(host) is not None:
            self._remember(host)
            return
        if host.lower().rstrip(".") in self._pinned_names:
            if self.log is not None:
                self.log.allowed("lookup", host, "OUT", self._hosts.get(host.lower().rstrip(".")))
            return
        self._refuse(
            f"Looking up the name {host!r} is refused: no net= rule names it. Add a rule "
            f"such as 'net=ALLOW|tcp|{host}|443|OUT' to {self._rule_file} to allow it.",
            host,
            None,
            Connection("", host, 0, "lookup"),
        )

    def _answer(self, host: str) -> None:
        """Resolve ``host``, a name a ``*.suffix`` rule allows, and remember which name
        each address answered stands for (bounded). The program's own lookup follows:
        an address it gets that this one did not is judged as an address alone."""
        thread = get_ident()
        self._resolving.add(thread)
        try:
            infos = self._getaddrinfo(host, None)
        except OSError:
            return  # the program's lookup fails the same way
        finally:
            self._resolving.discard(thread)
        if len(self._answered) > 4096:
            self._answered.clear()
        for info in infos:
            self._answered[str(info[4][0]).split("%")[0]] = host

    def _reverse(self, name: object) -> None:
        """``gethostbyaddr`` and ``getnameinfo``: a name is looked up first, and an address
        is asked about in a query whose name is the address itself."""
        host = _text(name)
        if host is None or not self._only_pinned:
            return
        parsed = netaddr.parse_address(host)
        if parsed is None:
            self._lookup(host)
            return
        if netaddr.canonical(parsed) in self._named_addresses:
            return
        self._refuse(
            f"Looking up the name of the address {host!r} is refused: no net= rule names "
            "that address, and the query would carry it to the DNS server.",
            host,
            None,
            Connection("", host, 0, "lookup"),
        )

    def _judge_rule(self, key: tuple[str, str, int, str]) -> Origin | None:
        """The rule that allowed an address passed before (for the decision log): judged
        once, since the rules never change (a judgement costs more than the connection)."""
        if key not in self._rules:
            if len(self._rules) > 4096:
                self._rules.clear()
            self._rules[key] = self._judge.judge(key[0], key[1], key[2], key[3]).rule
        return self._rules[key]

    def _remember(self, host: str) -> None:
        if len(self._numeric) > 4096:  # bounded: a program may try many spellings
            self._numeric.clear()
        self._numeric.add(host)

    def _refuse(
        self, message: str, address: str, rule: str | None, target: Connection | None = None
    ) -> None:
        self._enforcer.refuse_connection(message, address, rule, target)
