"""One flat JSON object as text, written without the ``json`` package.

The sandboxed interpreter writes its learning events and decisions as lines of JSON
(``events``, ``decisions``). Importing ``json`` loads ``re`` and ``enum`` with it:
milliseconds of every start of the sandbox, for objects that are always flat. This writes
exactly what ``json.dumps(fields, ensure_ascii=True, separators=(",", ":"))`` writes for
them, with the same C quoting function; reading them back stays ``json``'s job, on the
trusted side (``codec``).
"""

from __future__ import annotations

try:
    from _json import encode_basestring_ascii as _quoted
except ImportError:  # pragma: no cover - an interpreter built without the accelerator
    from json.encoder import py_encode_basestring_ascii as _quoted

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def flat_json(fields: Mapping[str, object]) -> str:
    """``fields`` as one JSON object: string keys; values strings, integers, booleans or
    lists of strings.

    Raises:
        TypeError: a value of another type.
    """
    parts: list[str] = []
    for key, value in fields.items():
        parts.append(_quoted(key) + ":" + _value(value))
    return "{" + ",".join(parts) + "}"


def _value(value: object) -> str:
    if isinstance(value, str):
        return _quoted(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, (list, tuple)):
        items: list[str] = []
        for item in value:  # pyright: ignore[reportUnknownVariableType]
            if not isinstance(item, str):
                raise TypeError(f"a list of a flat JSON object holds strings, not {item!r}")
            items.append(_quoted(item))
        return "[" + ",".join(items) + "]"
    raise TypeError(f"a flat JSON object holds no {type(value).__name__}: {value!r}")
