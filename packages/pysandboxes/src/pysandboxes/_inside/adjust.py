"""Standard modules adjusted when the program first imports them.

``tempfile`` gets the sandbox's private directory; ``traceback`` and ``threading`` leave
the guards' frames out of what they print; ``sqlite3.connect`` tells the file guard
exactly which files it opens; ``socket.socket.listen`` reports the bind it makes on
a socket never bound; an AF_UNIX socket or a semaphore the kernel layer refuses says
which rule would allow it. The wrappers act for their caller (learning charges what they
do to the code that called them). Nothing is imported ahead of the program.
"""

from __future__ import annotations

import errno
import os
import sys

# Bound now, not when first needed: the finder runs inside the program's imports, which
# would be charged for it (importlib.machinery is loaded at start-up anyway).
from importlib.machinery import PathFinder

from pysandboxes._inside.tracebacks import leave_out_own_frames, threads_print_without_own_frames
from pysandboxes.errors import RulePermissionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def adjust_on_import(
    tempdir: str | None, rule_file: str = ".py-sandboxes", *, python_layer: bool = True
) -> None:
    """Adjust standard modules when the program first imports them.

    ``tempfile`` gets the sandbox's private directory (``TMPDIR`` is not set: the
    program sees exactly the variables its rules produce). With the Python layer on
    (``python_layer``): ``traceback`` and ``threading`` print tracebacks without the
    guards' frames; ``sqlite3.connect`` converts a path object once, before its audit
    event, so the guard judges the path the database really opens;
    ``socket.socket.listen`` reports the bind it makes on a socket never bound; an AF_UNIX
    socket or a semaphore the kernel layer refuses says why. Nothing is imported ahead of
    the program.
    """

    def adjust_socket(module: object) -> None:
        _listen_reports_its_bind(module)
        _unix_sockets_explained(module, rule_file)

    adjustments: dict[str, Callable[[object], None]] = {}
    if python_layer:  # else the kernel's own refusals show, unexplained
        adjustments["traceback"] = leave_out_own_frames  # no guard frame in what it prints
        adjustments["threading"] = threads_print_without_own_frames
        adjustments["sqlite3"] = _convert_sqlite_paths
        adjustments["socket"] = adjust_socket
        adjustments["multiprocessing.synchronize"] = lambda module: _semaphores_explained(
            module, rule_file
        )
    if tempdir is not None:
        adjustments["tempfile"] = lambda module: setattr(module, "tempdir", tempdir)
    for name in [n for n in adjustments if n in sys.modules]:
        adjustments.pop(name)(sys.modules[name])
    if adjustments:
        sys.meta_path.insert(0, _AfterImport(adjustments))  # type: ignore[arg-type]


class _AfterImport:
    """A meta-path finder that lets the real finders work, then adjusts the module."""

    def __init__(self, adjustments: dict[str, Callable[[object], None]]) -> None:
        self._adjustments = adjustments

    def find_spec(self, name: str, path: object = None, target: object = None) -> object:
        # Asked without an import too (the import guard asks every finder whether a
        # module exists before refusing it, as when learning): the adjustment is used up
        # only once the module is really executed.
        adjustments = self._adjustments
        if name not in adjustments:
            return None
        spec = PathFinder.find_spec(name, path)  # type: ignore[arg-type]
        if spec is None or spec.loader is None:
            return spec
        original = spec.loader.exec_module  # type: ignore[union-attr]
        finder = self

        def exec_module(module: object) -> None:
            original(module)  # type: ignore[arg-type]
            adjust = adjustments.pop(name, None)
            if not adjustments and any(f is finder for f in list[object](sys.meta_path)):
                sys.meta_path.remove(finder)  # type: ignore[arg-type]
            if adjust is not None:
                adjust(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign, union-attr]
        return spec


def _listen_reports_its_bind(module: object) -> None:
    """``listen()`` on a socket never bound binds it to a free port on every address, in
    the kernel, with no audit event: report that bind, for the network guard to judge.
    (``_socket.socket.listen`` called directly is not seen: the kernel layer's part.)"""
    socket_module: Any = module
    kind: Any = socket_module.socket
    listen = socket_module._socket.socket.listen
    audit = sys.audit
    families = {socket_module.AF_INET: "0.0.0.0", socket_module.AF_INET6: "::"}

    def judged_listen(self: Any, *args: Any) -> None:
        anywhere = families.get(self.family)
        if anywhere is not None and self.getsockname()[1] == 0:
            audit("socket.bind", self, (anywhere, 0))
        listen(self, *args)

    judged_listen.__name__ = judged_listen.__qualname__ = "listen"
    judged_listen.__doc__ = listen.__doc__
    kind.listen = judged_listen


