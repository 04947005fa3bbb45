"""``sandboxes()`` and ``run()``: partial mode's sandboxed child, for ``@sandbox`` calls.

``with sandboxes():`` (or ``async with``) starts one sandboxed child under the rules and
routes the ``@sandbox`` calls of its profile to it until the block ends. The application
keeps every right of its own; the functions get the rules' rights only. Several
``sandboxes()`` with different rules may be entered at once, one per ``profile``.
"""

from __future__ import annotations

import os
import time
from _thread import allocate_lock  # threading's Lock; threading itself costs every start

from pysandboxes._api.registry import module_files
from pysandboxes._mode import is_in_sandbox
from pysandboxes.errors import SandboxCrashed, SandBoxError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Mapping
    from types import TracebackType
    from typing import Any, Self, TextIO, TypeVar

    from pysandboxes._host.calls import Timeout
    from pysandboxes._host.deciders import CallbackDecider
    from pysandboxes._host.partial import Child
    from pysandboxes._policy.prompts import Decision, PermissionRequest

    T = TypeVar("T")

#: Default bound of a result (and of anything the child sends at once).
RESULT_LIMIT = 256 << 20
#: How long leaving sandboxes() waits for the calls in flight, by default.
_GRACE = 5.0
_INIT = 2  # frames.INIT, without importing the wire module before it is needed
_CALL = 1

_active: dict[str | None, list[sandboxes]] = {}
_lock = allocate_lock()


def active(profile: str | None, module: str, name: str) -> sandboxes:
    """The ``sandboxes()`` entered for ``profile`` that calls go to (the innermost)."""
    entered = _active.get(profile)
    if not entered:
        where = f"sandboxes(profile={profile!r})" if profile else "sandboxes()"
        profiles = sorted(repr(p) if p else "the default one" for p, e in _active.items() if e)
        now = f" Entered now: {', '.join(profiles)}." if profiles else ""
        raise SandBoxError(
            f"{module}.{name} is a @sandbox function, called outside any `with {where}:`: "
            f"it never runs unsandboxed. Enter {where} (or use pysandboxes.run()) first.{now}"
        )
    return entered[-1]


