"""What a sandboxed child sends back for a call: its result, or its exception as values.

Runs in the child. An exception does not travel as a pickled object (its class would
have to be rebuilt by running its code in the caller): it is described by values only,
its class by name and by the built-in classes it derives from, its arguments kept where
they are values (else their ``repr``), its traceback as ``(file, line, function, source)``
rows, its cause, context, notes and group members described the same way. The caller
(``_host.errors``) rebuilds it from the description after ``codec`` decoded it.
"""

from __future__ import annotations

import builtins
import pickle
import sys

from pysandboxes._wire.frames import BLOBS, LARGE, Parts
from pysandboxes._wire.values import CONTAINERS, SCALARS, VALUE_CLASSES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Any

#: Frames kept per traceback, and exceptions per chain: the rest is cut (and said).
MAX_FRAMES = 200
MAX_CHAIN = 32
_MAX_TEXT = 64 * 1024


def encode_result(value: object, *, objects: bool = False, parts: bool = False) -> Any:
    """The result as a pickle (protocol 5: large bytes are not copied again); with
    ``parts``, a large bytes or text result comes as ``frames.Parts`` (never copied into
    one buffer).

    The caller's decoder accepts values only, each class through a maker that takes the
    arguments that class is pickled with; ``UUID`` and ``ZoneInfo`` are pickled by their
    value here, as the standard pickle would need ``BUILD`` and ``getattr`` for them.
    With ``objects`` (``remote-result-mode=objects``) any other instance travels as a
    description of its data (``objects.describe``).

    Raises:
        TypeError: an object that cannot cross as data, or refers to itself.
    """
    if _unregistered and not _unregistered.keys().isdisjoint(sys.modules):
        _register_value_reducers()
    if not objects:
        if parts and type(value) in BLOBS and len(value) >= LARGE:  # type: ignore[arg-type]
            written = Parts()
            pickle.Pickler(written, protocol=5).dump(value)
            return written
        return pickle.dumps(value, protocol=5)
    import io

    out = io.BytesIO()
    try:
        _objects_pickler()(out, protocol=5).dump(value)
    except RecursionError:
        message = "an object of the result refers to itself: objects cannot cross in cycles"
        raise TypeError(message) from None
    return out.getvalue()


_picklers: list[type[pickle.Pickler]] = []


def _objects_pickler() -> type[pickle.Pickler]:
    """The pickler of objects mode, made once: each instance that is not a value becomes
    the description of its data (``objects.describe``)."""
    if not _picklers:
        from pysandboxes._wire.objects import describe

        class ObjectsPickler(pickle.Pickler):
            def persistent_id(self, obj: object) -> object:
                return describe(obj, _plain)

        _picklers.append(ObjectsPickler)
    return _picklers[0]


_PLAIN = frozenset({*SCALARS, *CONTAINERS})


def _plain(kind: type) -> bool:
    return kind in _PLAIN or (kind.__module__, kind.__qualname__) in VALUE_CLASSES


#: Value classes whose standard pickle the caller refuses, until their reducer is set.
_unregistered = {"uuid": "UUID", "zoneinfo": "ZoneInfo"}


def _register_value_reducers() -> None:
    """Once ``uuid`` or ``zoneinfo`` is loaded (no instance exists before), pickle their
    instances by value: ``UUID(None, None, None, None, int)``, ``ZoneInfo(key)``."""
    import copyreg

    for module, name in list(_unregistered.items()):
        loaded = sys.modules.get(module)
        if loaded is None:
            continue
        kind: Any = getattr(loaded, name)
        reducer: Any = _reduce_uuid if module == "uuid" else _reduce_zone
        copyreg.pickle(kind, reducer)
        del _unregistered[module]


def _reduce_uuid(value: Any) -> Any:
    return (value.__class__, (None, None, None, None, value.int))


def _reduce_zone(value: Any) -> Any:
    if value.key is None:
        raise TypeError("a ZoneInfo made from a file (no key) cannot cross: send its key")
    return (value.__class__, (value.key,))


