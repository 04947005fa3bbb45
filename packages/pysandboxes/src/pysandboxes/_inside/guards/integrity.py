"""Keeps the program's hands off the guards themselves.

The routes CPython audits are closed here: reading or swapping the code, defaults or
attributes of the guards' functions and classes, ``sys._getframe`` reaching a frame of
the guards, reading the sealed hook's code from its frame, and the introspection entry
points that hand out every object of the process (``gc.get_objects``,
``gc.get_referrers``, ``gc.get_referents``, ``sys._current_frames``) or that would let the
program watch the guards work (``sys.settrace``, ``sys.setprofile``,
``sys.addaudithook``). The last group is the ``introspection`` category of
``python-api``, so a program that needs a debugger can be granted it.

What CPython does not audit (``__closure__``, ``__globals__``, ``f_back``, ``f_locals``)
cannot be watched; ``docs/security.md`` lists it, and why the kernel layer is the wall.
"""

from __future__ import annotations

import os
from types import FrameType, FunctionType

from pysandboxes._inside.enforce import call_refusal
from pysandboxes._inside.guards.askers import OWN_DIRS
from pysandboxes._inside.guards.audit import current_frame

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from pysandboxes._inside.enforce import Enforcer
    from pysandboxes._policy.judge import ApiJudge

_PROTECTED_ATTRIBUTES = frozenset({"__code__", "__defaults__", "__kwdefaults__"})
_INTROSPECTION = {
    "gc.get_objects": "gc.get_objects",
    "gc.get_referrers": "gc.get_referrers",
    "gc.get_referents": "gc.get_referents",
    "sys._current_frames": "sys._current_frames",
    "sys.settrace": "sys.settrace",
    "sys.setprofile": "sys.setprofile",
    "sys.addaudithook": "sys.addaudithook",
}


#: The qualified name of a refused reach into the guards: no rule allows it, ever (so
#: learning refuses it too).
INTERNALS = "sandbox-internals"


class IntegrityGuard:
    """Refuses the audited routes into the guards' own code and frames."""

    def __init__(
        self,
        own_globals: Iterable[dict[str, object]],
        own_classes: Iterable[type],
        hook_globals: dict[str, object],
        readers: Iterable[dict[str, object]],
        stdlib: str,
        libraries: Iterable[str],
        api: ApiJudge,
        enforcer: Enforcer,
        rule_file: str,
        sealed_globals: dict[str, object] | None = None,
    ) -> None:
        # The objects are kept alive with their ids: a freed module's dict could otherwise
        # lend its id to a dict of the program.
        self._kept = (tuple(own_globals), tuple(own_classes), tuple(readers))
        # The sealed functions (the judged copies of unreported functions, the wrappers)
        # run under these globals: their defaults hold the originals, never their code.
        self._sealed = sealed_globals
        self._own = frozenset(id(g) for g in self._kept[0])
        self._classes = frozenset(id(c) for c in self._kept[1])
        self._hook_globals = hook_globals
        self._readers = frozenset(id(g) for g in self._kept[2])
        self._stdlib = stdlib.rstrip("/") + "/"
        # Installed packages format tracebacks too (IPython, rich, stack_data...).
        self._libraries = tuple(libraries)
        self._api = api
        self._enforcer = enforcer
        self._rule_file = rule_file

    @property
    def events(self) -> dict[str, Callable[[tuple[Any, ...]], None]]:
        """The audit events judged here."""
        handlers: dict[str, Callable[[tuple[Any, ...]], None]] = {
            "object.__getattr__": self._getattr,
            "object.__setattr__": self._setattr,
            "object.__delattr__": self._setattr,
            "sys._getframe": self._frame,
        }
        for event, qualname in _INTROSPECTION.items():
            if not self._api.judge(qualname).allowed:
                handlers[event] = self._introspection(qualname)
        return handlers

    def _ours(self, value: object) -> bool:
        """Whether ``value`` is a function, class or frame of the guards."""
        kind = type(value)
        if kind is FunctionType:
            globals_: object = value.__globals__  # type: ignore[attr-defined]
            return id(globals_) in self._own or globals_ is self._sealed  # pyright: ignore[reportUnknownArgumentType]
        if kind is FrameType:
            return id(value.f_globals) in self._own  # type: ignore[attr-defined]
        # issubclass(type(...)): isinstance() would ask the object, running its code.
        return issubclass(kind, type) and id(value) in self._classes

    def _refuse(self, what: str) -> None:
        self._enforcer.refuse_call(
            INTERNALS,
            "introspection",
            f"{what} is refused: the sandbox's own code is out of the program's reach.",
        )

    def _getattr(self, args: tuple[Any, ...]) -> None:
        target, name = args[0], args[1]
        if type(name) is not str:
            return
        if name in _PROTECTED_ATTRIBUTES and self._ours(target):
            if name == "__code__" and target.__globals__ is self._sealed:
                # A sealed function's code holds no original (its defaults do): help()
                # and IPython read it (is it a coroutine?) of the wrappers they show.
                return
            self._refuse(f"Reading {name} of a function of the sandbox")
        elif (
            name == "f_code"
            and type(target) is FrameType
            and target.f_globals is self._hook_globals
            and not self._from_stdlib()
        ):
            # The sealed functions' frames are not refused: their code holds no original,
            # and every traceback through a file function shows one.
            self._refuse("Reading the code of the sandbox's audit hook")

    def _setattr(self, args: tuple[Any, ...]) -> None:
        target, name = args[0], args[1]
        if self._ours(target):
            self._refuse(f"Changing {name!s} of the sandbox's own code")

    def _frame(self, args: tuple[Any, ...]) -> None:
        frame = args[0]
        if type(frame) is FrameType and id(frame.f_globals) in self._own:
            self._refuse("Reaching a frame of the sandbox with sys._getframe")

    def _from_stdlib(self) -> bool:
        """Whether the reader is the standard library, an installed package or the runner
        (all of which format tracebacks), rather than the program itself."""
        frame: FrameType | None = current_frame()
        # The reader is under the hook frame that called this handler; a guard reads
        # frames itself (the import guard walks them to know who asked).
        while frame is not None and frame.f_globals is not self._hook_globals:
            frame = frame.f_back
        reader = frame.f_back if frame is not None else None
        if reader is not None and id(reader.f_globals) in self._own:
            return True
        # The hook's own frames are passed too: reading their code to know the reader
        # would raise this very event again, without end. The runner and the traceback
        # cutter read frames for the user (by their globals); the sandbox's other files
        # act for their caller and lend it no trust.
        while frame is not None:
            if id(frame.f_globals) in self._readers:
                return True
            if not (
                id(frame.f_globals) in self._own
                or frame.f_globals is self._hook_globals
                or frame.f_globals is self._sealed
                or frame.f_code.co_filename.startswith(OWN_DIRS)
            ):
                break
            frame = frame.f_back
        if frame is None:
            return False  # C called in with no frame: for the program (an atexit callback)
        filename = frame.f_code.co_filename
        if filename.startswith("/") and os.path.normpath(filename) != filename:
            return False  # "<library>/../elsewhere" claims a place it is not in
        return filename.startswith((self._stdlib, "<frozen ", *self._libraries))

    def _introspection(self, qualname: str) -> Callable[[tuple[Any, ...]], None]:
        def refuse(args: tuple[Any, ...]) -> None:
            message = call_refusal(self._api, qualname, "introspection", self._rule_file)
            self._enforcer.refuse_call(qualname, "introspection", message)

        return refuse
