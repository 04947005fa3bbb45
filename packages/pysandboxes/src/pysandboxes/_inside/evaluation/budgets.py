"""One run's budgets and the helpers the rewritten code calls.

The counters are the run's own (a ``Run`` per evaluation): iterations and ``while``
passes, the depth of calls, the deadline, and the size a result may reach. A budget
spent raises ``EvalInterrupted``, again at every later step if the code catches it, so
that the caller always gets it. Builtins that consume an iterable in C (``sum``,
``sorted``, ``list``...) are handed a metered iterator, so that ``sum(range(10**12))``
stops with the budget rather than run on in C.
"""

from __future__ import annotations

import _string  # pyright: ignore[reportMissingImports]
import builtins
import math
import re
import time
import types

from pysandboxes._policy.evaluation import FORMATTERS, FRAME_ATTRIBUTES, HIERARCHY_WALKS
from pysandboxes.errors import EvalInterrupted, RuleEvalPermissionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    from pysandboxes._policy.evaluation import EvalProfile

_monotonic = time.monotonic
#: Builtins that consume an iterable argument in C.
_CONSUMERS = frozenset(
    id(f)
    for f in (sum, sorted, list, tuple, set, frozenset, dict, min, max, any, all, bytes, bytearray)
)
_SPREADING = frozenset(id(f) for f in (map, filter, zip, enumerate, reversed))
#: Builtins that call what they are handed: a type handed to them is a call too.
_HIGHER_ORDER = frozenset(id(f) for f in (map, filter, sorted, min, max, iter))
#: Builtin methods that consume an iterable argument in C (dicts are taken as mappings).
_CONSUMING_METHODS = frozenset(
    {"fromkeys", "extend", "update", "union", "intersection", "difference", "issubset"}
    | {"symmetric_difference", "issuperset", "isdisjoint", "writelines"}
)
#: Callables of C: handed to a builtin (map, sorted's key...), C calls them past the
#: checks of ``call``; they are handed over wrapped, so that each call is checked.
_BUILTIN_CALLABLES = (
    types.BuiltinFunctionType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.MethodWrapperType,
    types.ClassMethodDescriptorType,
)
_ATTRIBUTE_READERS = frozenset(id(f) for f in (getattr, hasattr, setattr, delattr))
_UNBOUND_FORMATTERS = frozenset({id(str.format), id(str.format_map)})
#: Computed in C in one go: their result's size is estimated from the arguments first.
_SIZED = {id(math.factorial): "factorial", id(math.comb): "comb", id(math.perm): "perm"}
_SIZED[id(builtins.format)] = "format"
_WIDENING = frozenset({"ljust", "rjust", "center", "zfill", "expandtabs"})
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\d+|\*)?(?:\.(\d+|\*))?")
_formatter_parser: Callable[[str], Iterator[tuple[str, str | None, str | None, str | None]]]
_formatter_parser = _string.formatter_parser  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]


class _Metered:
    __slots__ = ("_it", "_run")

    def __init__(self, run: Run, iterable: Any) -> None:
        self._run = run
        self._it: Iterator[object] = iter(iterable)

    def __iter__(self) -> _Metered:
        return self

    def __next__(self) -> object:
        self._run.tick()
        return next(self._it)


