"""Name lookups answered from the rules: a host a ``net=`` rule names resolves to the
addresses pinned when the rules were read, never to a fresh answer.

The trusted side resolves every host name of the rules once and the rules hold those
addresses. Inside the sandbox, ``getaddrinfo``, ``gethostbyname`` and
``gethostbyname_ex`` answer those names from the pins, so what ``socket.create_connection``,
``urllib``, ``http.client`` or ``asyncio`` then connect to is an address the rules already
allow: a DNS server that changes its answer (DNS rebinding) cannot move the connection.
Other names go to the system, and the network guard judges that lookup.

The replacements live in ``_socket``, before ``socket`` copies them. They are sealed
wrappers: what the program can reach holds the pins, never the system's functions.
"""

from __future__ import annotations

import _socket
from sys import audit as _audit
from types import MappingProxyType

from pysandboxes._inside.guards.audit import sealed_wrapper

#: Raised with the name when a pinned name is answered: the decision log records it.
PINNED_EVENT = "pysandboxes.pinned"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from pysandboxes._inside.guards.audit import Call


def _answers(pins: Iterable[tuple[str, tuple[str, ...]]]) -> dict[str, tuple[str, ...]]:
    # Case does not matter to resolvers; a trailing dot does (it skips /etc/hosts).
    return {name.lower(): addresses for name, addresses in pins}


def _getaddrinfo(pinned: dict[str, tuple[str, ...]]) -> Callable[..., Call]:
    inet, inet6, unspec = _socket.AF_INET, _socket.AF_INET6, _socket.AF_UNSPEC
    kinds = ((_socket.SOCK_STREAM, 6), (_socket.SOCK_DGRAM, 17), (_socket.SOCK_RAW, 0))
    canon_flag, numeric_flag = _socket.AI_CANONNAME, _socket.AI_NUMERICHOST
    servbyname = _socket.getservbyname

    def getaddrinfo(
        host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0
    ) -> Call:
        system: Call = (None, (host, port, family, type, proto, flags), {}, None)
        key = host.lower() if isinstance(host, str) else None
        addresses = pinned.get(key) if key is not None else None  # type: ignore[arg-type]
        if addresses is None or flags & numeric_flag:
            return system
        if port is None:
            number = 0
        elif isinstance(port, int):
            number = int(port)
        else:
            text = port.decode() if isinstance(port, bytes) else str(port)
            number = int(text) if text.isdigit() else servbyname(text)
        canon: str = host if flags & canon_flag else ""
        found: list[tuple[int, int, int, str, tuple[Any, ...]]] = []
        for address in addresses:
            is_v6 = ":" in address
            if family not in (unspec, inet6 if is_v6 else inet):
                continue
            sockaddr = (address, number, 0, 0) if is_v6 else (address, number)
            for kind, kind_proto in kinds:
                if (type and kind != type) or (proto and kind_proto and proto != kind_proto):
                    continue
                found.append((inet6 if is_v6 else inet, kind, proto or kind_proto, canon, sockaddr))
                canon = ""
        if not found:
            return system
        _audit(PINNED_EVENT, key)
        return (_list, (found,), {}, None)

    return getaddrinfo


def _gethostbyname(pinned: dict[str, tuple[str, ...]]) -> Callable[..., Call]:
    def gethostbyname(hostname: Any) -> Call:
        key = hostname.lower() if isinstance(hostname, str) else None
        v4 = [a for a in pinned.get(key, ()) if ":" not in a] if key is not None else []  # type: ignore[arg-type]
        if not v4:
            return (None, (hostname,), {}, None)
        _audit(PINNED_EVENT, key)
        return (_str, (v4[0],), {}, None)

    return gethostbyname


def _gethostbyname_ex(pinned: dict[str, tuple[str, ...]]) -> Callable[..., Call]:
    def gethostbyname_ex(hostname: Any) -> Call:
        key = hostname.lower() if isinstance(hostname, str) else None
        v4 = [a for a in pinned.get(key, ()) if ":" not in a] if key is not None else []  # type: ignore[arg-type]
        if v4:
            _audit(PINNED_EVENT, key)
            return (_tuple, ((hostname, [], v4),), {}, None)
        return (None, (hostname,), {}, None)

    return gethostbyname_ex


# Bound now: the answers are copied with the real types, whatever builtins say later.
_list, _str, _tuple = list, str, tuple


def install(pins: Iterable[tuple[str, tuple[str, ...]]], sealed_globals: dict[str, object]) -> None:
    """Answer the pinned names from ``pins`` (nothing to do without pins); the
    wrappers are sealed (``audit.sealed_wrapper``): the system's functions are hidden."""
    pinned: Any = MappingProxyType(_answers(pins))  # read-only, though harmless either way
    if not pinned:
        return
    for name, factory in (
        ("getaddrinfo", _getaddrinfo),
        ("gethostbyname", _gethostbyname),
        ("gethostbyname_ex", _gethostbyname_ex),
    ):
        system = getattr(_socket, name)
        setattr(_socket, name, sealed_wrapper(system, factory(pinned), sealed_globals))
