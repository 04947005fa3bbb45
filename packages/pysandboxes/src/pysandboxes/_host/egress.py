"""The trusted side's egress connect: resolve a name, judge what it resolved to, connect.

``connect_by_name(name, port, proto, judge)`` resolves ``name`` here, judges each address
with the ``net=`` rules and the SSRF-safe defaults (``_policy.netjudge``: the name as
asked, the address as reached), and connects to an allowed address itself, through a
numeric socket address (``AI_NUMERICHOST``): the address connected is the address judged.
Nothing resolves between the check and the use, so an answer that changes (DNS
rebinding: a public address for the check, ``169.254.169.254`` for the connect) cannot
move the connection. Addresses the judge refuses are never connected to; the others are
tried in the resolver's order, as ``socket.create_connection`` does. The caller gets the
connected socket's descriptor, ready to be passed on (``SCM_RIGHTS``).

Used by the permission prompts (a connection a person allowed) and the CONNECT proxy;
the network-namespace broker of a later step will use it too.

Tests only: ``PYSANDBOXES_TEST_HOSTS`` names a file in the ``hosts(5)`` format that the
resolver reads instead of the system's, again at each lookup (so a test can rebind a
name by rewriting it). It is read here, on the trusted side, and only by
``resolver_from_environment``; the sandbox never sees it (its environment is the rules').
It can only map names to addresses, which the rules and the defaults then judge as any
answer: it grants nothing.
"""

from __future__ import annotations

import os
import socket

from pysandboxes._record import record
from pysandboxes.errors import RuleSocketConnectionRefusedError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pysandboxes._policy.judge import NetJudge
    from pysandboxes._policy.model import NetRule, Origin, Verdict

    #: Resolves a name to its addresses (numeric strings), in the order to try them.
    Resolver = Callable[[str], list[str]]

#: The test-only hosts file (see the module docstring).
HOSTS_VARIABLE = "PYSANDBOXES_TEST_HOSTS"
#: Seconds a connect may take, per address tried.
CONNECT_TIMEOUT = 10.0
#: Most addresses of one answer that are judged and tried.
MAX_ADDRESSES = 32


@record
class Connected:
    """A connection made here.

    Attributes:
        fd: the connected socket's descriptor, in blocking mode; the caller owns it.
        address: the address connected to (numeric).
        rule: the rule that allowed it.
    """

    fd: int
    address: str
    rule: Origin | None