class sandboxes:
    """A sandboxed child that runs the ``@sandbox`` functions called while it is entered.

    Args:
        init_fn: a function (of an importable module) run in the child before the first
            call: logging, pools, anything the child needs; sync or async. If it raises,
            entering raises its exception at once.
        sandboxes_config: the rule file to use instead of the one discovery finds.
        envs: the environment ``${VAR}`` and ``env=`` rules read (default ``os.environ``).
        python_args: interpreter options for the child (``["-X", "dev"]``).
        learn: learn the rules the calls need into this file (``True``: the rule file in
            use), instead of enforcing them; the rules are written when the block ends.
        profile: the name ``@sandbox(profile=...)`` functions route to.
        workers: threads that run sync functions at once in the child.
        result_limit: the largest result (bytes) accepted from the child, and the most
            memory rebuilding one may take.
        graceful_shutdown: leaving waits this many seconds (``True``: 5) for the calls
            in flight before ending the child; ``False`` ends it at once.
        max_restarts: a crashed child is replaced at most this many times in any
            ``restart_window`` seconds; past that, calls fail at once.
        output: where a call's standard output is replayed when it returns:
            ``"stdout"`` (the caller's ``sys.stdout``), ``"stderr"``, or ``"auto"`` (the
            default): ``sys.stdout``, unless the application serves the MCP protocol on
            its standard output (the ``mcp`` SDK's stdio server is loaded), then
            ``sys.stderr``. Standard error always goes to ``sys.stderr``.
        on_request: asked, in this process, about each access the rules refuse that
            someone may allow (``pysandboxes.PermissionRequest``), instead of refusing
            it at once; returns a ``pysandboxes.Decision`` (sync or async). An allowed
            file or connection is opened here and handed over: the kernel wall does not
            widen. An exception, a timeout or anything but a ``Decision`` denies. Not
            while learning (nothing is refused). See docs/prompts.md.
        on_request_timeout: the most seconds ``on_request`` may take to answer.
        **extra_rules: more rules, ``_`` for ``-`` in keys: ``expose_ro="./data"``,
            ``os_sandbox="bwrap"``; a list repeats the key.
    """

    def __init__(
        self,
        init_fn: Callable[..., Any] | None = None,
        sandboxes_config: str | os.PathLike[str] | None = None,
        *,
        envs: Mapping[str, str] | None = None,
        python_args: Iterable[str] | None = None,
        learn: str | bool | None = None,
        profile: str | None = None,
        workers: int = 8,
        result_limit: int = RESULT_LIMIT,
        graceful_shutdown: bool | float = True,
        max_restarts: int = 5,
        restart_window: float = 60.0,
        output: str = "auto",
        on_request: Callable[[PermissionRequest], Decision | Awaitable[Decision]] | None = None,
        on_request_timeout: float = 300.0,
        **extra_rules: object,
    ) -> None:
        if output not in ("auto", "stdout", "stderr"):
            raise ValueError(
                f"sandboxes(output=...) takes 'auto', 'stdout' or 'stderr', not {output!r}"
            )
        self.output = output
        self.on_request = on_request
        self.on_request_timeout = on_request_timeout
        if profile is not None and not isinstance(profile, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"profile must be a name (str), not {type(profile).__name__}")
        self.init_fn = init_fn
        self.config = os.fspath(sandboxes_config) if sandboxes_config is not None else None
        self.envs = envs
        self.python_args = tuple(python_args or ())
        self.learn = "" if learn is True else (None if learn in (None, False) else str(learn))
        self.profile = profile
        self.workers = max(1, workers)
        self.result_limit = result_limit
        self.rules = tuple(_rule_lines(extra_rules))
        grace = graceful_shutdown
        self.grace = _GRACE if grace is True else 0.0 if grace is False else max(0.0, float(grace))
        self.restarts = Restarts(max_restarts, restart_window)
        self._child: Child | None = None
        self._late: set[str] = set()
        self._start_lock = allocate_lock()
        self._entered = False
        if init_fn is not None:
            _importable(init_fn, "init_fn")

    # -- entering and leaving ------------------------------------------------------------

    def __enter__(self) -> Self:
        if self._entered:
            raise SandBoxError("this sandboxes() is entered already")
        self._entered = True
        if not is_in_sandbox():  # under python-sb the calls run inline
            try:
                self._child = self._start()
            except BaseException:
                self._entered = False
                raise
        with _lock:
            _active.setdefault(self.profile, []).append(self)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        with _lock:
            entered = _active.get(self.profile, [])
            if self in entered:
                entered.remove(self)
        self._entered = False
        child, self._child = self._child, None
        if child is not None:
            child.close(self.grace)

    async def __aenter__(self) -> Self:
        import asyncio

        return await asyncio.get_running_loop().run_in_executor(None, self.__enter__)

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.__exit__, kind, value, traceback)

    # -- the child -----------------------------------------------------------------------

    def _start(self) -> Child:
        from pysandboxes._host.launchplan import LaunchRequest
        from pysandboxes._host.partial import Child
        from pysandboxes._wire.spec import Program

        request = LaunchRequest(
            Program("serve"),
            python_flags=self.python_args,
            config=self.config,
            extra_rules=self.rules,
            learn=self.learn,
            first_run=False,
        )
        child = Child(
            request,
            env=os.environ if self.envs is None else self.envs,
            modules=module_files(),
            workers=self.workers,
            result_limit=self.result_limit,
            grace=self.grace,
            output=self.output,
            prompts=self._prompts(),
        )
        if self.init_fn is not None:
            from pysandboxes._host.calls import wait

            init: Any = self.init_fn
            nothing: dict[str, object] = {}
            call: tuple[object, ...] = (str(init.__module__), str(init.__qualname__), (), nothing)
            done, outcome = wait(child, _INIT, call, self._decode)
            if not done:
                child.close(0.0)
                raise outcome  # init_fn's own exception, with its remote traceback
        return child

    def _prompts(self) -> CallbackDecider | None:
        """A child's answers to its permission requests (each child asks afresh)."""
        if self.on_request is None or self.learn is not None:
            return None
        from pysandboxes._host.deciders import CallbackDecider

        return CallbackDecider(self.on_request, self.on_request_timeout)

    def _running(self, module: str = "") -> Child:
        """The child, or a fresh one when the last ended (its calls failed, never rerun)
        or was retired; a crashed child is replaced within the restart budget only.

        A call of a module imported after the child started (``import tools`` inside
        the ``with``, a notebook's later cell) retires it too: its successor is started
        with that module as part of its program, as if it had been imported first."""
        child = self._child
        if child is not None and child.ended is None and child.retiring is None:
            if not module or module in child.modules or module in self._late:
                return child
            self._late.add(module)  # once: a module no child can be given stays as is
            child.retire(f"{module} was imported after the sandbox started")
        with self._start_lock:
            child = self._child
            if child is None or child.ended is not None or child.retiring is not None:
                if not self._entered:
                    raise SandBoxError("this sandboxes() is not entered")
                if child is not None and child.ended is not None and child.retiring is None:
                    self.restarts.spend(child.ended)  # SandboxCrashed past the budget
                self._child = None
                if child is not None and child.retiring is None:
                    child.close(0.0)
                child = self._child = self._start()
            return child

    def _decode(self, data: bytes, call: tuple[Any, ...]) -> Any:
        child = self._child
        policy = child.spec.policy if child is not None else None
        return _lazy().decode_result(data, policy, child, f"{call[0]}.{call[1]}")

    def _timeout(self, child: Child, given: float | None) -> Timeout | None:
        setting = child.spec.policy.sandbox_timeout
        if given is None and setting is None:
            return None
        from pysandboxes._host.calls import Timeout

        if given is not None:
            return Timeout(given, f"@sandbox(timeout={given:g})")
        assert setting is not None
        return Timeout(setting.value, f"'{setting.origin.text}' from {setting.origin.where}")

    def call(
        self,
        module: str,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        seconds: float | None = None,
    ) -> tuple[bool, Any]:
        """Run ``module.name(*args, **kwargs)`` in the child; what ``@sandbox`` calls,
        with its timeout (``seconds``; else the rules' ``sandbox-timeout=``).
        Returns ``(True, result)`` or ``(False, exception to raise)``."""
        if self._child is None and is_in_sandbox():
            raise SandBoxError("calls run inline in a sandboxed process")
        child = self._running(module)
        limit = self._timeout(child, seconds)
        return _lazy().wait(child, _CALL, (module, name, args, kwargs), self._decode, limit)

    async def acall(
        self,
        module: str,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        seconds: float | None = None,
        streams: tuple[TextIO, TextIO] | None = None,
        sync: bool = False,
    ) -> tuple[bool, Any]:
        """``call`` awaited on the caller's loop; cancelling the awaiting task cancels the
        call. ``streams``: where its output goes instead of ``sys.stdout``/``sys.stderr``;
        ``sync``: a sync function (it runs in the child's threads, and a call stopped
        there replaces the child at once)."""
        from pysandboxes._host.calls import await_call

        child = self._running(module)
        limit = self._timeout(child, seconds)
        call = (module, name, args, kwargs)
        return await await_call(child, _CALL, call, self._decode, limit, streams, sync)


