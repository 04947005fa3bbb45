"""``${NAME}`` and ``${NAME:-default}`` expansion, defaults nested, from a host environment.

``$NAME`` without braces is left alone, and a value is never expanded twice: text that
comes out of a variable is not scanned again, so a hostile value cannot inject a
reference. Malformed references raise ``ExpansionError`` with a message naming them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_*")  # `*`: env= patterns
_NEXT = _FIRST | frozenset("0123456789")


#: Variables the runtime defines itself, whatever the environment says: the trees of
#: the interpreter that runs the program, so that a rule naming a file there holds for a
#: venv or an interpreter installed elsewhere (another user, another machine). The
#: environment cannot set them: a rule written with one must mean the interpreter.
RUNTIME_VARIABLES = ("PYSB_PREFIX", "PYSB_BASE_PREFIX")


def runtime_variables() -> dict[str, str]:
    """``PYSB_PREFIX`` (the venv, or the interpreter's prefix when there is none) and
    ``PYSB_BASE_PREFIX`` (the interpreter's installation), as real paths."""
    import os
    import sys

    return {
        "PYSB_PREFIX": os.path.realpath(sys.prefix),
        "PYSB_BASE_PREFIX": os.path.realpath(sys.base_prefix),
    }


def with_runtime_variables(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the runtime's own variables (see ``RUNTIME_VARIABLES``) over it."""
    return {**env, **runtime_variables()}


class ExpansionError(ValueError):
    """A ``${...}`` reference is malformed; the message names it."""


def has_reference(text: str) -> bool:
    """Whether ``text`` holds a ``${`` reference at all."""
    return "${" in text


def expand(text: str, env: Mapping[str, str]) -> str:
    """Expand every ``${...}`` of ``text`` from ``env``; an unset name gives ``""``."""
    if "${" not in text:
        return text
    out: list[str] = []
    pos = 0
    while True:
        start = text.find("${", pos)
        if start < 0:
            out.append(text[pos:])
            return "".join(out)
        out.append(text[pos:start])
        value, pos = _reference(text, start, env)
        out.append(value)


def check(text: str) -> None:
    """Raise ``ExpansionError`` when ``text`` holds a malformed reference."""
    expand(text, {})


def _reference(text: str, start: int, env: Mapping[str, str]) -> tuple[str, int]:
    """Expand the reference starting at ``text[start] == '$'``; return it and the end."""
    pos = start + 2
    if pos >= len(text) or text[pos] not in _FIRST:
        raise ExpansionError(f"invalid variable reference '{_excerpt(text, start)}'")
    end = pos + 1
    while end < len(text) and text[end] in _NEXT:
        end += 1
    name = text[pos:end]
    pos = end
    if text.startswith("}", pos):
        return env.get(name, ""), pos + 1
    if not text.startswith(":-", pos):
        raise ExpansionError(
            f"invalid variable reference '{_excerpt(text, start)}': "
            "expected ${NAME} or ${NAME:-default}"
        )
    pos += 2
    default: list[str] = []
    while True:
        if pos >= len(text):
            raise ExpansionError(f"unclosed variable reference '{text[start:]}'")
        if text.startswith("${", pos):
            nested, pos = _reference(text, pos, env)
            default.append(nested)
        elif text[pos] == "}":
            pos += 1
            break
        else:
            default.append(text[pos])
            pos += 1
    value = env.get(name, "")
    return (value if value else "".join(default)), pos


def _excerpt(text: str, start: int) -> str:
    end = text.find("}", start)
    return text[start : end + 1] if end >= 0 else text[start:]