class Run:
    """The budgets of one evaluation, and the helpers its code calls."""

    __slots__ = ("attribute_ok", "deadline", "depth", "profile", "spent", "spent_at", "steps")

    def __init__(self, profile: EvalProfile, attribute_ok: Callable[[str], bool]) -> None:
        self.profile = profile
        self.steps = 0
        self.depth = 0
        self.spent: str | None = None
        self.spent_at = ""
        self.deadline = _monotonic() + profile.timeout
        self.attribute_ok = attribute_ok

    def helpers(self) -> dict[str, object]:
        """The names the rewritten code calls."""
        return {
            "__sb_call": self.call,
            "__sb_iter": self.iterate,
            "__sb_items": self.items,
            "__sb_tick": self.tick,
            "__sb_binop": self.binop,
            "__sb_format": self.format,
        }

    def stop(self, key: str, value: object) -> EvalInterrupted:
        self.spent = f"{self.profile.key(key)}={value}"
        self.spent_at = self.profile.where(key)
        return self.interrupted()

    def interrupted(self) -> EvalInterrupted:
        """The spent budget's error, raised again at every later step."""
        return EvalInterrupted(self.spent or "", where=self.spent_at)

    def tick(self) -> None:
        steps = self.steps = self.steps + 1
        if self.spent is not None:
            raise self.interrupted()
        if steps > self.profile.max_iterations:
            raise self.stop("max-iterations", self.profile.max_iterations)
        if not steps & 255 and _monotonic() > self.deadline:
            raise self.stop("timeout", f"{self.profile.timeout:g}s")

    def iterate(self, iterable: object) -> _Metered:
        return _Metered(self, iterable)

    def items(self, iterable: object) -> Iterator[_Metered]:
        """``iterable`` metered, each item metered too (it is unpacked by a starred target)."""
        return (_Metered(self, item) for item in _Metered(self, iterable))

    def call(self, function: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.tick()
        if _monotonic() > self.deadline:
            raise self.stop("timeout", f"{self.profile.timeout:g}s")
        key = id(function)
        if args or kwargs:
            args, kwargs = self._handed(key in _HIGHER_ORDER, args, kwargs)
        if key in _CONSUMERS or key in _SPREADING:
            args = self._consumed(function, args)
        elif key in _ATTRIBUTE_READERS and len(args) > 1:
            self._attribute(args[1])
        elif key in _UNBOUND_FORMATTERS and args and type(args[0]) is str:
            self._fields(args[0])
        elif key == id(pow) and len(args) == 2:
            self._size("**", args[0], args[1])
        elif key in _SIZED and args:
            self._sized(_SIZED[key], args)
        elif type(getattr(function, "__self__", None)) in (str, bytes):
            args = self._method(function, args)
        elif type(function) is types.BuiltinMethodType and function.__name__ in _CONSUMING_METHODS:
            args = self._metered(args, (dict, str, bytes))
        if self.depth >= self.profile.max_call_depth:
            raise self.stop("max-call-depth", self.profile.max_call_depth)
        self.depth += 1
        try:
            return function(*args, **kwargs)
        finally:
            self.depth -= 1

    def _handed(
        self, types_too: bool, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments, C's callables among them wrapped so that each call is checked."""

        def wrapped(value: Any) -> Any:
            if isinstance(value, _BUILTIN_CALLABLES) or (types_too and type(value) is type):

                def checked(*a: Any, **k: Any) -> Any:
                    return self.call(value, *a, **k)

                return checked
            return value

        return tuple(map(wrapped, args)), {k: wrapped(v) for k, v in kwargs.items()}

    def _fields(self, template: str) -> None:
        for _, field, _, _ in _formatter_parser(template):
            if field and ("." in field or "[" in field):
                raise RuleEvalPermissionError(
                    f"the format field {{{field}}} reads attributes or items of its "
                    "argument: refused by the eval guard, no rule allows it"
                )

    def _consumed(self, function: object, args: tuple[Any, ...]) -> tuple[Any, ...]:
        if (function is bytes or function is bytearray) and args and type(args[0]) is int:
            self._check(args[0], f"{function.__name__}({args[0]})")  # type: ignore[attr-defined]
            return args
        if function in (min, max) and len(args) != 1:
            return args
        if function is map or function is filter:
            return (args[0], *(_Metered(self, a) for a in args[1:])) if args else args
        return self._metered(args, (str, bytes, int, float, dict))

    def _metered(self, args: tuple[Any, ...], kept: tuple[type, ...]) -> tuple[Any, ...]:
        """``args``, each iterable one (not of ``kept``, not callable) metered."""
        found: list[Any] = []
        for value in args:
            found.append(
                value if isinstance(value, kept) or callable(value) else _Metered(self, value)
            )
        return tuple(found)

    def _sized(self, name: str, args: tuple[Any, ...]) -> None:
        if name == "format":
            spec = args[1] if len(args) > 1 else ""
            for width in re.findall(r"\d+", spec if type(spec) is str else ""):
                self._check(int(width), f"a format width of {width}")
            return
        n = args[0]
        if type(n) is int and n > 1:
            # n! and the binomials below it have about n * log2(n) bits.
            self._check(int(n * math.log2(n)) // 8, f"{name}({n}, ...)")

    def _attribute(self, name: object) -> None:
        if type(name) is not str or not self.attribute_ok(name):
            raise RuleEvalPermissionError(
                f"attribute {name!r} is refused by the eval guard ({self.profile.label}): "
                f"add '{self.profile.key('attribute')}={name}' to allow it"
                if type(name) is str and name not in FRAME_ATTRIBUTES | HIERARCHY_WALKS
                else f"attribute {name!r} is refused by the eval guard: no rule allows it"
            )

    def _method(self, method: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
        name = getattr(method, "__name__", "")
        if name in FORMATTERS and type(method.__self__) is str:
            self._fields(method.__self__)
        elif name in _WIDENING and args and type(args[0]) is int:
            self._check(args[0], f"{name}({args[0]})")
        elif name == "replace" and len(args) > 1 and type(args[1]) is type(method.__self__):
            text, old, new = method.__self__, args[0], args[1]
            if type(old) is type(text) and len(new) > len(old):
                count = text.count(old) if old else len(text) + 1
                self._check(len(text) + count * (len(new) - len(old)), "replace")
        elif name == "join" and args:
            parts = list(_Metered(self, args[0]))
            total = sum(len(a) for a in parts if isinstance(a, (str, bytes)))
            self._check(total + len(method.__self__) * len(parts), "join")
            return (parts, *args[1:])
        return args

    def _check(self, size: int, what: str) -> None:
        limit = self.profile.max_alloc
        if size > limit:
            raise RuleEvalPermissionError(
                f"{what} would allocate about {size} bytes, more than "
                f"{self.profile.key('max-alloc')}={limit}: refused by the eval guard before "
                f"it is computed. Add '{self.profile.key('max-alloc')}={-(-size // 10**6)}MB' "
                "to the rule file to allow it."
            )

    def _size(self, symbol: str, left: Any, right: Any) -> None:
        if symbol == "**" and type(left) in (int, bool) and type(right) in (int, bool):
            if right > 0 and abs(left) > 1:
                self._check(left.bit_length() * right // 8, f"{left} ** {right}")
        elif symbol == "<<" and type(left) in (int, bool) and type(right) is int:
            self._check(right // 8, f"{left} << {right}")
        elif symbol == "*":
            pairs: tuple[tuple[Any, Any], ...] = ((left, right), (right, left))
            for seq, n in pairs:
                if type(seq) in (str, bytes, list, tuple, bytearray) and type(n) is int:
                    each = 8 if type(seq) in (list, tuple) else 1
                    length: int = len(seq)
                    self._check(length * n * each, f"a sequence of {length} repeated {n} times")
        elif symbol == "%" and type(left) is str:
            self._percent(left, right)
        elif symbol == "%" and type(left) is bytes:
            self._percent(bytes.decode(left, "latin-1"), right)

    def _percent(self, template: str, values: Any) -> None:
        given: tuple[Any, ...] = (values,)
        if type(values) is tuple:
            given = values  # pyright: ignore[reportUnknownVariableType]
        stars: list[int] = [v for v in given if type(v) is int]
        for match in _PERCENT.finditer(template):
            for width in match.groups():
                if width == "*":
                    for value in stars:
                        self._check(abs(value), f"a '%*' padding of {value}")
                elif width:
                    self._check(int(width), f"a '%' padding of {width}")

    def binop(self, symbol: str, left: Any, right: Any) -> Any:
        self._size(symbol, left, right)
        if symbol == "**":
            return left**right
        if symbol == "*":
            return left * right
        if symbol == "<<":
            return left << right
        return left % right

    def format(self, value: Any, conversion: int, spec: str) -> str:
        if conversion == 115:
            value = str(value)
        elif conversion == 114:
            value = repr(value)
        elif conversion == 97:
            value = ascii(value)
        for width in re.findall(r"\d+", spec):
            self._check(int(width), f"a format width of {width}")
        return builtins.format(value, spec)