class _Lazy:
    """What a call needs that ``import pysandboxes`` does not load (made at the first
    call, then found at once: an import statement costs a call a microsecond)."""

    def __init__(self) -> None:
        from pysandboxes._api.results import decode_result
        from pysandboxes._host.calls import wait

        self.wait = wait
        self.decode_result = decode_result


_made: list[_Lazy] = []


def _lazy() -> _Lazy:
    if not _made:
        _made.append(_Lazy())
    return _made[0]


def run(main: Awaitable[T], **options: Any) -> T:
    """``asyncio.run(main)`` inside ``async with sandboxes(**options):`` — the
    partial-mode counterpart of ``asyncio.run``; returns what ``main`` returns.

    Raises:
        ValueError: ``main`` is not a coroutine.
    """
    import asyncio

    if not asyncio.iscoroutine(main):
        raise ValueError(f"pysandboxes.run() takes a coroutine, not {type(main).__name__}")

    async def inside() -> T:
        try:
            async with sandboxes(**options):
                return await main
        finally:
            main.close()  # never started (the sandbox did not start): no warning of it

    return asyncio.run(inside())


def _rule_lines(extra_rules: Mapping[str, object]) -> Iterable[str]:
    for key, value in extra_rules.items():
        values: list[object] = (
            list(value) if isinstance(value, list | tuple | set) else [value]  # pyright: ignore[reportUnknownArgumentType]
        )
        for item in values:
            text = "true" if item is True else "false" if item is False else str(item)
            yield f"{key.replace('_', '-')}={text}"


def _importable(function: Callable[..., Any], what: str) -> None:
    module, name = getattr(function, "__module__", None), getattr(function, "__qualname__", "")
    if module in (None, "__main__") or "<" in str(name):
        raise TypeError(
            f"{what} must be a function at the top level of an importable module (the "
            f"sandbox finds it by name), not {module}.{name}"
        )


# A crashed child is replaced for the next call (its calls in flight failed, none is sent
# again), at most ``max_restarts`` times in any ``restart_window`` seconds: past that, a
# call fails at once instead of paying a start-up (and init_fn) per call for a child that
# will crash again.
class Restarts:
    """Times of the recent restarts; ``spend`` one or refuse."""

    def __init__(self, limit: int, window: float) -> None:
        self.limit = max(0, limit)
        self.window = max(0.0, window)
        self._times: list[float] = []
        self._lock = allocate_lock()

    def spend(self, crash: SandboxCrashed) -> None:
        """Count a restart after ``crash``.

        Raises:
            SandboxCrashed: the budget is spent; the message names it and the last crash.
        """
        now = time.monotonic()
        with self._lock:
            self._times = [t for t in self._times if now - t < self.window]
            if len(self._times) >= self.limit:
                wait = self.window - (now - self._times[0]) if self._times else self.window
                raise SandboxCrashed(
                    f"the sandboxed process crashed {len(self._times) + 1} times within "
                    f"{self.window:g} s (sandboxes(max_restarts={self.limit}, "
                    f"restart_window={self.window:g})): it is not started again for "
                    f"{wait:.0f} s, and calls fail at once until then. The last crash: {crash}",
                    exitcode=crash.exitcode,
                    signal=crash.signal,
                )
            self._times.append(now)