def system_resolver(name: str) -> list[str]:
    """The system's answer for ``name`` (``/etc/hosts`` first, then DNS)."""
    infos = socket.getaddrinfo(name.encode("ascii"), None, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def hosts_file_resolver(path: str) -> Resolver:
    """A resolver that reads ``path`` (``hosts(5)``) at each lookup (``netrules``)."""
    from pysandboxes._policy.netrules import hosts_file_resolver as made

    return made(path)


def resolver_from_environment(environ: Mapping[str, str] | None = None) -> Resolver:
    """The system resolver, or the test-only hosts file ``PYSANDBOXES_TEST_HOSTS`` names."""
    path = (os.environ if environ is None else environ).get(HOSTS_VARIABLE)
    return hosts_file_resolver(path) if path else system_resolver


def _numeric(address: str, port: int, kind: int) -> tuple[int, tuple[object, ...]] | None:
    """The family and socket address of a numeric ``address``; ``None`` if it is not one
    (nothing is resolved: ``AI_NUMERICHOST``)."""
    try:
        infos = socket.getaddrinfo(
            address, port, 0, kind, 0, socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
        )
    except (OSError, UnicodeError):
        return None
    family, _, _, _, sockaddr = infos[0]
    return int(family), tuple(sockaddr)


def refusal(name: str, port: int, address: str, verdict: Verdict) -> str:
    """The message of a refused connection: what, why, and the line that would allow it."""
    from pysandboxes._policy.netjudge import refusal_reason

    shown = f"{name}:{port}" if name == address else f"{name}:{port} ({address})"
    message = f"The connection to {shown} is refused: {refusal_reason(verdict)}."
    if verdict.rule is None and verdict.fix:
        message += f" The rule '{verdict.fix}' would allow it."
    return message


def connect_by_name(
    name: str,
    port: int,
    proto: str,
    judge: NetJudge,
    resolver: Resolver | None = None,
    timeout: float = CONNECT_TIMEOUT,
) -> int:
    """Resolve ``name``, judge each address, connect to an allowed one; its descriptor.

    Raises:
        RuleSocketConnectionRefusedError: no address of the answer is allowed (the
            message names the rule or default of the first refused, and the line to add).
        OSError: the name does not resolve, or every allowed address failed to connect.
    """
    return judged_connect(name, port, proto, judge, resolver, timeout).fd


def judged_connect(
    name: str,
    port: int,
    proto: str,
    judge: NetJudge,
    resolver: Resolver | None = None,
    timeout: float = CONNECT_TIMEOUT,
) -> Connected:
    """``connect_by_name``, with the address connected and the rule that allowed it."""
    from pysandboxes._policy.netrules import is_host_name

    kind = socket.SOCK_DGRAM if proto == "udp" else socket.SOCK_STREAM
    if not 0 < port <= 65535:
        raise RuleSocketConnectionRefusedError(
            f"The connection to {name}:{port} is refused: not a port.", address=f"{name}:{port}"
        )
    if _numeric(name.strip("[]"), port, kind) is not None:
        asked, addresses = None, [name.strip("[]")]
    elif is_host_name(name):
        asked = name.lower().rstrip(".")
        addresses = (resolver or system_resolver)(asked)[:MAX_ADDRESSES]
    else:
        raise RuleSocketConnectionRefusedError(
            f"The connection to {name!r} is refused: not an address nor a host name.",
            address=f"{name}:{port}",
        )
    allowed: list[tuple[str, int, tuple[object, ...], Origin | None]] = []
    refused: tuple[str, Verdict] | None = None
    for address in addresses:
        numeric = _numeric(address, port, kind)
        verdict = judge.judge(proto, address, port, "OUT", asked)
        if numeric is None or not verdict.allowed:
            refused = refused or (address, verdict)
            continue
        allowed.append((address, numeric[0], numeric[1], verdict.rule))
    if not allowed:
        address, verdict = refused or (name, judge.judge(proto, name, port, "OUT", asked))
        raise RuleSocketConnectionRefusedError(
            refusal(name, port, address, verdict),
            address=f"{name}:{port}",
            rule=str(verdict.rule) if verdict.rule else None,
        )
    failure: OSError | None = None
    for address, family, sockaddr, rule in allowed:
        sock = socket.socket(family, kind)
        try:
            sock.settimeout(timeout)
            sock.connect(sockaddr)
            sock.setblocking(True)
        except OSError as exc:
            sock.close()
            failure = exc
            continue
        return Connected(sock.detach(), address, rule)
    assert failure is not None
    raise failure


def asked_rule(host: str, port: int) -> NetRule:
    """The rule a person allowed at a prompt (``net=ALLOW|tcp|host|port|OUT``), as data:
    an address is named explicitly; a name is matched as a name, so the SSRF-safe
    defaults still hold for what it resolves to (``localhost`` excepted)."""
    from pysandboxes._policy import netaddr
    from pysandboxes._policy.model import NetRule, Origin

    network = netaddr.parse_network(host.strip("[]"))
    origin = Origin("<prompt>", 0, f"net=ALLOW|tcp|{host}|{port}|OUT")
    networks = (network,) if network is not None else ()
    name = None if network is not None else host.lower().rstrip(".")
    return NetRule(
        True, frozenset({"tcp"}), networks, name, ((port, port),), frozenset({"OUT"}), origin
    )


def connect_asked(host: str, port: int, timeout: float = CONNECT_TIMEOUT) -> int:
    """A TCP connection to what a person allowed at a prompt; its descriptor."""
    from pysandboxes._policy.judge import NetJudge

    judge = NetJudge([asked_rule(host, port)])
    return connect_by_name(host, port, "tcp", judge, resolver_from_environment(), timeout)
