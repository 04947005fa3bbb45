"""``@sandbox``: a function that runs in the sandboxed child of ``sandboxes()``.

The function is sent nothing but its module and qualified name: the child imports the
module and calls the function found there, which must be marked ``@sandbox`` itself. So
a function must live at the top level of an importable module (or in a class there):
one defined in ``__main__``, in another function or a lambda is refused here, at
decoration time, with a message saying where to move it. Under ``python-sb`` and in the
child the function runs inline: the whole process is sandboxed already.
"""

from __future__ import annotations

import functools

from pysandboxes._api.partial import active
from pysandboxes._api.registry import REGISTERED
from pysandboxes._mode import is_in_sandbox

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a start-up: the sandboxed interpreter binds this module
    from collections.abc import Callable
    from typing import Any, ParamSpec, TypeVar, overload

    P = ParamSpec("P")
    R = TypeVar("R")

_CO_GENERATOR = 0x20
_CO_COROUTINE = 0x80
_CO_ASYNC_GENERATOR = 0x200


if TYPE_CHECKING:

    @overload
    def sandbox(function: Callable[P, R], /) -> Callable[P, R]: ...

    @overload
    def sandbox(
        *, profile: str | None = None, timeout: float | None = None
    ) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def sandbox(
    function: Any = None, /, *, profile: str | None = None, timeout: float | None = None
) -> Any:
    """Run the decorated function in the sandboxed child of ``sandboxes()``.

    Use it bare (``@sandbox``) or with a profile (``@sandbox(profile="fetch")``), which
    routes calls to the ``sandboxes(profile="fetch")`` entered for it, so tools with
    different rights live side by side. The signature is kept for type checkers and
    ``help()``. Sync and async functions both work; calls from many threads or tasks
    overlap. Arguments travel by pickle; the result must be a value (see
    ``remote-result-mode``) and an exception comes back with its remote traceback.

    ``timeout`` (seconds) bounds each call, instead of the rules' ``sandbox-timeout=``:
    past it the call raises ``SandboxTimeout`` (a ``TimeoutError``) and is stopped in
    the child, the child replaced if the call cannot be interrupted.

    Raises:
        TypeError: the function cannot be found by name in the child (``__main__``, a
            nested function, a lambda) or is a generator.
        ValueError: ``timeout`` is not a positive number of seconds.
    """
    if timeout is not None and not timeout > 0:
        raise ValueError(f"@sandbox(timeout=...) takes a positive number of seconds, not {timeout}")
    if function is None:
        return functools.partial(_decorate, profile=profile, timeout=timeout)
    return _decorate(function, profile=profile, timeout=timeout)


def _decorate(
    function: Callable[..., Any], *, profile: str | None, timeout: float | None
) -> Callable[..., Any]:
    name = getattr(function, "__qualname__", None)
    module = getattr(function, "__module__", None)
    code = getattr(function, "__code__", None)
    if not isinstance(name, str) or not isinstance(module, str) or code is None:
        raise TypeError(f"@sandbox takes a function defined with def, not {function!r}")
    flags: int = code.co_flags
    if flags & (_CO_GENERATOR | _CO_ASYNC_GENERATOR):
        raise TypeError(
            f"@sandbox cannot run the generator {name}: a generator's values cannot cross "
            "to the caller one by one; return a list instead"
        )
    if "<locals>" in name or "<lambda>" in name:
        raise TypeError(
            f"@sandbox cannot run {module}.{name}: it is defined inside a function, and the "
            "sandbox finds functions by name; move it to the top level of its module"
        )
    if module == "__main__":
        raise TypeError(
            f"@sandbox cannot run {name}: it is defined in __main__, and the sandbox finds "
            "functions by module name; move it to a module of its own and import it"
        )
    REGISTERED.setdefault(module, set()).add(name)
    if flags & _CO_COROUTINE:

        @functools.wraps(function)
        async def call_async(*args: Any, **kwargs: Any) -> Any:
            if is_in_sandbox():
                return await function(*args, **kwargs)
            box = active(profile, module, name)
            done, outcome = await box.acall(module, name, args, kwargs, timeout)
            if done:
                return outcome
            remote = outcome.__traceback__
            try:
                raise outcome
            except BaseException as raised:
                raised.__traceback__ = remote  # the caller's frames, then the remote ones
                raise

        wrapper: Any = call_async
    else:

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            if is_in_sandbox():
                return function(*args, **kwargs)
            box = active(profile, module, name)
            done, outcome = box.call(module, name, args, kwargs, timeout)
            if done:
                return outcome
            remote = outcome.__traceback__
            try:
                raise outcome
            except BaseException as raised:
                raised.__traceback__ = remote  # the caller's frames, then the remote ones
                raise

        wrapper = call
    wrapper.__pysandboxes_sandbox__ = True
    # An async one: calling it only makes a coroutine (the child's reader may do it).
    wrapper.__pysandboxes_async__ = bool(flags & _CO_COROUTINE)
    wrapper.__pysandboxes_profile__ = profile
    wrapper.__pysandboxes_timeout__ = timeout
    return wrapper
