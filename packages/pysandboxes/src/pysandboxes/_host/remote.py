"""Exceptions of sandboxed calls, rebuilt in the caller from their description.

The description (``_wire.replies``, decoded by ``_wire.codec``) holds values only, and
the child may have forged it: nothing here imports, runs or keeps what it names.

- A class the caller has loaded itself (its module is in ``sys.modules``, the class
  found there under exactly the name sent, an ``Exception`` that defines no ``__del__``)
  is rebuilt as that very class, so ``except AppError:`` works: made by its nearest
  built-in base's ``__new__`` (never the class's own ``__new__`` or ``__init__``), its
  ``args`` and attributes set as data, with no descriptor or ``__setattr__`` of the class
  run. A Py-Sandboxes refusal is rebuilt as itself with its rule fields.
- Any other class becomes a ``RemoteError`` subclass of the same name that also inherits
  the nearest built-in base (``except ValueError`` and ``except SandBoxError`` both
  work); those stand-in classes are kept in a bounded cache.
- The caller's control flow is never the child's: a remote exception is always an
  ``Exception``, so ``SystemExit``, ``KeyboardInterrupt``, ``BaseException`` and
  ``BaseExceptionGroup`` raised in the child arrive as ``RemoteError`` subclasses (a
  group as an ``ExceptionGroup``).

The work is bounded whatever the child sent: each description is rebuilt once (a node
the description shares is shared, a cycle is cut), and a reply holds at most
``MAX_EXCEPTIONS`` exceptions and ``MAX_ROWS`` traceback rows.

The remote traceback is made of real traceback entries, one per remote frame, so it
prints as if the call had been local, but under a name no file has (``<sandboxed
/path/file.py>``) with the line the child sent registered for it: printing it never
reads a file of the caller's, even one the child named (it could hold a key).
"""

from __future__ import annotations

import builtins
import itertools

from pysandboxes import errors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import CodeType, TracebackType
    from typing import Any

#: Bounds of one reply's rebuilding: exceptions (chains and group members), traceback
#: rows in all, and the stand-in classes kept across replies.
MAX_EXCEPTIONS = 1000
MAX_ROWS = 5000
MAX_STAND_INS = 512
_MAX_SOURCE = 1000
_REFUSALS = frozenset(
    {
        "RuleFileNotFoundError",
        "RulePermissionError",
        "RuleSocketConnectionRefusedError",
        "RuleModuleNotFoundError",
        "RuleApiPermissionError",
    }
)
_remote_classes: dict[tuple[str, str, str], type[errors.RemoteError]] = {}
_SET_ARGS: Any = BaseException.__dict__["args"].__set__
_GET_DICT: Any = BaseException.__dict__["__dict__"].__get__


def rebuild(description: object) -> Exception:
    """The exception a description stands for, with its traceback, chain and group."""
    return _Rebuild().exception(description)


