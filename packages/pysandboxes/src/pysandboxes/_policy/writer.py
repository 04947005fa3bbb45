"""Learned rules written back, into a ``.py-sandboxes`` file or a ``pyproject.toml``.

The pure functions (``insert_learned``, ``insert_learned_pyproject``) turn a text into a
text and keep every byte they do not add: the user reviews a diff that holds only the new
rules. The I/O functions (``write_rule_file``, ``write_pyproject``) add what a security
tool owes its user on disk: a numbered backup that is never overwritten, and an atomic
replace, so a crash leaves either the old file or the new one.

The ``pyproject.toml`` format is described in ``pyproject``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import tomlkit
from tomlkit.items import AbstractTable, Array, Bool, Item, String, Table

from pysandboxes._policy.lines import strip_comment
from pysandboxes._policy.pyproject import parse_toml, pyproject_rule_lines
from pysandboxes._policy.template import TEMPLATE

#: The learning blocks, in the order of the template.
BLOCKS: tuple[str, ...] = ("envs", "files", "socket", "import", "api", "eval", "remote_result")
#: Block name -> its opening and closing marker lines.
MARKERS: Mapping[str, tuple[str, str]] = {
    block: (f"# <{name}>", f"# </{name}>")
    for block in BLOCKS
    for name in [
        "learning_remote_result" if block == "remote_result" else f"learning_guard_{block}"
    ]
}

_CLOSING = re.compile(r"#\s*</(learning_guard_\w+|learning_remote_result)>")
_CLOSING_BLOCK = {closing[4:-1]: block for block, (_, closing) in MARKERS.items()}
_KEY = re.compile(r"[A-Za-z0-9_.:-]+")
_NEWLINE = re.compile(r"\r\n|\r|\n")
# Characters str.splitlines() breaks on beyond \r and \n. A line holding one may be read
# as several lines, so it never proves that a rule is present.
_ODD_BREAKS = re.compile(r"[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_ANY_BREAK = re.compile(r"[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
# Keys a rule file may set only once: learning replaces them instead of adding a value.
_SINGLE_KEYS = frozenset(
    {"os-sandbox", "py-sandbox", "learn", "remote-result-mode", "remote-result-guard", "port"}
    | {"sandbox-timeout", "sandbox-memory", "sandbox-open-files", "sandbox-processes"}
)


@dataclass(frozen=True, slots=True)
class LearnedRule:
    """A rule that learning found missing, and where to write it.

    Attributes:
        block: the learning block it belongs to, one of ``BLOCKS``.
        line: the rule, e.g. ``expose-ro=./data/config.toml``.
        note: why it was learned, written as an end-of-line comment
            (``learned: read by app/db.py:12``).
        group: a header comment written once above the rules of the same group in one
            insertion (``⚠ Dangerous!``, ``Standard Python``).
        secret: a right to a secret (a key, a credential file, a token variable): written
            commented out, so that granting it is a deliberate edit.
    """

    block: str
    line: str
    note: str | None = None
    group: str | None = None
    secret: bool = False


def insert_learned(text: str, rules: Sequence[LearnedRule], *, now: datetime) -> str:
    """Insert the rules that ``text`` does not already hold, keeping every byte of it.

    A rule goes just before the closing marker of its block, under one
    ``# Add rules (YYYY/MM/DD at HH:MM)`` header per block touched. Rules whose block has
    no closing marker (a hand-written file) are appended at the end, in ``BLOCKS`` order,
    under one such header. A rule is dropped when it is already an active line anywhere in
    the file, spaces around ``=`` and a trailing comment aside. Returns ``text`` itself
    when nothing is new. Raises ``ValueError`` for a rule that is not one line of a rule.
    """
    lines = _NEWLINE.split(text)
    ends = _NEWLINE.findall(text) + [""]
    present = {_active_text(line) for line in lines if not _ODD_BREAKS.search(line)}
    present |= {
        "#secret:" + _active_text(line.strip().removeprefix("#").strip())
        for line in lines
        if _SECRET_NOTE in line
    }
    fresh = _fresh(rules, present)
    if not fresh:
        return text
    newline = ends[0] or "\n"
    header = now.strftime("# Add rules (%Y/%m/%d at %H:%M)")
    closing: dict[str, int] = {}
    for index, line in enumerate(lines):
        match = _CLOSING.fullmatch(line.strip())
        block = _CLOSING_BLOCK.get(match.group(1)) if match else None
        if block:
            closing.setdefault(block, index)
    before: dict[int, list[str]] = {}
    tail: list[str] = []
    for block in BLOCKS:
        body = _render_block([rule for rule in fresh if rule.block == block])
        if body and block in closing:
            before[closing[block]] = [header, *body]
        else:
            tail += body
    out: list[str] = []
    for index, (line, end) in enumerate(zip(lines, ends, strict=True)):
        out += [added + newline for added in before.get(index, [])]
        out += [line, end]
    result = "".join(out)
    return _append(result, [header, *tail], newline) if tail else result


def _append(text: str, added: list[str], newline: str) -> str:
    """``added`` as the last lines of ``text``, after a blank line; ``text`` kept as is."""
    body = newline.join(added)
    if not text:
        return body + newline
    ends_line = text.endswith(("\n", "\r"))
    last_line = _NEWLINE.split(text)[-2 if ends_line else -1]
    gap = newline if last_line.strip() else ""
    return text + ("" if ends_line else newline) + gap + body + (newline if ends_line else "")


def _active_text(line: str) -> str:
    """The rule ``line`` holds as the parser reads it, ``""`` for a blank or comment line.

    Comments start at a ``#`` outside quotes; spaces around the key's ``=`` are ignored.
    """
    text = strip_comment(line)  # the parser's own reading of comments and quotes
    key, equal, value = text.partition("=")
    if equal and _KEY.fullmatch(key.strip()):
        return f"{key.strip()}={value.strip()}"
    return text


#: The note of a secret written commented out (see ``LearnedRule.secret``).
_SECRET_NOTE = "⚠ SECRET, not granted: uncomment to grant it"


def _fresh(rules: Sequence[LearnedRule], present: set[str]) -> list[LearnedRule]:
    seen = set(present)
    fresh: list[LearnedRule] = []
    for rule in rules:
        if rule.block not in BLOCKS:
            raise ValueError(f"unknown learning block {rule.block!r}: expected one of {BLOCKS}")
        if _ANY_BREAK.search(rule.line) or not _active_text(rule.line):
            # A line break would smuggle a second rule in under the first one's note.
            raise ValueError(f"not a single rule line: {rule.line!r}")
        text = _active_text(rule.line)
        # A secret stays commented out: written once, and never again once it is there,
        # commented or granted.
        key = f"#secret:{text}" if rule.secret else text
        if text not in seen and key not in seen:
            seen.add(key)
            fresh.append(rule)
    return fresh


def _comment(text: str) -> str:
    """Comment text on one line: a note or group may quote what the program touched."""
    # Control characters are line breaks for str.splitlines() and invalid in TOML comments.
    return _CONTROL.sub(" ", text).strip().lstrip("#").strip()


def _by_group(rules: Sequence[LearnedRule]) -> dict[str | None, list[LearnedRule]]:
    groups: dict[str | None, list[LearnedRule]] = {}
    for rule in rules:
        groups.setdefault(_comment(rule.group) if rule.group else None, []).append(rule)
    return groups


def _render_block(rules: Sequence[LearnedRule]) -> list[str]:
    out: list[str] = []
    for group, members in _by_group(rules).items():
        if group:
            out.append(f"# {group}")
        for rule in members:
            text = rule.line.strip()
            note = _comment(rule.note) if rule.note else ""
            if rule.secret:
                out.append(f"# {text}  # {_SECRET_NOTE}{f' ({note})' if note else ''}")
                continue
            if not note:
                out.append(text)
            elif "#" not in text and _active_text(f"{text}  # x") == _active_text(text):
                out.append(f"{text}  # {note}")
            else:
                # An unbalanced quote would swallow an end-of-line note into the value.
                out += [f"# {note}", text]
    return out


# -- files on disk -------------------------------------------------------------------------


def write_rule_file(
    path: Path, rules: Sequence[LearnedRule], *, now: datetime, initial: str = TEMPLATE
) -> Path | None:
    """Write the learned rules into the rule file at ``path``.

    A missing file is created from ``initial`` (the commented ``TEMPLATE`` by default)
    with the rules inserted, mode 0644
    whatever the umask. An existing file is rewritten only when a rule is new: first
    copied to ``<name>.old`` (or ``.old_1``, ``.old_2``..., never overwriting a backup),
    then replaced atomically, with its permission bits kept (not its owner: the file is
    written by the user who runs the learning). A symlink at ``path`` is replaced by a
    regular file, never written through.

    Returns the backup's path, or ``None`` when no backup was made: the file was created,
    or nothing was new and nothing was written. Raises ``OSError`` as the system reports
    it; the file is then unchanged and no temporary file or new backup is left behind.
    """
    return _rewrite(path, lambda text: insert_learned(text, rules, now=now), initial)


def write_pyproject(path: Path, rules: Sequence[LearnedRule], *, now: datetime) -> Path | None:
    """Write the learned rules into ``[tool.py-sandboxes]`` of ``path``.

    Same contract as ``write_rule_file``; a missing file is created holding the table
    only. Also raises ``ValueError`` when the existing file is not valid TOML.
    """
    return _rewrite(path, lambda text: insert_learned_pyproject(text, rules, now=now), "")


def _rewrite(path: Path, edit: Callable[[str], str], initial: str) -> Path | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
            mode = os.stat(handle.fileno()).st_mode & 0o777
    except FileNotFoundError:
        _replace(path, edit(initial).encode(), 0o644)
        return None
    # surrogateescape keeps even bytes that are not UTF-8 exactly as they were.
    text = data.decode("utf-8", "surrogateescape")
    new = edit(text)
    if new == text:
        return None
    backup = _backup(path, data, mode)
    try:
        _replace(path, new.encode("utf-8", "surrogateescape"), mode)
    except BaseException:
        backup.unlink(missing_ok=True)  # the file is unchanged: this copy has no use
        raise
    return backup


def _write(fd: int, data: bytes, mode: int) -> None:
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fchmod(handle.fileno(), mode)  # explicit: the umask must not decide
        os.fsync(handle.fileno())


def _backup(path: Path, data: bytes, mode: int) -> Path:
    for number in itertools.count():
        backup = path.with_name(f"{path.name}.old" + (f"_{number}" if number else ""))
        try:
            # O_EXCL: an existing backup (or a symlink planted there) is never touched.
            fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        try:
            _write(fd, data, mode)
        except BaseException:
            backup.unlink(missing_ok=True)
            raise
        return backup
    raise AssertionError("unreachable")  # pragma: no cover


def _replace(path: Path, data: bytes, mode: int) -> None:
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        _write(fd, data, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    with contextlib.suppress(OSError):  # durability of the rename; not all systems allow it
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def insert_learned_pyproject(text: str, rules: Sequence[LearnedRule], *, now: datetime) -> str:
    """Add the rules to ``[tool.py-sandboxes]`` of a pyproject text; tomlkit keeps the rest.

    Each value is appended to the array of its key, one item per line with its note as an
    end-of-line comment, under an ``# Add rules (YYYY/MM/DD at HH:MM)`` comment; the key,
    or the table at the end of the file, is created when missing. A key a rule file may set
    only once (``os-sandbox``...) and provider options get a string instead, replacing the
    old value. Rules already present are skipped; returns ``text`` itself when nothing is
    new. Raises ``ValueError`` for text that is not TOML, or whose table cannot take them.
    """
    existing = pyproject_rule_lines(text)
    # The parser takes these values as they are ('#' is no comment in TOML): compare as is.
    # TOML keeps no commented-out item in an array: a secret is only named in the summary.
    granted = [rule for rule in rules if not rule.secret]
    fresh = _fresh(granted, {rule for _, rule in existing or []})
    if not fresh:
        return text
    if existing is None:
        gap = ("" if text.endswith("\n") else "\n") + "\n" if text.strip() else ""
        text = f"{text}{gap}[tool.py-sandboxes]\n"
    doc = parse_toml(text)
    tool = doc.item("tool") if "tool" in doc else None
    inside = isinstance(tool, Table) and "py-sandboxes" in tool
    table = tool.item("py-sandboxes") if isinstance(tool, Table) and inside else None
    if not isinstance(table, Table):
        raise ValueError("tool.py-sandboxes must be a [tool.py-sandboxes] table to take rules")
    by_key: dict[str, list[LearnedRule]] = {}
    for rule in fresh:
        by_key.setdefault(_split_rule(rule)[0], []).append(rule)
    header = now.strftime("Add rules (%Y/%m/%d at %H:%M)")
    for key, members in by_key.items():
        _extend(table, key, members, header)
    out = doc.as_string()
    if "\r\n" in text and not re.search(r"(?<!\r)\n", text):  # a CRLF file stays CRLF
        out = re.sub(r"(?<!\r)\n", "\r\n", out)
    return out


def _split_rule(rule: LearnedRule) -> tuple[str, str]:
    text = _active_text(rule.line)
    include = re.fullmatch(r'include\s+"([^"]*)"', text)
    key, equal, value = ("include", "=", include.group(1)) if include else text.partition("=")
    if not equal or not _KEY.fullmatch(key):
        raise ValueError(f"not a key=value rule: {rule.line!r}")
    return key, value


def _extend(table: AbstractTable, key: str, members: list[LearnedRule], header: str) -> None:
    provider, dot, option = key.partition(".")
    if dot:  # a provider option lives in the provider's sub-table
        if provider not in table:
            table.append(provider, tomlkit.table())
        sub = table[provider]
        if not isinstance(sub, AbstractTable):
            raise ValueError(f"tool.py-sandboxes.{provider} must be a table of options")
        table, key = sub, option
    old = table.item(key) if key in table else None
    if dot or key in _SINGLE_KEYS:
        item = tomlkit.string(_split_rule(members[-1])[1])
        if members[-1].note:
            item.comment(_comment(members[-1].note))
        table[key] = item
        return
    if old is None or isinstance(old, String | Bool):
        fresh = tomlkit.array()
        if old is not None:
            fresh.add_line(old)
        table[key] = fresh
    array = table[key]
    if not isinstance(array, Array):
        raise ValueError(f"tool.py-sandboxes.{key} is not an array of strings")
    if "\n" not in array.as_string():  # one item per line from now on, to carry the notes
        items: list[Item] = list(array)
        array.clear()
        for item in items:
            array.add_line(item)
    indent = re.search(r"\n([ \t]+)\S", array.as_string())
    pad = indent.group(1) if indent else "    "
    array.add_line(indent=pad, comment=header)
    for group, grouped in _by_group(members).items():
        if group:
            array.add_line(indent=pad, comment=group)
        for rule in grouped:
            note = _comment(rule.note) if rule.note else ""
            array.add_line(_split_rule(rule)[1], indent=pad, comment=note or None)
    if not re.search(r"\n[ \t]*\]\Z", array.as_string()):
        array.add_line(indent="")
