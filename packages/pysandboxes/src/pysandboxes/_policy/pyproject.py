"""Rules kept in ``pyproject.toml``, under ``[tool.py-sandboxes]``: the reader.

In ``pyproject.toml`` the rules live in one table, read by ``pyproject_rule_lines``::

    [tool.py-sandboxes]
    expose-ro = ["./data", "~/.config/app"]   # any key: an array, one rule per string
    env = ["HOME=${HOME}"]
    net = ["ALLOW|tcp|127.0.0.1|8000|OUT"]
    os-sandbox = "landlock"                   # or a string: one rule
    py-sandbox = true                         # booleans give "true" / "false"
    include = ["../shared.py-sandboxes"]      # becomes: include "../shared.py-sandboxes"

    [tool.py-sandboxes.bwrap]                 # a sub-table holds provider options
    hostname = "box"                          # becomes: bwrap.hostname=box

Each value is the text after ``key=`` in a rule file, so a key may need quotes in TOML
(``"eval-syntax:calc" = ["arith"]``). Numbers, dates, nested arrays and deeper tables are
refused with the line that holds them: write ``"500ms"``, not ``500``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import cast

import tomlkit
from tomlkit.exceptions import ParseError, TOMLKitError

TABLE = ("tool", "py-sandboxes")
_KEY = re.compile(r"[A-Za-z0-9_.:-]+")
_ANY_BREAK = re.compile(r"[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def pyproject_rule_lines(text: str) -> list[tuple[int, str]] | None:
    """The rules of ``[tool.py-sandboxes]`` as ``(line, "key=value")`` pairs, in file order.

    Returns ``None`` when the text has no such table. Raises ``ValueError`` starting with
    ``line N:`` for text that is not TOML, or for a value of a type the format does not take.
    """
    tool = parse_toml(text).unwrap().get("tool")
    table = cast("dict[str, object]", tool).get("py-sandboxes") if isinstance(tool, dict) else None
    if table is None:
        return None
    lines = _value_lines(text)

    def where(*path: str | int) -> int:
        path = (*TABLE, *path)
        while path and path not in lines:
            path = path[:-1]
        return lines.get(path, 1)

    if not isinstance(table, dict):
        raise ValueError(f"line {where()}: tool.py-sandboxes must be a table")
    pairs: list[tuple[int, str]] = []
    for key, value in cast("dict[str, object]", table).items():
        if isinstance(value, dict) and "." not in key:  # provider options
            for option, item in cast("dict[str, object]", value).items():
                line = where(key, option)
                pairs.append((line, f"{key}.{option}={_scalar(item, line, key, option)}"))
            continue
        items: list[object] = cast("list[object]", value) if isinstance(value, list) else [value]
        for index, item in enumerate(items):
            line = where(key, index) if isinstance(value, list) else where(key)
            rule = _scalar(item, line, key)
            if key == "include" and '"' in rule:
                raise ValueError(f"line {line}: include: a path cannot contain '\"'")
            pairs.append((line, f'include "{rule}"' if key == "include" else f"{key}={rule}"))
    pairs.sort(key=lambda pair: pair[0])  # a sub-table may sit anywhere in the file
    return pairs


def parse_toml(text: str) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        message = str(exc).removesuffix(f" at line {exc.line} col {exc.col}")
        raise ValueError(f"line {exc.line}: not valid TOML: {message}") from exc
    except TOMLKitError as exc:
        raise ValueError(f"line 1: not valid TOML: {exc}") from exc


def _scalar(value: object, line: int, *names: str) -> str:
    what = ".".join(names)
    if not all(_KEY.fullmatch(name) for name in names):
        raise ValueError(f"line {line}: {what!r} is not a rule key")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        got = "an array" if isinstance(value, list) else "a table"
        raise ValueError(f"line {line}: {what}: expected a string or a boolean, got {got}")
    if not isinstance(value, str):
        got = "a number" if isinstance(value, int | float) else f"a {type(value).__name__}"
        raise ValueError(f"line {line}: {what}: expected a string, got {got}: write it in quotes")
    if _ANY_BREAK.search(value):
        raise ValueError(f"line {line}: {what}: a rule is one line: remove the line break")
    return value


def _value_lines(text: str) -> dict[tuple[str | int, ...], int]:
    """The 1-based line of each table, value and array item of a TOML text, by its path.

    tomlkit gives values without their lines, which error messages need. The text was
    parsed already, so a scanner that knows strings, comments and brackets is enough.
    """
    tokens = list(_tokenize(text))
    lines: dict[tuple[str | int, ...], int] = {}
    at = 0

    def peek() -> str:
        return tokens[at][0] if at < len(tokens) else ""

    def key() -> tuple[str | int, ...]:
        nonlocal at
        parts: list[str | int] = []
        while peek() in ("bare", "str"):
            parts.append(_key_text(tokens[at][1]))
            at += 1
            if peek() != ".":
                break
            at += 1
        return tuple(parts)

    def value(path: tuple[str | int, ...]) -> None:
        nonlocal at
        kind = peek()
        if kind:
            lines.setdefault(path, tokens[at][2])
            at += 1
        if kind in ("[", "{"):
            index = 0
            while peek() not in ("]" if kind == "[" else "}", ""):
                if peek() in ("\n", ","):
                    at += 1
                elif kind == "[":
                    value((*path, index))
                    index += 1
                else:
                    inner = key() or ("",)
                    at += 1  # '='
                    value(path + inner)
            at += 1
        else:  # a scalar may span tokens: 1.5, or a date and a time
            while peek() not in (",", "]", "}", "\n", ""):
                at += 1

    table: tuple[str | int, ...] = ()
    while at < len(tokens):
        kind, _, line = tokens[at]
        if kind == "[":  # a [table] or [[array of tables]] header
            while peek() == "[":
                at += 1
            table = key()
            lines.setdefault(table, line)
            while peek() not in ("\n", ""):
                at += 1
        elif kind in ("bare", "str"):
            path = table + key()
            for size in range(len(table) + 1, len(path)):
                lines.setdefault(path[:size], line)  # tables made by dotted keys
            at += 1  # '='
            value(path)
        else:
            at += 1
    return lines


def _key_text(raw: str) -> str:
    if raw[:1] not in "\"'":
        return raw
    with contextlib.suppress(TOMLKitError):
        return str(tomlkit.parse(f"k = {raw}")["k"])
    return raw[1:-1]


def _tokenize(text: str) -> Iterator[tuple[str, str, int]]:
    """``(kind, text, line)``, kind being ``str``, ``bare``, or one of ``[]{}=,.`` and ``\\n``."""
    at, line, size = 0, 1, len(text)
    while at < size:
        char = text[at]
        if char == "#":
            end = text.find("\n", at)
            at = size if end < 0 else end
        elif char in "\"'":
            end = _string_end(text, at)
            yield "str", text[at:end], line
            line += text.count("\n", at, end)
            at = end
        elif char in "[]{}=,.\n":
            yield char, char, line
            line += char == "\n"
            at += 1
        elif char in " \t\r":
            at += 1
        else:
            end = at
            while end < size and text[end] not in " \t\r\n#\"'[]{}=,.":
                end += 1
            yield "bare", text[at:end], line
            at = end


def _string_end(text: str, start: int) -> int:
    quote = text[start]
    triple = text.startswith(quote * 3, start)
    at = start + (3 if triple else 1)
    while at < len(text):
        if text[at] == "\\" and quote == '"':
            at += 2
        elif triple and text.startswith(quote * 3, at):
            # Up to two more quotes just inside the closing delimiter belong to the string.
            at += 3
            at += (text[at : at + 1] == quote) + (text[at : at + 2] == quote * 2)
            return at
        elif not triple and text[at] in (quote, "\n"):
            return at + 1
        else:
            at += 1
    return len(text)