def _is_value(value: object, depth: int = 0) -> bool:
    kind = type(value)
    if kind in SCALARS:
        return True
    if depth > 32:
        return False
    if kind is dict:
        mapping: dict[object, object] = value  # type: ignore[assignment]
        return all(_is_value(k, depth + 1) and _is_value(v, depth + 1) for k, v in mapping.items())
    if kind in CONTAINERS:
        items: tuple[object, ...] = tuple(value)  # type: ignore[call-overload]
        return all(_is_value(item, depth + 1) for item in items)
    return (kind.__module__, kind.__qualname__) in VALUE_CLASSES


def _text(value: object) -> str:
    try:
        text = value if type(value) is str else repr(value)
    except Exception as exc:  # the program's __repr__ may fail: say so, do not fail
        text = f"<unrepresentable {type(value).__qualname__}: {type(exc).__name__}>"
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT] + "…"  # type: ignore[return-value]


def _builtin_bases(kind: type) -> list[str]:
    """The built-in exception classes ``kind`` derives from, nearest first."""
    return [
        base.__name__
        for base in kind.__mro__
        if base.__module__ == "builtins" and getattr(builtins, base.__name__, None) is base
    ]


def _frames(tb: TracebackType | None) -> list[tuple[str, int, str, str]]:
    import linecache

    rows: list[tuple[str, int, str, str]] = []
    while tb is not None and len(rows) < MAX_FRAMES:
        code = tb.tb_frame.f_code
        line = linecache.getline(code.co_filename, tb.tb_lineno).strip()
        rows.append((code.co_filename, tb.tb_lineno or 0, code.co_name, line))
        tb = tb.tb_next
    return rows


def describe(exc: BaseException, *, own: tuple[str, ...] = (), depth: int = 0) -> dict[str, object]:
    """``exc`` as a tree of values; ``own`` are file prefixes of frames to leave out
    (the sandbox's server, which the caller does not need to see)."""
    kind = type(exc)
    args = tuple(a if _is_value(a) else _text(a) for a in exc.args)
    description: dict[str, object] = {
        "module": kind.__module__,
        "qualname": kind.__qualname__,
        "bases": _builtin_bases(kind),
        "args": args,
        "text": _text(str(exc) if not isinstance(exc, KeyError) else repr(exc.args[0]))
        if exc.args
        else "",
        "frames": [f for f in _frames(exc.__traceback__) if not f[0].startswith(own)],
        "notes": [_text(n) for n in getattr(exc, "__notes__", ())][:MAX_FRAMES],
        "suppress_context": exc.__suppress_context__,
    }
    if kind.__module__ == "pysandboxes.errors":
        # A refusal is rebuilt as itself in the caller: its message and rule fields.
        fields: object = getattr(exc, "_fields", None)
        if type(fields) is dict and _is_value(fields):  # pyright: ignore[reportUnknownArgumentType]
            description["refusal"] = (_text(getattr(exc, "message", str(exc))), fields)
    attributes = {k: v for k, v in vars(exc).items() if not k.startswith("_") and _is_value(v)}
    if attributes:
        description["attributes"] = attributes
    if depth < MAX_CHAIN:
        if exc.__cause__ is not None:
            description["cause"] = describe(exc.__cause__, own=own, depth=depth + 1)
        if exc.__context__ is not None and exc.__context__ is not exc.__cause__:
            description["context"] = describe(exc.__context__, own=own, depth=depth + 1)
        if isinstance(exc, BaseExceptionGroup):
            group: BaseExceptionGroup[BaseException] = exc  # type: ignore[assignment]
            description["message"] = group.message
            description["members"] = [
                describe(e, own=own, depth=depth + 1) for e in group.exceptions[:MAX_CHAIN]
            ]
    return description


def encode_raised(exc: BaseException, own: tuple[str, ...] = ()) -> bytes:
    """The exception's description as a pickle of values."""
    return pickle.dumps(describe(exc, own=own), protocol=5)
