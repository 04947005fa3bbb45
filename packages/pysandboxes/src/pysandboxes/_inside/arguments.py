"""Partial mode, the sandboxed side: the call the trusted side sent, as Python objects.

The trusted side pickles a call's function name and arguments; this process rebuilds
them. That is the framework's work, not the program's: the standard ``pickle.loads``
raises the ``pickle.find_class`` audit event, which the call guard judges as the
program's deserialization, so it would be charged to the user's ``python-api=`` rules
(and learned as theirs). The unpickler here resolves the classes itself, raising no
such event; the modules it imports for them are imported as the program's would be
(``python-import=``, the files under the rules), since only the function's code will
use them, except the standard modules of the value types (``_wire.values``): those are
imported here by name, by the sandbox's own import statements, as the framework's. A
``pickle.loads`` the function's body calls is still judged.

Only the trusted side writes what this reads (the socket is the two processes' alone),
so it may name any class; the bounds protect against a broken sender, not a hostile one.
"""

from __future__ import annotations

import importlib
import io
import pickle
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


class _CallUnpickler(pickle.Unpickler):
    """Rebuilds a call; its ``find_class`` overrides the audited C one."""

    def find_class(self, module_name: str, global_name: str, /) -> Any:
        module = sys.modules.get(module_name) or _value_module(module_name)
        if module is None:
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                raise _not_found(module_name, global_name, exc) from None
        found: Any = module
        for part in global_name.split("."):
            try:
                found = getattr(found, part)
            except AttributeError as exc:
                raise _not_found(module_name, global_name, exc) from None
        return found


def _value_module(name: str) -> Any:
    """The standard module of a value type, imported as the sandbox's own (each import
    statement names its module: nothing the call names is imported here)."""
    if name == "datetime":
        import datetime as module
    elif name == "decimal":
        import decimal as module
    elif name == "fractions":
        import fractions as module
    elif name == "uuid":
        import uuid as module
    elif name == "ipaddress":
        import ipaddress as module
    elif name == "zoneinfo":
        import zoneinfo as module
    elif name == "collections":
        import collections as module
    elif name in ("pathlib", "pathlib._local"):
        import pathlib

        module = sys.modules.get(name, pathlib)  # 3.13 pickles paths as pathlib._local's
    elif name == "time":
        import time as module
    else:
        return None
    return module


def _not_found(module: str, name: str, cause: BaseException) -> TypeError:
    if module == "__main__":
        hint = (
            "it is defined in the caller's __main__, which the sandboxed process does not "
            "run: define it in a module of its own and import it"
        )
    else:
        hint = f"{type(cause).__name__}: {cause}"
    return TypeError(f"an argument of class {module}.{name} cannot be rebuilt here: {hint}")


#: Taken before the guards (it may be wrapped for the program's calls afterwards).
_loads = pickle.loads  # noqa: TID251
#: STACK_GLOBAL, the opcode by which protocol 5 names every class: a call without one
#: needs no look-up. (The extension registry's opcodes, which nothing registers, would
#: have the C loader look up, and be refused as the program's: never let through.)
_STACK_GLOBAL = 0x93


def load_call(payload: bytes | bytearray) -> tuple[str, str, tuple[Any, ...], dict[str, Any]]:
    """``(module, qualified name, args, kwargs)`` of a call the trusted side sent."""
    if _STACK_GLOBAL in payload:
        module, qualname, args, kwargs = _CallUnpickler(io.BytesIO(payload)).load()
    else:  # plain values only: the C loader at once, which then raises no event
        module, qualname, args, kwargs = _loads(payload)
    return module, qualname, args, kwargs


def name_key(payload: bytearray) -> bytes | None:
    """The function a call names, as the bytes that name it: protocol 5 starts with
    ``PROTO``, a ``FRAME`` and its length, the ``MARK`` of the call's tuple, then the
    module and the name as short strings (``None`` if not)."""
    if len(payload) < 15 or payload[11] != 0x28 or payload[12] != 0x8C:
        return None
    end = 14 + payload[13]
    if len(payload) < end + 3 or payload[end] != 0x94 or payload[end + 1] != 0x8C:
        return None
    return bytes(payload[12 : end + 3 + payload[end + 2]])


_resolved: dict[tuple[str, str], Callable[..., Any]] = {}


def resolve(module: str, qualname: str, *, init: bool = False) -> Callable[..., Any]:
    """The ``@sandbox`` function (or ``init_fn``) named by the trusted side."""
    known = _resolved.get((module, qualname))
    if known is not None:
        return known
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    if not init and getattr(found, "__pysandboxes_sandbox__", None) is not True:
        raise LookupError(f"{module}.{qualname} is not a @sandbox function")
    if not init:
        _resolved[(module, qualname)] = found
    return found
