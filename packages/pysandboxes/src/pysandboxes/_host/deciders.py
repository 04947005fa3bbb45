"""Who answers a permission request (``_host.prompts.Decider``): the application's
callback in partial mode, the person at the terminal in complete mode.

``TtyDecider`` (``python-sb --prompt``, ``prompt=tty``) draws the question on the
terminal it opens itself (``/dev/tty``), never through the program's output, and reads
the answer there, only while its own question is pending:

1. the program is held first: every process of the sandbox is stopped (``SIGSTOP``,
   each waited for until the kernel shows it stopped), so none writes over the question,
   types into the terminal or reads the answer meanwhile;
2. the terminal is set to read one key, unechoed, with no signal keys (a ``^C`` is an
   answer: deny), the question is drawn, and the input typed before it is discarded
   (``tcflush``): what the program or the user typed ahead answers nothing;
3. one key answers: ``o`` once, ``r`` for this run, ``a`` always (not offered for a
   secret), ``d``, ``n``, Enter, Escape, ``^C`` or ``^D`` deny; other keys are ignored;
4. the terminal's settings are put back, and the program continued (``SIGCONT``).

What the sandbox names is shown with its control characters escaped: a path cannot
redraw the screen.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import inspect
import os
import threading

from pysandboxes._policy.prompts import Decision

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Awaitable, Callable

    from pysandboxes._policy.prompts import PermissionRequest


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


#: The keys of an answer at the terminal.
KEYS = {"o": Decision.ONCE, "r": Decision.RUN, "a": Decision.ALWAYS}
_DENYING = frozenset(b"dDnN\r\n\x1b\x03\x04")
_WORDS = {Decision.ONCE: "once", Decision.RUN: "for this run", Decision.ALWAYS: "always"}


class TtyDecider:
    """Complete mode's answers: the person at the terminal (see module docs).

    ``hold`` stops the program and returns what to continue; ``resume`` continues it."""

    def __init__(
        self,
        hold: Callable[[], list[int]],
        resume: Callable[[list[int]], None],
        rule_file: str,
        terminal: str = "/dev/tty",
    ) -> None:
        self._hold = hold
        self._resume = resume
        self._rule_file = rule_file
        self._terminal = terminal

    def decide(self, request: PermissionRequest, call: int) -> Decision:
        try:
            fd = os.open(self._terminal, os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError as exc:
            raise OSError(f"no terminal to ask on ({exc})") from exc
        try:
            held = self._hold()
            try:
                return self._ask(fd, request)
            finally:
                self._resume(held)
        finally:
            os.close(fd)

    def _ask(self, fd: int, request: PermissionRequest) -> Decision:
        import termios

        before = termios.tcgetattr(fd)
        keys = list(before)
        keys[3] &= ~(termios.ICANON | termios.ECHO | termios.ISIG | termios.IEXTEN)
        cc = list(before[6])
        cc[termios.VMIN], cc[termios.VTIME] = 1, 0
        keys[6] = cc
        termios.tcsetattr(fd, termios.TCSANOW, keys)
        try:
            _write(fd, self.question(request))
            termios.tcflush(fd, termios.TCIFLUSH)  # typed ahead: answers nothing
            while True:
                key = os.read(fd, 1)
                if not key or key[0] in _DENYING:
                    decision = Decision.DENY
                    break
                found = KEYS.get(key.decode("latin-1").lower())
                if found is not None and not (found is Decision.ALWAYS and request.secret):
                    decision = found
                    break
                _write(fd, "\a")  # not an answer: the question stays
            word = _WORDS.get(decision, "denied")
            _write(fd, f"{word}\r\n")
            return decision
        finally:
            termios.tcsetattr(fd, termios.TCSANOW, before)

    def question(self, request: PermissionRequest) -> str:
        """The question as drawn on the terminal."""
        what = f"{request.operation} {shown(request.resource)}"
        if request.target:
            what += f" to {shown(request.target)}"
        where = f" (at {shown(request.location)})" if request.location else ""
        lines = [
            "",
            f"python-sb: the program asks to {what}{where}",
        ]
        if request.secret:
            lines.append("  it holds a secret: 'always' is not offered")
        if request.rule:
            lines.append(f"  the rule that allows it: {shown(request.rule)}")
        always = "" if request.secret else f", a = always (writes it to {self._rule_file})"
        lines.append(f"  o = once, r = for this run{always}, d = deny")
        choices = "o/r/d" if request.secret else "o/r/a/d"
        return "\r\n".join(lines) + f"\r\nAllow? [{choices}] "


def shown(text: str) -> str:
    """``text`` with its control characters escaped: it cannot move the cursor."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _write(fd: int, text: str) -> None:
    data = text.encode("utf-8", "replace")
    while data:
        data = data[os.write(fd, data) :]
