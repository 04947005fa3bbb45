"""Permission prompts, the trusted side: judge a request, ask, and perform what was allowed.

The sandboxed side's ``Asking`` enforcer sends a request for each refusal someone may
allow (``_wire.asks``). ``Broker`` reads them on a thread of its own, one at a time, and
for each:

1. decodes it with ``_wire.codec`` alone, and refuses unasked what is malformed, what
   comes while no call of the sandbox runs (partial mode), a file that is not a plain
   absolute path outside ``/proc``, ``/sys`` and ``/dev``, a write to a rule file, flags
   that do not match the operation asked about, and every request of a kind denied
   ``MAX_DENIALS`` times already (said once on stderr);
2. asks a ``Decider`` (partial mode: the application's ``on_request`` callback; complete
   mode will ask on the terminal), unless the same resource was allowed for the run;
3. performs what was allowed: opens the file itself, following no symbolic link on the
   way (a component at a time, ``O_NOFOLLOW``), refusing anything but a regular file,
   or connects the socket, and hands the descriptor over (``SCM_RIGHTS``). An import or
   a sensitive call needs nothing here: it goes on at the Python level only;
4. for ``ALWAYS``, writes the rule learning would write, through the learned-rule writer
   (a ``.old`` backup kept), with the provenance ``allowed at a prompt, <date>``;
5. sends the decision to the decision log, when the run keeps one.

Nothing the child sends runs here, names a class, or outlives its request.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import inspect
import os
import socket
import stat
import sys
import threading

from pysandboxes._policy.prompts import Decision, PermissionRequest
from pysandboxes._wire.asks import MAX_ASK, Answer, encode_answer

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Awaitable, Callable
    from typing import Protocol

    from pysandboxes._host.auditlog import LogWriter
    from pysandboxes._wire.asks import Ask
    from pysandboxes._wire.spec import LaunchSpec

    class Decider(Protocol):
        """Answers a permission request: the application's callback, or a person."""

        def decide(self, request: PermissionRequest, call: int) -> Decision:
            """The answer to ``request``, asked by ``call`` (0 in complete mode)."""
            ...


#: Denials of one kind after which the rest of the run's requests of it are denied unasked.
MAX_DENIALS = 5
#: Requests of one run answered at all; the ones after are denied unasked.
MAX_ASKS = 10_000
#: How long the trusted side tries to connect for the sandbox.
CONNECT_TIMEOUT = 10.0
_OPEN_FLAGS = os.O_ACCMODE | os.O_CREAT | os.O_EXCL | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC
_NOT_OPENED_HERE = ("/proc", "/sys", "/dev")
_OPERATIONS = {"net": "connect", "import": "import"}