class _Rebuild:
    """One reply's rebuilding: what was made (by the description's id), what is left."""

    def __init__(self) -> None:
        self.made: dict[int, Exception | None] = {}  # None: being made (a cycle)
        self.kept: list[object] = []  # the descriptions, so that their ids stay theirs
        self.exceptions = MAX_EXCEPTIONS
        self.rows = MAX_ROWS

    def exception(self, description: object) -> Exception:
        key = id(description)
        if key in self.made:
            return self.made[key] or errors.RemoteError("(a cycle in the remote exception)")
        self.kept.append(description)
        self.exceptions -= 1
        if type(description) is not dict or self.exceptions < 0:
            what = "that is not described" if self.exceptions >= 0 else "of too many parts"
            return errors.RemoteError(f"the sandbox sent an exception {what}")
        found: dict[str, Any] = description  # type: ignore[assignment]
        self.made[key] = None
        exc = self._instance(found)
        self.made[key] = exc
        for note in _list(found.get("notes"))[:200]:
            if type(note) is str:
                exc.add_note(note)
        exc.__traceback__ = self._traceback(_list(found.get("frames")))
        cause, context = found.get("cause"), found.get("context")
        if cause is not None:
            exc.__cause__ = self.exception(cause)
        if context is not None:
            exc.__context__ = self.exception(context)
        exc.__suppress_context__ = found.get("suppress_context") is True
        return exc

    def _instance(self, found: dict[str, Any]) -> Exception:
        module, qualname = str(found.get("module", "")), str(found.get("qualname", "Exception"))
        sent: Any = found.get("args", ())
        args: tuple[object, ...] = sent if type(sent) is tuple else ()  # pyright: ignore[reportUnknownVariableType]
        members = _list(found.get("members"))
        if members:
            rebuilt = [self.exception(m) for m in members[:MAX_EXCEPTIONS]]
            return ExceptionGroup(str(found.get("message", "")), rebuilt)
        if module == "builtins":
            kind = vars(builtins).get(qualname)
            if isinstance(kind, type) and issubclass(kind, Exception):
                try:
                    return kind(*args)
                except Exception:  # an argument the constructor refuses: keep the class
                    return _made(kind, args, None)
        refusal = found.get("refusal")
        if module == "pysandboxes.errors" and qualname in _REFUSALS and type(refusal) is tuple:
            message, fields = refusal  # type: ignore[misc]
            kind = getattr(errors, qualname)
            try:
                return kind(str(message), **dict(fields))  # type: ignore[arg-type]
            except TypeError:
                pass  # fields of another version: the remote form below keeps the message
        own = _loaded_class(module, qualname)
        if own is not None:
            return _made(own, args, found.get("attributes"))
        return _remote(module, qualname, found, args)

    def _traceback(self, frames: list[object]) -> TracebackType | None:
        entries: list[TracebackType] = []
        for row in frames[: max(0, self.rows)]:
            self.rows -= 1
            if type(row) is not tuple:
                continue
            fields: tuple[object, ...] = row  # type: ignore[assignment]
            if len(fields) != 4:
                continue
            filename, lineno, name, source = fields
            if type(filename) is not str or type(lineno) is not int or type(name) is not str:
                continue
            entry = _entry(filename, lineno, name, source if type(source) is str else "")
            if entry is not None:
                entries.append(entry)
        for outer, inner in itertools.pairwise(entries):
            outer.tb_next = inner
        return entries[0] if entries else None


def _list(value: object) -> list[object]:
    """``value`` if it is a list (as the description's fields are), else an empty one."""
    if type(value) is not list:
        return []
    items: list[object] = value  # type: ignore[assignment]
    return items


def _loaded_class(module: str, qualname: str) -> type[Exception] | None:
    """The caller's own class ``module.qualname``, if the caller loaded that module and
    the class is one it may rebuild; found by reading namespaces (no ``__getattr__``)."""
    import sys

    if module.startswith("pysandboxes") or not qualname:
        return None
    found: object = sys.modules.get(module)
    for part in qualname.split("."):
        try:
            namespace: dict[str, object] = object.__getattribute__(found, "__dict__")
        except AttributeError:
            return None
        found = namespace.get(part) if type(namespace) is dict else None
        if found is None:
            return None
    if not isinstance(found, type) or not issubclass(found, Exception):
        return None
    if found.__module__ != module or found.__qualname__ != qualname:
        return None  # an alias: only a class's own name stands for it
    if any("__del__" in vars(base) for base in found.__mro__[:-1]):
        return None  # dropping it would run the class's code on the child's data
    return found


def _made(kind: type[Exception], args: tuple[object, ...], attributes: object) -> Exception:
    """An instance of ``kind`` made by its nearest built-in base, with ``args`` and the
    public ``attributes`` written as data."""
    base = next(
        b for b in kind.__mro__ if b.__module__ == "builtins" and issubclass(b, BaseException)
    )
    try:
        made: Any = base.__new__(kind, *args)
    except Exception:
        made = base.__new__(kind)
    _SET_ARGS(made, args)
    if type(attributes) is dict:
        state: dict[str, object] = _GET_DICT(made)
        pairs: list[tuple[object, object]] = list(attributes.items())  # pyright: ignore[reportUnknownArgumentType]
        for attribute, value in pairs[:1000]:
            if type(attribute) is str and not attribute.startswith("__"):
                state[attribute] = value
    return made


