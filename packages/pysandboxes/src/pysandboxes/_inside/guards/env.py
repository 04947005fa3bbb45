"""Environment reads, watched while learning.

Outside learning the sandbox simply never had the variables its rules do not forward, so
nothing needs watching. While learning, the program runs with the host's variables (it
must see what it would see unsandboxed), and each read of a name is reported so that the
trusted side can write ``env=NAME=${NAME}``, never the value.

Reported: ``os.environ[name]``, ``.get``, ``in``, ``os.getenv`` (and the ``bytes``
twins). Not reported: names the program set or removed itself, and full scans
(``dict(os.environ)``, iterating and reading back each name in turn), which say nothing
about which variable the program needs.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any, Protocol

    class Counted(Protocol):
        """A decision counted by the decision log (``_inside.decisions``)."""

        count: int


#: The most names whose repeated reads are remembered (a program may read many).
_QUIET = 100_000


def watch_environ(report: Callable[[str], Counted | bool]) -> None:
    """Make ``os.environ`` and ``os.environb`` report each read name to ``report``.

    What ``report`` returns says what a later read of that name needs: ``False`` a report
    again; ``True`` nothing (recorded once: learning); a ``Counted``, one more in its
    ``count`` (a decision of the log). Those repeats cost a dictionary look-up.
    """
    own: set[str] = set()
    # Keys (str or bytes, exactly) whose reads need no report, with what they need instead.
    # Used only outside a scan, whose reads must follow its order.
    quiet: dict[object, Counted | bool] = {}
    # A scan reads back the names it listed, in order: dict(os.environ) lists every name
    # first, then reads each. Reads that follow the listing are the scan's, not news.
    scan: list[str] = []
    position = [0]

    def text(key: object) -> str | None:
        if type(key) is str:
            return key  # type: ignore[return-value]
        if type(key) is bytes:
            return key.decode("utf-8", "surrogateescape")  # type: ignore[union-attr]
        return None

    def scanned(name: str) -> bool:
        if position[0] < len(scan) and scan[position[0]] == name:
            position[0] += 1
            return True
        scan.clear()
        position[0] = 0
        return False

    def set_by_program(key: object) -> None:
        name = text(key)
        if name is not None:
            own.add(name)  # the program's own: no news, in either mapping
            quiet.pop(name, None)
            quiet.pop(name.encode("utf-8", "surrogateescape"), None)

    mappings: list[Any] = [os.environ, getattr(os, "environb", None)]
    for mapping in mappings:
        if mapping is None:
            continue
        base: Any = mapping.__class__

        def getitem(self: object, key: object, _base: Any = base) -> object:
            if scan:
                name = text(key)
                if name is not None and scanned(name):
                    return _base.__getitem__(self, key)
            elif type(key) is str or type(key) is bytes:
                seen = quiet.get(key, False)
                if seen is not False:
                    if seen is not True:
                        seen.count += 1
                    return _base.__getitem__(self, key)  # a repeat: nothing new to report
                name = text(key)
            else:
                name = None
            if name is not None and name not in own:
                seen = report(name)
                if seen is not False and len(quiet) < _QUIET:
                    quiet[key] = seen
            return _base.__getitem__(self, key)

        def get(self: Any, key: object, default: object = None, _quiet: Any = quiet.get) -> object:
            # Mapping.get, with a repeat's look-up inlined (os.getenv too), and the two
            # steps of os._Environ.__getitem__ without its frame: a read costs what
            # plain Python's does, and one more count.
            if not scan and (type(key) is str or type(key) is bytes):
                seen = _quiet(key, False)
                if seen is not False:
                    if seen is not True:
                        seen.count += 1
                    try:
                        value = self._data[self.encodekey(key)]
                    except KeyError:
                        return default
                    return self.decodevalue(value)
            try:
                return getitem(self, key)
            except KeyError:
                return default

        def setitem(self: object, key: object, value: object, _base: Any = base) -> None:
            set_by_program(key)
            _base.__setitem__(self, key, value)

        def delitem(self: object, key: object, _base: Any = base) -> None:
            set_by_program(key)
            _base.__delitem__(self, key)

        def iterate(self: object, _base: Any = base) -> Iterator[object]:
            if position[0] >= len(scan):
                scan.clear()
                position[0] = 0
            for key in _base.__iter__(self):
                if len(scan) < 100_000:
                    scan.append(text(key) or "")
                yield key

        watched = type(
            base.__name__,
            (base,),
            {
                "__getitem__": getitem,
                "get": get,
                "__setitem__": setitem,
                "__delitem__": delitem,
                "__iter__": iterate,
                "__module__": base.__module__,
            },
        )
        mapping.__class__ = watched