class Broker:
    """Serves one sandbox's permission requests (see module docs)."""

    def __init__(
        self,
        sock: socket.socket,
        spec: LaunchSpec,
        decider: Decider,
        in_flight: Callable[[int], bool],
        log: LogWriter | None = None,
    ) -> None:
        self._sock = sock
        self._spec = spec
        self._decider = decider
        self._in_flight = in_flight
        self._log = log
        self._allowed: set[tuple[str, str, str]] = set()  # RUN and ALWAYS, for this run
        self._denials: dict[str, int] = {}
        self._asked = 0
        self._thread = threading.Thread(target=self._serve, name="pysandboxes-prompts")
        self._thread.daemon = True

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._thread.join(2.0)
        self._sock.close()

    def _serve(self) -> None:
        while True:
            try:
                # One more byte than a request may have, and no room for descriptors:
                # a longer message is cut (MSG_TRUNC), passed descriptors are closed by
                # the kernel (MSG_CTRUNC). Either is refused.
                data, _, flags, _ = self._sock.recvmsg(MAX_ASK + 1, 0)
            except OSError:
                return
            if not data and not flags:
                return  # the child closed its end
            answer, fd = Answer("deny", "the request was malformed"), None
            if not flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC) and len(data) <= MAX_ASK:
                answer, fd = self.handle(data)
            rights = []
            if fd is not None:
                rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fd.to_bytes(4, "little"))]
            try:
                self._sock.sendmsg([encode_answer(answer)], rights)
            except OSError:
                return
            finally:
                if fd is not None:
                    os.close(fd)

    def handle(self, data: bytes) -> tuple[Answer, int | None]:
        """The answer to one request, and the descriptor to hand over with it."""
        from pysandboxes._wire.codec import decode_ask

        ask = decode_ask(data)
        if ask is None:
            return Answer("deny", "the request was malformed"), None
        why = self._unaskable(ask)
        if why:
            return Answer("deny", why), None
        self._asked += 1
        request = self._request(ask)
        key = (ask.kind, ask.resource, ask.operation)
        if key in self._allowed:
            decision = Decision.RUN
        else:
            decision = self._decide(request, ask.call)
        if decision is Decision.ALWAYS and request.secret:
            _say(f"{request.resource} holds a secret: ALWAYS is not offered for it; denied")
            decision = Decision.DENY
        fd = None
        if decision is not Decision.DENY:
            try:
                fd = self._perform(ask)
            except OSError as exc:
                self._record(ask, Decision.DENY, request.rule)
                return Answer("deny", f"the trusted side could not do it: {exc}"), None
        if decision is Decision.ALWAYS and not self._write_rule(request.rule, ask):
            decision = Decision.RUN
        self._record(ask, decision, request.rule)
        if decision is Decision.DENY:
            count = self._denials[ask.kind] = self._denials.get(ask.kind, 0) + 1
            if count == MAX_DENIALS:
                _say(
                    f"{MAX_DENIALS} requests of kind '{ask.kind}' were denied: the rest of "
                    "this sandbox's are denied without asking"
                )
            return Answer("deny"), None
        if decision is not Decision.ONCE:
            self._allowed.add(key)
        return Answer(decision.value), fd

    def _unaskable(self, ask: Ask) -> str:
        """Why a request is refused unasked, or ``""``."""
        if self._asked >= MAX_ASKS:
            return f"more than {MAX_ASKS} requests: the rest are denied without asking"
        if self._denials.get(ask.kind, 0) >= MAX_DENIALS:
            return f"{MAX_DENIALS} requests of this kind were denied: the rest are too"
        if not self._in_flight(ask.call):
            return "no call of the sandbox is running"
        if ask.kind == "file":
            return _unopenable(ask, self._spec.protected)
        return ""

    def _request(self, ask: Ask) -> PermissionRequest:
        from pysandboxes._host.learning.places import secret_variable
        from pysandboxes._policy.secrets import secret_path

        secret = ask.kind == "file" and secret_path(ask.resource, [os.path.expanduser("~")])
        secret = secret or (ask.kind == "env" and secret_variable(ask.resource))
        resource = f"{ask.resource}:{ask.port}" if ask.kind == "net" else ask.resource
        operation = _OPERATIONS.get(ask.kind, ask.operation)
        rules = self._rules(ask)
        rule = rules[0].line if rules else ""
        where = "".join(c if c.isprintable() else "?" for c in ask.where[:200])
        return PermissionRequest(ask.kind, resource, operation, where, rule, secret)

    def _decide(self, request: PermissionRequest, call: int) -> Decision:
        try:
            decision = self._decider.decide(request, call)
        except Exception as exc:  # the application's code: its failure denies
            _say(f"the answer to '{request}' failed ({exc!r}): denied")
            return Decision.DENY
        if not isinstance(decision, Decision):  # pyright: ignore[reportUnnecessaryIsInstance]
            _say(f"the answer to '{request}' was {decision!r}, not a Decision: denied")
            return Decision.DENY
        return decision

    def _perform(self, ask: Ask) -> int | None:
        if ask.kind == "file":
            return open_without_links(ask.resource, ask.flags)
        if ask.kind == "net":
            return _connect(ask.resource, ask.port)
        return None

    # -- ALWAYS: the rule file ------------------------------------------------------------

    def _rules(self, ask: Ask) -> list[LearnedRule]:
        from pysandboxes._host.learning.places import Context
        from pysandboxes._host.learning.plan import make_plan
        from pysandboxes._host.learning.rules import learn
        from pysandboxes._wire.events import Event

        spec = self._spec
        plan = make_plan(-1, self.rule_path(), os.getcwd(), os.environ, [], "")
        context = Context(
            spec.rule_dir,
            plan.cwd,
            plan.home,
            plan.variables,
            frozenset(plan.host_names),
            frozenset(spec.protected) | {plan.output},
        )
        if ask.kind == "net":
            event = Event("net", ask.resource, "OUT", "tcp", ask.port)
        elif ask.kind == "file":
            event = Event("file", ask.resource, ask.operation)
        else:
            event = Event(ask.kind, ask.resource, ask.operation)
        return list(learn([event], context).rules)

    def rule_path(self) -> str:
        """The rule file ``ALWAYS`` writes to: the one the rules were read from."""
        return os.path.join(self._spec.rule_dir, os.path.basename(self._spec.rule_file))

    def _write_rule(self, line: str, ask: Ask) -> bool:
        """Write the rule for ``ask``; ``False`` (allowed for the run only) if none can be."""
        from datetime import datetime
        from pathlib import Path

        from pysandboxes._policy.writer import LearnedRule, write_pyproject, write_rule_file

        path = Path(self.rule_path())
        if not line or not path.is_file():
            _say(f"no rule file to write '{line}' to: allowed for this run only")
            return False
        now = datetime.now()
        note = f"allowed at a prompt, {now:%Y-%m-%d}"
        rules = [LearnedRule(r.block, r.line, note, r.group) for r in self._rules(ask)]
        try:
            if path.name == "pyproject.toml":
                write_pyproject(path, rules, now=now)
            else:
                write_rule_file(path, rules, now=now)
        except (OSError, ValueError) as exc:
            _say(f"'{line}' could not be written to {path} ({exc}): allowed for this run only")
            return False
        return True

    def _record(self, ask: Ask, decision: Decision, rule: str) -> None:
        if self._log is None:
            return
        from pysandboxes._wire.decisions import Decision as Logged

        target = f"tcp:{ask.resource}:{ask.port}" if ask.kind == "net" else ask.resource
        text = f"answered {decision.name} at a prompt"
        allowed = decision is not Decision.DENY
        fix = "" if allowed else rule
        entry = Logged(ask.kind, target, ask.operation, allowed, "prompt", text, ask.where, fix=fix)
        self._log.write([entry])