def _remote(
    module: str, qualname: str, found: dict[str, Any], args: tuple[object, ...]
) -> Exception:
    bases = [b for b in _list(found.get("bases"))[:64] if type(b) is str]
    builtin_base: type[Exception] = Exception
    for name in bases:
        candidate = vars(builtins).get(name)
        if isinstance(candidate, type) and issubclass(candidate, Exception):
            builtin_base = candidate
            break
    key = (module[:200], qualname[:200], builtin_base.__name__)
    kind = _remote_classes.get(key)
    if kind is None:
        name = key[1].rpartition(".")[2] or "RemoteError"
        namespace = {"__module__": key[0], "__qualname__": key[1], "__str__": _remote_str}
        try:
            made = type(name, (errors.RemoteError, builtin_base), namespace)
        except TypeError:  # a base whose layout cannot be combined
            made = type(name, (errors.RemoteError,), namespace)
        if len(_remote_classes) >= MAX_STAND_INS:
            del _remote_classes[next(iter(_remote_classes))]  # the oldest
        kind = _remote_classes[key] = made
    exc: Any = _made(kind, args, found.get("attributes"))
    exc.remote_class = f"{key[0]}.{key[1]}"
    exc.remote_args = args
    exc.remote_text = str(found.get("text", ""))[: 64 * 1024]
    return exc


def _remote_str(self: Any) -> str:
    return str(getattr(self, "remote_text", "") or ", ".join(map(str, self.args)))


_RAISE: list[CodeType] = []
#: The remote names registered with linecache (oldest first), and their lines.
_SOURCES: dict[str, _Lines] = {}
_MAX_SOURCES = 256


def _entry(filename: str, lineno: int, name: str, source: str) -> TracebackType | None:
    """One traceback entry that reads ``<sandboxed filename>``, ``lineno``, ``name``: the
    frame of a fixed statement (nothing the child sent is run, only named), its source
    line the one the child sent."""
    if "\0" in filename or "\0" in name or not 0 < lineno < 1 << 24:
        return None
    shown = f"<sandboxed {filename[:4096]}>"
    _remember(shown, lineno, source[:_MAX_SOURCE])
    if not _RAISE:
        # Its positions span more than any line sent: no caret marks a part of the line.
        statement = "raise _e or _" + "_" * _MAX_SOURCE
        _RAISE.append(compile(statement, "<sandboxed>", "exec", dont_inherit=True))
    code = _RAISE[0].replace(
        co_filename=shown, co_name=name[:1000], co_qualname=name[:1000], co_firstlineno=lineno
    )
    try:
        exec(code, {"_e": _Marker(), "__builtins__": {}})
    except _Marker as marker:
        tb = marker.__traceback__
        return tb.tb_next if tb is not None else None
    except Exception:
        return None
    return None


class _Lines(list[str]):
    """A remote file's lines as linecache reads them (``len``, an index): only the lines
    the child sent are held, however far down the file they are."""

    def __init__(self) -> None:
        super().__init__()
        self.held: dict[int, str] = {}

    def __len__(self) -> int:
        return max(self.held, default=0)

    def __getitem__(self, index: Any) -> Any:
        if type(index) is not int:
            return []
        return self.held.get(index + 1, "\n")


def _remember(shown: str, lineno: int, source: str) -> None:
    """Register the child's line for ``shown`` with linecache (names in angle brackets
    are never read from disk), keeping at most ``_MAX_SOURCES`` names."""
    import linecache

    lines = _SOURCES.pop(shown, None)
    if lines is None:
        if len(_SOURCES) >= _MAX_SOURCES:
            oldest = next(iter(_SOURCES))
            del _SOURCES[oldest]
            linecache.cache.pop(oldest, None)
        lines = _Lines()
    _SOURCES[shown] = lines  # now the newest
    if not _SOURCES_SHOWN:
        _show_sources()
    if len(lines.held) >= 1000 and lineno not in lines.held:
        lines.held.clear()
    lines.held[lineno] = source.strip() + "\n"
    linecache.cache[shown] = (0, None, lines, shown)


_SOURCES_SHOWN: list[bool] = []


def _show_sources() -> None:
    """Before 3.13 the interpreter's own hook prints a traceback in C, reading each line
    from the file named (never linecache): while it is the hook in place, the same
    printing through ``traceback`` takes its place, so remote lines show there too."""
    import sys

    _SOURCES_SHOWN.append(True)
    if sys.version_info < (3, 13) and sys.excepthook is sys.__excepthook__:
        sys.excepthook = _print_exception


def _print_exception(kind: Any, value: Any, tb: Any) -> None:
    import traceback

    traceback.print_exception(kind, value, tb)


class _Marker(Exception):
    """Raised by the statement that makes a remote frame."""
