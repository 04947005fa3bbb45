"""Exceptions of sandboxed calls, rebuilt in the caller from their description.

The description (``_wire.replies``, decoded by ``_wire.codec``) holds values only. A
built-in exception or a Py-Sandboxes refusal is rebuilt as itself; any other class
becomes a ``RemoteError`` subclass of the same name that also inherits the nearest
built-in base, so ``except ValueError`` and ``except SandBoxError`` both work. No class
of the child's choosing is imported or run. ``SystemExit``, ``KeyboardInterrupt`` and
``GeneratorExit`` raised in the child never end the caller: they arrive as
``RemoteError`` subclasses of ``Exception``.

The remote traceback is made of real traceback entries, one per remote frame, so it
prints as if the call had been local. A frame keeps its file name only when that file
is the source of a module the caller has loaded itself: any other name is shown in
angle brackets, so that printing the traceback never reads a file of the caller's that
the child named (it could be a key, shown to whoever reads the error).
"""

from __future__ import annotations

import builtins
import itertools
import sys

from pysandboxes import errors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Any

#: Built-in exceptions that would end or interrupt the caller: never raised as themselves.
_NOT_REBUILT = frozenset({"SystemExit", "KeyboardInterrupt", "GeneratorExit"})
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


def rebuild(description: object, depth: int = 0) -> BaseException:
    """The exception a description stands for, with its traceback, chain and group."""
    if type(description) is not dict:
        return errors.RemoteError("the sandbox sent an exception that is not described")
    found: dict[str, Any] = description  # type: ignore[assignment]
    exc = _instance(found)
    notes = [n for n in found.get("notes", ()) if type(n) is str]
    for note in notes:
        exc.add_note(note)
    frames = found.get("frames", ())
    exc.__traceback__ = _traceback(frames if type(frames) is list else [])  # type: ignore[arg-type]
    if depth < 64:
        cause, context = found.get("cause"), found.get("context")
        if cause is not None:
            exc.__cause__ = rebuild(cause, depth + 1)
        if context is not None:
            exc.__context__ = rebuild(context, depth + 1)
    exc.__suppress_context__ = found.get("suppress_context") is True
    return exc


def _instance(found: dict[str, Any]) -> BaseException:
    module, qualname = str(found.get("module", "")), str(found.get("qualname", "Exception"))
    sent: Any = found.get("args", ())
    args: tuple[object, ...] = sent if type(sent) is tuple else ()  # pyright: ignore[reportUnknownVariableType]
    members = found.get("members")
    if type(members) is list and members:
        group_members: list[Any] = [rebuild(m) for m in members]  # type: ignore[union-attr]
        message = str(found.get("message", ""))
        if all(isinstance(m, Exception) for m in group_members):
            return ExceptionGroup(message, group_members)
        return BaseExceptionGroup(message, group_members)
    if module == "builtins" and qualname not in _NOT_REBUILT:
        kind = getattr(builtins, qualname, None)
        if isinstance(kind, type) and issubclass(kind, BaseException):
            try:
                return kind(*args)
            except Exception:  # an argument the constructor refuses: keep the class
                made = kind.__new__(kind)
                made.args = args
                return made
    refusal = found.get("refusal")
    if module == "pysandboxes.errors" and qualname in _REFUSALS and type(refusal) is tuple:
        message, fields = refusal  # type: ignore[misc]
        kind = getattr(errors, qualname)
        try:
            return kind(str(message), **dict(fields))  # type: ignore[arg-type]
        except TypeError:
            pass  # fields of another version: the remote form below keeps the message
    return _remote(module, qualname, found, args)


def _remote(
    module: str, qualname: str, found: dict[str, Any], args: tuple[object, ...]
) -> Exception:
    bases = [b for b in found.get("bases", ()) if type(b) is str and b not in _NOT_REBUILT]
    builtin_base: type[BaseException] = Exception
    for name in bases:
        candidate = getattr(builtins, name, None)
        if isinstance(candidate, type) and issubclass(candidate, Exception):
            builtin_base = candidate
            break
    key = (module, qualname, builtin_base.__name__)
    kind = _remote_classes.get(key)
    if kind is None:
        name = qualname.rpartition(".")[2] or "RemoteError"
        namespace = {"__module__": module, "__qualname__": qualname, "__str__": _remote_str}
        try:
            made = type(name, (errors.RemoteError, builtin_base), namespace)
        except TypeError:  # a base whose layout cannot be combined
            made = type(name, (errors.RemoteError,), namespace)
        kind = _remote_classes[key] = made
    exc: Any = kind.__new__(kind)  # OSError and its kin refuse Exception.__new__
    exc.args = args
    exc.remote_class = f"{module}.{qualname}"
    exc.remote_args = args
    exc.remote_text = str(found.get("text", ""))
    attributes: Any = found.get("attributes")
    if type(attributes) is dict:
        pairs: list[tuple[object, object]] = list(attributes.items())  # pyright: ignore[reportUnknownArgumentType]
        for attribute, value in pairs:
            if type(attribute) is str and not attribute.startswith("_"):
                try:
                    setattr(exc, attribute, value)
                except (AttributeError, TypeError):
                    continue
    return exc


def _remote_str(self: Any) -> str:
    return str(getattr(self, "remote_text", "") or ", ".join(map(str, self.args)))


def _known_files() -> frozenset[str]:
    return frozenset(
        path
        for module in list(sys.modules.values())
        if type(path := getattr(module, "__file__", None)) is str
    )


def _traceback(frames: list[object]) -> TracebackType | None:
    known = _known_files()
    entries: list[TracebackType] = []
    for row in frames[:500]:
        if type(row) is not tuple:
            continue
        fields: tuple[object, ...] = row  # type: ignore[assignment]
        if len(fields) != 4:
            continue
        filename, lineno, name, _ = fields
        if type(filename) is not str or type(lineno) is not int or type(name) is not str:
            continue
        entry = _entry(filename if filename in known else f"<sandbox: {filename}>", lineno, name)
        if entry is not None:
            entries.append(entry)
    for outer, inner in itertools.pairwise(entries):
        outer.tb_next = inner
    return entries[0] if entries else None


def _entry(filename: str, lineno: int, name: str) -> TracebackType | None:
    """One traceback entry that reads ``filename``, ``lineno``, ``name``: the frame of a
    fixed statement, compiled here (nothing the child sent is run, only named)."""
    if "\0" in filename or "\0" in name or not 0 < lineno < 1 << 24:
        return None
    try:
        code = compile("raise _e", filename, "exec", dont_inherit=True)
        code = code.replace(co_name=name, co_qualname=name, co_firstlineno=lineno)
        exec(code, {"_e": _Marker(), "__builtins__": {}})
    except _Marker as marker:
        tb = marker.__traceback__
        return tb.tb_next if tb is not None else None
    except Exception:
        return None
    return None


class _Marker(Exception):
    """Raised by the statement that makes a remote frame."""