def _unix_sockets_explained(module: object, rule_file: str) -> None:
    """The kernel layer makes no AF_UNIX socket unless the rules may need one (see
    ``_kernel.seccomp``): its bare ``EPERM`` becomes a refusal that says so and how to allow
    it, still a ``PermissionError``."""
    socket_module: Any = module
    kind: Any = socket_module.socket
    unix = socket_module.AF_UNIX
    original = kind.__init__

    def __init__(self: Any, family: Any = -1, type: Any = -1, proto: Any = -1, fileno: Any = None):
        try:
            original(self, family, type, proto, fileno)
        except PermissionError as exc:
            if family != unix or fileno is not None or exc.errno != errno.EPERM:
                raise
            raise RulePermissionError(
                "Creating an AF_UNIX socket is refused by the kernel layer: it makes none "
                "unless a rule lets the program write where a socket file may live "
                "(connecting to one needs write access to it). Add 'expose-rw=<the "
                f"socket's directory>' to {rule_file} to allow it.",
                path="AF_UNIX",
            ) from None  # the bare EPERM's traceback would show this wrapper's frames

    __init__.__doc__ = original.__doc__
    kind.__init__ = __init__


def _semaphores_explained(module: object, rule_file: str) -> None:
    """POSIX semaphores (``multiprocessing``'s locks and queues) are files of
    ``/dev/shm`` that C creates unseen: the kernel layer's bare ``EACCES`` becomes a
    refusal naming the rule that allows them, still a ``PermissionError``."""
    synchronize: Any = module
    kind: Any = synchronize.SemLock
    original = kind.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            original(self, *args, **kwargs)
        except PermissionError as exc:
            if type(exc) is not PermissionError or exc.errno != errno.EACCES:
                raise
            raise RulePermissionError(
                "Creating a semaphore (a multiprocessing lock, queue or pool) is refused "
                "by the kernel layer: POSIX semaphores live in /dev/shm, which no rule "
                f"exposes. Add 'expose-rw=/dev/shm' to {rule_file} to allow it.",
                path="/dev/shm",
            ) from None
        # Made in C, unseen by the file guard: reported as the file of /dev/shm it was
        # (glibc names it sem.<name>), so that learning grants /dev/shm (see the rules).
        sys.audit("pysandboxes.shm", "_multiprocessing.SemLock", "sem.mp", os.O_CREAT)

    __init__.__doc__ = original.__doc__
    kind.__init__ = __init__


def _convert_sqlite_paths(module: object) -> None:
    """Make ``sqlite3`` tell the guard exactly which files it opens.

    A path object is converted once, before the audit event; a plain name that merely
    starts with ``file:`` (``uri=False``) is made absolute, so that the event's ``file:``
    always means a URI; and each connection gets an authorizer that reports the files
    ``ATTACH`` and ``VACUUM INTO`` would open, which sqlite opens without any event.
    """
    original: Callable[..., object] = getattr(module, "connect")  # noqa: B009
    base: type = getattr(module, "Connection")  # noqa: B009
    attach = int(getattr(module, "SQLITE_ATTACH", 24))
    allowed = int(getattr(module, "SQLITE_OK", 0))
    audit = sys.audit

    def authorize(action: int, first: object, *rest: object) -> int:
        if action == attach:
            if not isinstance(first, str):
                # A name from a bound parameter or an expression is unknown here: sqlite
                # then answers "not authorized".
                raise PermissionError("ATTACH of a file named by a parameter is refused")
            if first not in ("", ":memory:"):
                audit("sqlite3.connect", first)  # judged as opening that file; raises if not
        return allowed

    guarded_classes: dict[type, type] = {}

    def guarded(factory: type) -> type:
        known = guarded_classes.get(factory)
        if known is None:

            def set_authorizer(self: object, callback: object) -> None:
                def both(action: int, *args: object) -> int:
                    authorize(action, *args)
                    if callback is None:
                        return allowed
                    return callback(action, *args)  # type: ignore[operator, no-any-return]

                base.set_authorizer(self, both)  # type: ignore[attr-defined]

            known = type(factory.__name__, (factory,), {"set_authorizer": set_authorizer})
            guarded_classes[factory] = known
        return known

    def connect(database: object, *args: object, **kwargs: object) -> object:
        converted: object = database
        if not isinstance(database, (str, bytes)):
            converted = os.fspath(database)  # type: ignore[arg-type]
        if isinstance(converted, str) and converted.startswith("file:") and not kwargs.get("uri"):
            converted = os.path.abspath(converted)
        factory = kwargs.get("factory", base)
        kwargs["factory"] = guarded(factory) if isinstance(factory, type) else factory
        connection = original(converted, *args, **kwargs)
        base.set_authorizer(connection, authorize)  # type: ignore[attr-defined]
        return connection

    connect.__doc__ = str(getattr(original, "__doc__", "") or "")
    setattr(module, "connect", connect)  # noqa: B010
    dbapi2 = sys.modules.get("sqlite3.dbapi2")
    if dbapi2 is not None and getattr(dbapi2, "connect", None) is original:
        setattr(dbapi2, "connect", connect)  # noqa: B010
