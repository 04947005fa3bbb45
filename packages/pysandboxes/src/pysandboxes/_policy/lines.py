"""From rule files to rule lines: comments, includes, and where each line comes from.

This is the only module of the parser that reads files. It yields ``RawRule`` items in
order: the extra rules (command line, API keywords) first, then the main file with every
``include`` spliced in place. Problems are collected, never raised one by one.
"""

from __future__ import annotations

import os

from pysandboxes._policy.expand import ExpansionError, expand
from pysandboxes._policy.model import ARG_SOURCE, Origin
from pysandboxes._record import record, replace
from pysandboxes.errors import ConfigIssue

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from typing import Protocol

_MAX_INCLUDE_DEPTH = 32
#: A rule file larger than this is refused rather than read: nobody reviews it.
MAX_RULE_FILE_BYTES = 4 * 1024 * 1024


if TYPE_CHECKING:

    class Sink(Protocol):
        """Where the per-family parsers put what they find."""

        def issue(self, origin: Origin, message: str) -> None:
            """Record a problem that stops the run."""
            ...

        def warn(self, origin: Origin, message: str) -> None:
            """Record a problem shown to the user that does not stop the run."""
            ...

        def add(self, family: str, item: object) -> None:
            """Record a parsed rule of ``family``."""
            ...


@record
class RawRule:
    """One ``key=value`` line, not yet interpreted.

    Attributes:
        key: the text before the first ``=``.
        value: the text after it, comments and surrounding spaces removed.
        origin: where the line is.
        base: the directory relative paths of this line resolve against.
    """

    key: str
    value: str
    origin: Origin
    base: str
    via_arg: bool = False


def strip_comment(line: str) -> str:
    """Drop a ``#`` comment that is outside single or double quotes; strip spaces."""
    if "#" not in line:
        return line.strip()
    quote = ""
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "#":
            return line[:index].strip()
    return line.strip()


def expand_home(path: str, env: Mapping[str, str]) -> str | None:
    """Expand a leading ``~`` from ``HOME`` of ``env`` (the same source as ``${HOME}``).

    ``~user`` is looked up in the password database. ``None`` when there is no home.
    """
    if not path.startswith("~"):
        return path
    head, slash, tail = path.partition("/")
    if head == "~":
        home = env.get("HOME") or os.path.expanduser("~")
    else:
        home = os.path.expanduser(head)
    if not home or home.startswith("~"):
        return None
    return home.rstrip("/") + slash + tail if slash else home


def display_name(path: str, cwd: str) -> str:
    """A file as shown in messages: relative to the cwd when below it, else absolute."""
    try:
        relative = os.path.relpath(path, cwd)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


