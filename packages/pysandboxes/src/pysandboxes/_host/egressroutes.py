"""The broker connects: the trusted side of a run whose network is the broker alone.

When the rules reach out by name, pattern or wildcard and only so (``netjudge.brokered``)
and the sandbox runs under ``landlock``, it has a network namespace of its own with no
interface up: nothing it does reaches any address. Its Python layer sends what the
rules allow over the permission requests' socket (``_wire.asks``, decoded by
``codec.decode_ask`` alone) as requests nobody is asked about:

- ``route``: a TCP connection to a name or an address. ``egress.judged_connect``
  resolves the name here, judges each address with the rules and the SSRF-safe
  defaults, connects to an allowed one and the descriptor is handed over
  (``SCM_RIGHTS``); the program's socket goes on on it (``_inside.routing``). What the
  judge refuses is refused with its reason and the line that would allow it.
- ``lookup``: a name an ALLOW rule names (a pattern's name, which the rules could not
  pin) or any name under ``*``, resolved here; the sandbox's ``getaddrinfo`` returns
  the addresses, and a connection to one is sent back here by that name, resolved and
  judged again (so resolution and connect happen together, here).

Each connection is in the decision log, when the run keeps one: the name, the address
connected, the port, the verdict and the rule.

Tests only: besides ``PYSANDBOXES_TEST_HOSTS`` (``egress``), ``PYSANDBOXES_TEST_PUBLIC``
names loopback addresses (``127.0.0.2``) that play public addresses here, so that a
test can show a name reaching a listener; it can take nothing but addresses of
``127.0.0.0/8`` out of the defaulted classes. Both are read by the launcher and sealed
for the waiter (``settings``), whose environment is empty.
"""

from __future__ import annotations

from pysandboxes._wire.asks import DENY, ONCE, Answer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from pysandboxes._host.auditlog import LogWriter
    from pysandboxes._host.egress import Resolver
    from pysandboxes._policy.model import NetRule, Origin
    from pysandboxes._policy.netclasses import AddressClass
    from pysandboxes._policy.netjudge import NetJudge
    from pysandboxes._wire.asks import Ask

#: The test-only variable of the addresses that play public ones (module docs).
PUBLIC_VARIABLE = "PYSANDBOXES_TEST_PUBLIC"
#: How a failure to connect (not a refusal) is said to the sandbox: ``E`` and its errno.
FAILED = "E"


def settings(environ: Mapping[str, str]) -> tuple[str, str]:
    """The test-only settings of the launcher's environment, for the waiter."""
    from pysandboxes._policy.netrules import HOSTS_VARIABLE

    return environ.get(HOSTS_VARIABLE, ""), environ.get(PUBLIC_VARIABLE, "")


def playing_public(addresses: str) -> tuple[AddressClass, ...] | None:
    """The defaulted classes without the loopback ``addresses`` (comma separated), or
    ``None`` (the defaults) when none is given; other addresses are ignored."""
    from ipaddress import IPv4Network

    from pysandboxes._policy.netclasses import DEFAULTED, AddressClass

    loopback = IPv4Network("127.0.0.0/8")
    taken: list[IPv4Network] = []
    for text in addresses.split(","):
        try:
            network = IPv4Network(text.strip())
        except ValueError:
            continue
        if network.num_addresses == 1 and network.subnet_of(loopback):
            taken.append(network)
    if not taken:
        return None
    parts = [loopback]
    for network in taken:
        parts = [
            piece
            for part in parts
            for piece in (part.address_exclude(network) if network.subnet_of(part) else [part])
        ]
    kept = tuple(c for c in DEFAULTED if c.network != loopback)
    return tuple(AddressClass(part, "loopback") for part in parts) + kept


class Routes:
    """Answers ``route`` and ``lookup`` requests by the rules alone (see module docs)."""

    def __init__(
        self,
        rules: tuple[NetRule, ...],
        test_settings: tuple[str, str] = ("", ""),
        log: LogWriter | None = None,
    ) -> None:
        from pysandboxes._host.egress import hosts_file_resolver, system_resolver
        from pysandboxes._policy.netjudge import NetJudge

        hosts, public = test_settings
        self._judge: NetJudge = NetJudge(rules, playing_public(public))
        self._resolver: Resolver = hosts_file_resolver(hosts) if hosts else system_resolver
        self._log = log

    def handle(self, ask: Ask) -> tuple[Answer, int | None]:
        """The answer to one routed request, and the connection to hand over with it."""
        if ask.operation == "lookup":
            return self._lookup(ask.resource), None
        return self._route(ask)

    def _lookup(self, name: str) -> Answer:
        from pysandboxes._host.egress import MAX_ADDRESSES
        from pysandboxes._policy.netrules import is_host_name

        if not is_host_name(name):
            return Answer(DENY, f"{name!r} is not a host name")
        asked = name.lower().rstrip(".")
        rule = self._judge.allows_lookup(asked)
        if rule is None:
            return Answer(DENY, f"no net= rule names {asked}")
        try:
            addresses = self._resolver(asked)[:MAX_ADDRESSES]
        except (OSError, UnicodeError) as exc:
            return Answer(DENY, f"{asked} does not resolve ({exc})", value=f"{FAILED}-2")
        # All of them: a connection to one comes back here by this name, and is judged
        # then (a refused address, with its default and the line that would allow it).
        return Answer(ONCE, value=" ".join(addresses))

    def _route(self, ask: Ask) -> tuple[Answer, int | None]:
        from pysandboxes._host.egress import judged_connect
        from pysandboxes.errors import RuleSocketConnectionRefusedError

        try:
            connected = judged_connect(ask.resource, ask.port, "tcp", self._judge, self._resolver)
        except RuleSocketConnectionRefusedError as exc:
            self._record(ask, "", None, str(exc))
            return Answer(DENY, str(exc)), None
        except OSError as exc:
            return Answer(DENY, exc.strerror or str(exc), value=f"{FAILED}{exc.errno or 0}"), None
        self._record(ask, connected.address, connected.rule, "")
        return Answer(ONCE), connected.fd

    def _record(self, ask: Ask, address: str, rule: Origin | None, refusal: str) -> None:
        if self._log is None:
            return
        from pysandboxes._wire.decisions import Decision as Logged
        from pysandboxes._wire.decisions import origin_fields

        target = f"tcp:{ask.resource}:{ask.port}"
        if address and address != ask.resource:
            target += f" ({address})"
        where = "".join(c if c.isprintable() else "?" for c in ask.where[:200])
        # ``file:line`` (or ``implicit``), as the child writes its own decisions
        shown = origin_fields(*((rule.source, rule.line, rule.text) if rule else (None, 0, "")))
        entry = Logged("net", target, "OUT", not refusal, *shown, where)
        self._log.write([entry])
