"""The sandboxed side of a run whose network is the broker alone (``_host.egressroutes``).

Under ``landlock``, when the rules reach out by name, pattern or wildcard only, the
sandbox has a network namespace of its own with no interface up: no address is reached
from here, by Python or by native code. The network guard judges each connection as
before; one the rules allow (or one by a name the rules name, whose address only the
trusted side's defaults can judge) is sent to the trusted side instead (``Router.route``,
a ``route`` request over the permission requests' socket), which resolves, judges and
connects, and hands the connection over. It is put on the program's own descriptor
(``dup2``, its blocking mode kept), so the program's socket object goes on on it:
``http.client``, ``urllib``, ``ssl``, ``asyncio`` streams see a connect that succeeded.

``getaddrinfo`` answers a name a pattern names (which the rules could not pin) with the
addresses the trusted side resolved (``lookup``); a connection to one of them is sent
back by that name (``answered``). A name a rule names exactly is answered from its pins
(``guards.dnspins``) and sent back by name the same way. The trusted side resolves again
at each connection: a name that moved is followed, a name rebound to a refused address
is refused there.

``connect`` and ``connect_ex`` are wrapped to say which descriptor connects (the intent,
as the permission prompts' wrappers do), and to resolve a host name they are given with
the sandbox's ``getaddrinfo`` (C would ask the system's, before any judgement): a
connection made some other way is not routed, and finds no route.
"""

from __future__ import annotations

import os
from _thread import get_ident

from pysandboxes._inside.asking import INTENTS, Granted
from pysandboxes._inside.recorder import program_site
from pysandboxes._wire.asks import DENY, Ask

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pysandboxes._inside.asking import Asker
    from pysandboxes._policy.judge import NetJudge

#: Most names remembered for the addresses ``lookup`` answered.
MAX_ANSWERED = 4096


class Router:
    """Sends what the rules allow to the trusted side (see module docs)."""

    def __init__(
        self,
        asker: Asker,
        judge: NetJudge,
        pins: tuple[tuple[str, tuple[str, ...]], ...],
        cwd: str = "",
    ):
        self._asker = asker
        # The program's line of each connection, for the decision log (``program_site``,
        # relative to the working directory, as every other decision shows it).
        self._cwd = cwd.rstrip("/") + "/" if cwd else ""
        self._judge = judge
        self._pinned = frozenset(name for name, _ in pins)
        #: The name each address answered stands for: ``lookup``'s answers, the pins.
        self.answered: dict[str, str] = {a: name for name, found in pins for a in found}

    def route(self, host: str, port: int, where: str = "") -> str | None:
        """Have the trusted side connect to ``host``:``port`` for the socket whose
        connect runs on this thread; ``None`` when none does (nothing routed), else the
        trusted side's refusal. Raises ``Granted`` once connected, ``OSError`` when it
        could not connect."""
        intent = INTENTS.get(get_ident())
        if intent is None or intent[0] != "connect":
            return None
        target: int = intent[1]
        if not where and self._cwd:
            where = program_site(self._cwd)[0] or ""
        answer, fd = self._asker.ask(Ask(0, "net", host, "route", where, proto="tcp", port=port))
        if answer.decision == DENY or fd is None:
            if fd is not None:
                os.close(fd)
            value = answer.value
            if type(value) is str and value[:1] == "E" and value[1:].isdigit():
                raise OSError(int(value[1:]), answer.note)
            return answer.note or f"The connection to {host}:{port} is refused."
        try:
            blocking = os.get_blocking(target)
            os.dup2(fd, target)  # the program's socket, now connected
            os.set_blocking(target, blocking)
        finally:
            os.close(fd)
        raise Granted(-1)

    def lookup(self, name: str) -> tuple[str, ...] | None:
        """The addresses the trusted side answers for ``name``, a name a pattern rule
        names; ``None`` for any other name (the system, and the guard, answer it)."""
        from pysandboxes._policy import netaddr

        key = name.lower().rstrip(".")
        if key in self._pinned or self._judge.allows_lookup(key) is None:
            return None
        answer, fd = self._asker.ask(Ask(0, "net", key, "lookup", proto="tcp"))
        if fd is not None:
            os.close(fd)
        value = answer.value
        if answer.decision == DENY or type(value) is not str:
            return None
        found = tuple(a for a in value.split(" ")[:32] if netaddr.parse_address(a) is not None)
        if len(self.answered) > MAX_ANSWERED:
            self.answered.clear()
        for address in found:
            self.answered[address] = key
        return found or None


class _Answers:
    """What ``dnspins``' ``getaddrinfo`` reads its answers from: the router's lookups."""

    def __init__(self, router: Router) -> None:
        self._router = router

    def get(self, key: str, default: Any = None) -> Any:
        return self._router.lookup(key) or default


def install(router: Router, sealed_globals: dict[str, object]) -> None:
    """``getaddrinfo`` answering from the trusted side, and the connect wrappers (see
    module docs); before the hook."""
    import _socket
    import socket

    from pysandboxes._inside.guards.audit import sealed_wrapper
    from pysandboxes._inside.guards.dnspins import (
        _getaddrinfo,  # pyright: ignore[reportPrivateUsage]
    )

    system = _socket.getaddrinfo  # the pinned names' answers, when there are pins
    answers: Any = _Answers(router)
    made = sealed_wrapper(system, _getaddrinfo(answers), sealed_globals)
    _socket.getaddrinfo = made  # socket.getaddrinfo calls it
    raw_connect, raw_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self: Any, address: Any) -> None:
        thread = get_ident()
        before = INTENTS.get(thread)
        INTENTS[thread] = ("connect", self.fileno())
        try:
            return raw_connect(self, _numeric(self, address))
        except Granted as granted:
            if granted.fd != -1:
                raise
            return None
        finally:
            _restore(thread, before)

    def connect_ex(self: Any, address: Any) -> int:
        thread = get_ident()
        before = INTENTS.get(thread)
        INTENTS[thread] = ("connect", self.fileno())
        try:
            return raw_connect_ex(self, _numeric(self, address))
        except Granted as granted:
            if granted.fd != -1:
                raise
            return 0
        finally:
            _restore(thread, before)

    connect.__doc__, connect_ex.__doc__ = raw_connect.__doc__, raw_connect_ex.__doc__
    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]


def _numeric(sock: Any, address: object) -> Any:
    """``address`` with its host name resolved by the sandbox's ``getaddrinfo`` (the
    pins, the trusted side's lookups): C would resolve it before any judgement, with
    the system's resolver, which has no route here. Anything else is as given."""
    import _socket

    from pysandboxes._policy import netaddr

    given: Any = address
    if type(given) is not tuple or len(given) < 2 or type(given[0]) is not str:  # pyright: ignore[reportUnknownArgumentType]
        return address
    host: str = given[0]
    inet = (_socket.AF_INET, _socket.AF_INET6)
    if sock.family not in inet or host in ("", "<broadcast>") or netaddr.parse_address(host):
        return address
    try:
        infos: list[Any] = _socket.getaddrinfo(host, given[1], sock.family, sock.type)  # type: ignore[arg-type]
    except (OSError, UnicodeError, TypeError):
        return address  # C fails the same way
    return infos[0][4] if infos else address


def _restore(thread: int, before: Any) -> None:
    if before is None:
        INTENTS.pop(thread, None)
    else:
        INTENTS[thread] = before