class LineReader:
    """Collects the rule lines of a configuration, following includes.

    Attributes:
        cwd: the directory command-line rules and displayed names are relative to.
        env: the host environment, for ``${VAR}`` in include paths.
        platform: ``sys.platform`` of the host, for ``include-platform``.
        pyproject_lines: turns a ``pyproject.toml`` text into ``(line, rule)`` pairs, or
            ``None`` when it holds no rules; raises ``ValueError`` naming a bad line.
        issues: the problems found, in reading order.
        files: every rule file consulted, existing or not.
    """

    def __init__(
        self,
        cwd: str,
        env: Mapping[str, str],
        platform: str,
        pyproject_lines: Callable[[str], list[tuple[int, str]] | None],
    ) -> None:
        self.cwd = cwd
        self.env = env
        self.platform = platform
        self.pyproject_lines = pyproject_lines
        self.issues: list[ConfigIssue] = []
        self.files: list[str] = []
        self._active: set[str] = set()
        self._done: set[str] = set()

    def extra(self, rules: list[str]) -> Iterator[RawRule]:
        """The rules given on the command line or as API keywords, origin ``<arg>``."""
        for number, text in enumerate(rules, start=1):
            origin = Origin(ARG_SOURCE, number, text.strip())
            for rule in self._line(text.strip(), origin, self.cwd, depth=0, in_file=False):
                # Rules of a file included from the command line are command-line rules
                # too: the learn=false lock must refuse them.
                yield replace(rule, via_arg=True)

    def file(self, path: str) -> Iterator[RawRule]:
        """Every rule of ``path`` and its includes, in order."""
        yield from self._file(os.path.abspath(path), depth=0, including=None)

    def _issue(self, origin: Origin, message: str) -> None:
        self.issues.append(ConfigIssue(origin.source, origin.line, message))

    def _file(self, path: str, depth: int, including: Origin | None) -> Iterator[RawRule]:
        real = os.path.realpath(path)
        if path not in self.files:
            self.files.append(path)
        if real != path and real not in self.files:
            self.files.append(real)
        if real in self._active or real in self._done:
            return  # a cycle, or a file included twice: its rules count once
        source = display_name(path, self.cwd)
        text = self._read(path, source, including)
        if text is None:
            return
        self._active.add(real)
        base = os.path.dirname(path)
        try:
            if os.path.basename(path) == "pyproject.toml":
                yield from self._pyproject(text, path, source, base, depth)
                return
            for number, line in enumerate(text.splitlines(), start=1):
                cleaned = strip_comment(line)
                if cleaned:
                    origin = Origin(source, number, cleaned, path)
                    yield from self._line(cleaned, origin, base, depth, in_file=True)
        finally:
            self._active.discard(real)
            self._done.add(real)

    def _read(self, path: str, source: str, including: Origin | None) -> str | None:
        try:
            size = os.path.getsize(path)
            if size > MAX_RULE_FILE_BYTES:
                raise ValueError(f"{size} bytes, more than {MAX_RULE_FILE_BYTES}")
            with open(path, "rb") as handle:
                return handle.read().decode("utf-8-sig")  # an editor's BOM is not a key
        except FileNotFoundError:
            if including is None:
                self.issues.append(ConfigIssue(source, 0, "the rule file does not exist"))
            return None  # a missing include adds nothing, but stays protected
        except IsADirectoryError:
            message = f"'{source}' is a directory, not a rule file"
        except UnicodeDecodeError as exc:
            message = f"'{source}' is not UTF-8 text ({exc.reason} at byte {exc.start})"
        except (OSError, ValueError) as exc:
            # Skipping an unreadable file could silently drop a learn=false lock.
            message = f"cannot read '{source}': {getattr(exc, 'strerror', None) or exc}"
        if including is None:
            self.issues.append(ConfigIssue(source, 0, message))
        else:
            self._issue(including, message)
        return None

    def _pyproject(
        self, text: str, path: str, source: str, base: str, depth: int
    ) -> Iterator[RawRule]:
        try:
            pairs = self.pyproject_lines(text)
        except ValueError as exc:
            self.issues.append(_located(source, str(exc)))
            return
        for number, rule in pairs or []:
            origin = Origin(source, number, rule.strip(), path)
            yield from self._line(rule.strip(), origin, base, depth, in_file=True)

    def _line(
        self, text: str, origin: Origin, base: str, depth: int, *, in_file: bool
    ) -> Iterator[RawRule]:
        if "\0" in text:
            self._issue(origin, "the line holds a NUL character")
            return
        if text.startswith("include") and text[7:8] in ("", " ", "\t", "-", '"'):
            yield from self._include(text, origin, base, depth)
            return
        key, equal, value = text.partition("=")
        if not equal:
            self._issue(origin, f"invalid rule '{text}': expected key=value")
            return
        yield RawRule(key, value.strip(), origin, base)

    def _include(self, text: str, origin: Origin, base: str, depth: int) -> Iterator[RawRule]:
        parsed = _parse_include(text)
        if parsed is None:
            self._issue(
                origin,
                f"invalid rule '{text}': expected include \"path\", "
                'include-optional "path" or include-platform=PLATFORM "path"',
            )
            return
        platform, raw_target, optional = parsed
        if platform is not None and platform != self.platform:
            return
        if depth >= _MAX_INCLUDE_DEPTH:
            self._issue(origin, f"includes nested more than {_MAX_INCLUDE_DEPTH} deep")
            return
        try:
            target = expand(raw_target, self.env)
        except ExpansionError as exc:
            self._issue(origin, f"in '{text}': {exc}")
            return
        if not target:
            self._issue(origin, f"in '{text}': the path is empty")
            return
        if target.startswith("~"):
            expanded = expand_home(target, self.env)
            if expanded is None:
                self._issue(origin, f"in '{text}': cannot expand '~': no home directory")
                return
            target = expanded
        path = os.path.normpath(os.path.join(base, target))
        if not optional and not os.path.lexists(path):
            # A misspelt name would drop its rules, a learn=false lock among them.
            self._issue(
                origin,
                f"'{text}': '{display_name(path, self.cwd)}' does not exist (write "
                f'include-optional "{raw_target}" for a file that may be missing)',
            )
        yield from self._file(path, depth + 1, including=origin)


def _parse_include(text: str) -> tuple[str | None, str, bool] | None:
    """``include "p"``, ``include-optional "p"`` or ``include-platform=P "p"`` →
    (platform, path, whether a missing file is fine), else ``None``."""
    head, space, rest = text.partition(" ")
    if not space:
        head, space, rest = text.partition("\t")
    rest = rest.strip()
    if len(rest) < 2 or rest[0] != '"' or rest[-1] != '"' or '"' in rest[1:-1]:
        return None
    platform: str | None = None
    if head.startswith("include-platform="):
        platform = head[len("include-platform=") :]
        if not platform or not all(c.isalnum() or c in "_.-" for c in platform):
            return None
    elif head not in ("include", "include-optional"):
        return None
    return platform, rest[1:-1], head == "include-optional"


def _located(source: str, message: str) -> ConfigIssue:
    """A ``ValueError("line N: ...")`` of the pyproject reader as an issue at line N."""
    prefix, colon, rest = message.partition(": ")
    if colon and prefix.startswith("line ") and prefix[5:].isdigit():
        return ConfigIssue(source, int(prefix[5:]), rest)
    return ConfigIssue(source, 0, message)