if TYPE_CHECKING:
    from pysandboxes._policy.writer import LearnedRule


def _say(message: str) -> None:
    print(f"pysandboxes: {message}", file=sys.stderr)


def _unopenable(ask: Ask, protected: tuple[str, ...]) -> str:
    path, flags = ask.resource, ask.flags
    if not path.startswith("/") or os.path.normpath(path) != path or path.startswith("//"):
        return "only a plain absolute path is opened for the sandbox"
    if any(path == top or path.startswith(top + "/") for top in _NOT_OPENED_HERE):
        return "files of /proc, /sys and /dev are never opened for the sandbox"
    if flags & ~_OPEN_FLAGS:
        return "only plain open flags are honoured for the sandbox"
    mode = flags & os.O_ACCMODE
    reading = ask.operation == "read"
    if reading != (mode == os.O_RDONLY) or (reading and flags & (os.O_CREAT | os.O_TRUNC)):
        return "the open flags do not match the operation asked about"
    if ask.operation == "write" and flags & os.O_EXCL:
        return "the open flags do not match the operation asked about"
    if not reading and (path in protected or os.path.basename(path) == ".py-sandboxes"):
        return "a rule file is never written for the sandbox"
    return ""


def open_without_links(path: str, flags: int) -> int:
    """Open ``path`` (absolute, normalized) with no symbolic link on the way: each
    directory opened ``O_PATH | O_NOFOLLOW`` from the last, the file ``O_NOFOLLOW`` and
    non-blocking (a FIFO must not hold this thread); anything but a regular file is
    refused. What a swap of a directory meanwhile can do is change the answer to
    "no", never reach a file by another name.

    Raises:
        OSError: refused (``ELOOP`` for a link, ``EACCES`` for not a regular file).
    """
    parts = path.strip("/").split("/")
    walk = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    directory = os.open("/", walk)
    try:
        for part in parts[:-1]:
            following = os.open(part, walk, dir_fd=directory)
            os.close(directory)
            directory = following
        last = os.O_NOFOLLOW | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(parts[-1], flags | last, 0o666, dir_fd=directory)
    finally:
        os.close(directory)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PermissionError(13, "not a regular file", path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _connect(host: str, port: int) -> int:
    """A TCP connection to ``host:port``, made here; its descriptor. Resolved, judged
    (the SSRF-safe defaults hold for a name) and connected at once: ``_host.egress``."""
    from pysandboxes._host.egress import connect_asked

    return connect_asked(host, port, CONNECT_TIMEOUT)


class CallbackDecider:
    """Partial mode's answers: the application's ``on_request(request) -> Decision``.

    The callback runs in this process, in the context (``contextvars``) of the call that
    asked, so that it knows whose request it is (an MCP tool's ``Context``, say); an
    async callback runs on the event loop of the call that asked, when that call was
    awaited, else on a loop of its own. It runs on a thread of its own, waited for at
    most ``timeout`` seconds: an exception or the timeout denies (said on stderr)."""

    def __init__(self, callback: Callable[[PermissionRequest], object], timeout: float) -> None:
        self._callback = callback
        self._timeout = timeout
        self._calls: dict[int, tuple[contextvars.Context, asyncio.AbstractEventLoop | None]] = {}

    def remember(self, call: int, awaited: bool) -> None:
        """A call is sent: keep its context (and its loop, when it is awaited)."""
        loop = None
        if awaited:
            import asyncio

            loop = asyncio.get_running_loop()
        self._calls[call] = (contextvars.copy_context(), loop)

    def forget(self, call: int) -> None:
        self._calls.pop(call, None)

    def decide(self, request: PermissionRequest, call: int) -> Decision:
        context, loop = self._calls.get(call, (contextvars.Context(), None))
        outcome: list[object] = []
        future: list[concurrent.futures.Future[object]] = []

        def work() -> None:
            try:
                answer = context.copy().run(self._callback, request)
                if inspect.isawaitable(answer):
                    import asyncio

                    if loop is not None and not loop.is_closed():
                        made = context.copy().run(
                            asyncio.run_coroutine_threadsafe, _awaited(answer), loop
                        )
                        future.append(made)
                        answer = made.result()
                    else:
                        answer = asyncio.run(_awaited(answer))
                outcome.append(answer)
            except BaseException as exc:  # reported, never raised in this thread
                outcome.append(exc)

        thread = threading.Thread(target=work, name="pysandboxes-on-request", daemon=True)
        thread.start()
        thread.join(self._timeout)
        if not outcome:
            for made in future:
                made.cancel()
            raise TimeoutError(f"on_request gave no answer in {self._timeout:g} s")
        answer = outcome[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer  # type: ignore[return-value]  # checked by the broker


async def _awaited(awaitable: Awaitable[object]) -> object:
    return await awaitable
