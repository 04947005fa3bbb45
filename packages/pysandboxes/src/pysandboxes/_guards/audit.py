"""The one PEP 578 audit hook of the sandbox, installed before any program code.

An audit hook cannot be removed once added, and CPython calls it from C after each API has
converted its arguments, so it sees what the system call will use. It dispatches the events
the guards know to their handlers; the handlers raise to refuse.

Events raised while a handler runs (the guard's own ``lstat`` or ``sys._getframe``) are
not judged again: a per-thread flag marks the hook busy. The hook calls no code the
program supplied, so nothing of the program can run while that flag is set.
"""

from __future__ import annotations

import sys
from _thread import _local

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    Handler = Callable[[tuple[Any, ...]], None]


class AuditHook:
    """Dispatches audit events to the guards' handlers."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}
        self._state = _local()

    def add(self, handlers: Mapping[str, Handler]) -> None:
        """Route more events; several guards may watch one event, in order."""
        for event, handler in handlers.items():
            known = self._handlers.get(event)
            if known is None:
                self._handlers[event] = handler
            else:
                self._handlers[event] = _chain(known, handler)

    def install(self) -> None:
        """Add the hook to the interpreter, for good."""
        handlers = self._handlers
        state = self._state

        def hook(event: str, args: tuple[Any, ...]) -> None:
            if type(event) is not str:
                return  # sys.audit() with an odd name from the program: nothing happens
            handler = handlers.get(event)
            if handler is None or getattr(state, "busy", False):
                return
            state.busy = True
            try:
                handler(args)
            finally:
                state.busy = False

        sys.addaudithook(hook)


def _chain(first: Handler, second: Handler) -> Handler:
    def both(args: tuple[Any, ...]) -> None:
        first(args)
        second(args)

    return both
