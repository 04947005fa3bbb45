"""Permission prompts, the trusted side: judge a request, ask, and perform what was allowed.

The sandboxed side's ``Asking`` enforcer sends a request for each refusal someone may
allow (``_wire.asks``). ``Broker`` reads them on a thread of its own, one at a time, and
for each:

1. decodes it with ``_wire.codec`` alone, and refuses unasked what is malformed, what
   comes while no call of the sandbox runs (partial mode), a file that is not a plain
   absolute path outside ``/proc``, ``/sys`` and ``/dev``, a write to a rule file or a
   change of one's name, flags that do not match the operation asked about, a variable
   the application does not have (or any, in complete mode: the waiter has no values),
   and every request of a kind denied ``MAX_DENIALS`` times already (said once on
   stderr);
2. asks a ``Decider`` (``_host.deciders``: in partial mode the application's
   ``on_request`` callback, in complete mode the person at the terminal), unless the
   same resource was allowed for the run;
3. performs what was allowed (``_host.performing``): opens the file itself, following
   no symbolic link on the way (a component at a time, ``O_NOFOLLOW``), refusing
   anything but a regular file, or connects the socket, and hands the descriptor over
   (``SCM_RIGHTS``); lists a directory (the listing in a sealed memory file handed over
   the same way), takes a ``stat``, removes, makes or renames a name, by the same
   walk; a variable's value (partial mode) is sent as data. An import or a sensitive
   call needs nothing here: it goes on at the Python level only;
4. for ``ALWAYS``, writes the rule learning would write, through the learned-rule writer
   (a ``.old`` backup kept), with the provenance ``allowed at a prompt, <date>``;
5. sends the decision to the decision log, when the run keeps one.

A connection the rules allow, when the broker connects for the run (``route``,
``lookup``: ``_host.egressroutes``), skips all of this: nobody is asked, nothing is
counted against the limits above, the rules and the SSRF-safe defaults decide.

Nothing the child sends runs here, names a class, or outlives its request.
"""

from __future__ import annotations

import os
import socket
import sys
import threading

from pysandboxes._policy.prompts import Decision, PermissionRequest
from pysandboxes._wire.asks import (
    MAX_ANSWER,
    MAX_ASK,
    MAX_VALUE,
    ROUTED,
    Answer,
    encode_answer,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Protocol

    from pysandboxes._host.auditlog import LogWriter
    from pysandboxes._host.egressroutes import Routes
    from pysandboxes._host.rulewatch import Followed
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
_OPERATIONS = {"net": "connect", "import": "import"}
#: The learning event each file operation is written as, for the rule ``ALWAYS`` writes.
_LEARNED_AS = {"stat": "read", "lstat": "read", "rmdir": "delete", "mkdir": "create"}


class Broker:
    """Serves one sandbox's permission requests (see module docs)."""

    def __init__(
        self,
        sock: socket.socket,
        spec: LaunchSpec,
        decider: Decider,
        in_flight: Callable[[int], bool],
        log: LogWriter | None = None,
        *,
        host: Mapping[str, str] | None = None,
        watch: Followed | None = None,
        values: bool = True,
        routes: Routes | None = None,
    ) -> None:
        """``host``: the host's environment as far as the rules are written with it (its
        home, its path variables, the names of the others), by default this process's;
        ``watch``: the run's rule-file snapshot, told of each rule written here;
        ``values``: whether ``host`` holds the variables' values, to hand over when a
        prompt allows reading one (partial mode; the waiter has names only);
        ``routes``: the connections the rules decide (``_host.egressroutes``), when the
        broker connects for the run; without, such a request is refused."""
        self._sock = sock
        self._spec = spec
        self._decider = decider
        self._in_flight = in_flight
        self._log = log
        self._host = os.environ if host is None else host
        self._watch = watch
        self._values = values
        self._routes = routes
        self._ignored: IgnoreMatcher | None = None
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
            encoded = encode_answer(answer)
            if len(encoded) > MAX_ANSWER:  # cannot be: the values are bounded; fail closed
                encoded = encode_answer(Answer("deny", "the answer was too long to send"))
                if fd is not None:
                    os.close(fd)
                    fd = None
            rights = []
            if fd is not None:
                rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fd.to_bytes(4, "little"))]
            try:
                self._sock.sendmsg([encoded], rights)
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
        if ask.kind == "net" and ask.operation in ROUTED:  # the rules decide: nobody asked
            if self._routes is None or not self._in_flight(ask.call):
                return Answer("deny", "the broker connects nothing for this sandbox"), None
            return self._routes.handle(ask)
        why = self._unaskable(ask)
        if why:
            return Answer("deny", why), None
        self._asked += 1
        rules = self._rules(ask)  # before it is done: what is shown is what is written
        request = self._request(ask, rules[0].line if rules else "")
        key = (ask.kind, f"{ask.resource}\0{ask.target}", ask.operation)
        if key in self._allowed:
            decision = Decision.RUN
        else:
            decision = self._decide(request, ask.call)
        if decision is Decision.ALWAYS and request.secret:
            _say(f"{request.resource} holds a secret: ALWAYS is not offered for it; denied")
            decision = Decision.DENY
        fd, value = None, None
        if decision is not Decision.DENY:
            try:
                fd, value = self._perform(ask)
            except OSError as exc:
                self._record(ask, Decision.DENY, request.rule)
                return Answer("deny", f"the trusted side could not do it: {exc}"), None
        if decision is Decision.ALWAYS and not self._write_rule(request.rule, rules):
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
        return Answer(decision.value, value=value), fd

    def _unaskable(self, ask: Ask) -> str:
        """Why a request is refused unasked, or ``""``."""
        if self._asked >= MAX_ASKS:
            return f"more than {MAX_ASKS} requests: the rest are denied without asking"
        if self._denials.get(ask.kind, 0) >= MAX_DENIALS:
            return f"{MAX_DENIALS} requests of this kind were denied: the rest are too"
        if not self._in_flight(ask.call):
            return "no call of the sandbox is running"
        if ask.kind == "file":
            from pysandboxes._host.performing import unopenable

            return unopenable(ask, self._spec.protected)
        if ask.kind == "env":
            if not self._values:
                return "no variable's value is here to give (complete mode: env=NAME=${NAME})"
            value = self._host.get(ask.resource)
            if value is None:
                return "the application has no such variable"
            if len(value) > MAX_VALUE:
                return f"its value is longer than {MAX_VALUE} characters"
        return ""

    def _request(self, ask: Ask, rule: str) -> PermissionRequest:
        from pysandboxes._host.learning.places import secret_variable
        from pysandboxes._policy.secrets import secret_path

        homes = [os.path.expanduser("~")]
        secret = ask.kind == "file" and any(
            secret_path(path, homes) for path in (ask.resource, ask.target) if path
        )
        secret = secret or (ask.kind == "env" and secret_variable(ask.resource))
        resource = f"{ask.resource}:{ask.port}" if ask.kind == "net" else ask.resource
        operation = _OPERATIONS.get(ask.kind, ask.operation)
        where = "".join(c if c.isprintable() else "?" for c in ask.where[:200])
        return PermissionRequest(ask.kind, resource, operation, where, rule, secret, ask.target)

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

    def _perform(self, ask: Ask) -> tuple[int | None, str | tuple[int, ...] | None]:
        """Do what was allowed: the descriptor to hand over, and the value to send."""
        from pysandboxes._host import performing
        from pysandboxes._wire.asks import CHANGES

        if ask.kind == "file":
            if ask.operation == "list":
                hidden = self._hidden_in(ask.resource)
                return performing.list_without_links(ask.resource, hidden), None
            if ask.operation in ("stat", "lstat"):
                follow = ask.operation == "stat"
                return None, performing.stat_without_links(ask.resource, follow)
            if ask.operation in CHANGES:
                performing.change_without_links(ask)
                return None, None
            return performing.open_without_links(ask.resource, ask.flags), None
        if ask.kind == "net":
            return performing.connect(ask.resource, ask.port), None
        if ask.kind == "env":
            return None, self._host.get(ask.resource, "")
        return None, None

    def _hidden_in(self, directory: str) -> Callable[[str], bool]:
        """Which entries of ``directory``, whose listing a prompt allowed, are left out:
        the ones an ``ignore=`` rule hides, as the listing guard leaves them out of an
        exposed directory (the directory listed counts as the exposure)."""
        if self._ignored is None:
            from pysandboxes._policy.globs import compile_ignore

            self._ignored = compile_ignore(list(self._spec.policy.ignore))
        matcher = self._ignored
        return lambda real: matcher(real, directory) is not None

    # -- ALWAYS: the rule file ------------------------------------------------------------

    def _rules(self, ask: Ask) -> list[LearnedRule]:
        from pysandboxes._host.learning.places import Context
        from pysandboxes._host.learning.plan import make_plan
        from pysandboxes._host.learning.rules import learn
        from pysandboxes._wire.events import Event

        spec = self._spec
        plan = make_plan(-1, self.rule_path(), os.getcwd(), self._host, [], "")
        context = Context(
            spec.rule_dir,
            plan.cwd,
            plan.home,
            plan.variables,
            frozenset(plan.host_names),
            frozenset(spec.protected) | {plan.output},
        )
        if ask.kind == "net":
            events = [Event("net", ask.resource, "OUT", "tcp", ask.port)]
        elif ask.kind == "file" and ask.operation == "rename":
            events = [Event("file", ask.resource, "delete"), Event("file", ask.target, "create")]
        elif ask.kind == "file":
            access = _LEARNED_AS.get(ask.operation, ask.operation)
            if access == "read" and os.path.isdir(ask.resource):
                access = "list"  # a directory's stat: the rule that lets it be looked at
            events = [Event("file", ask.resource, access)]
        else:
            events = [Event(ask.kind, ask.resource, ask.operation)]
        return list(learn(events, context).rules)

    def rule_path(self) -> str:
        """The rule file ``ALWAYS`` writes to: the one the rules were read from."""
        return os.path.join(self._spec.rule_dir, os.path.basename(self._spec.rule_file))

    def _write_rule(self, line: str, learned: list[LearnedRule]) -> bool:
        """Write the rules shown (``line`` the first); ``False`` (allowed for the run
        only) if none can be."""
        from datetime import datetime
        from pathlib import Path

        from pysandboxes._policy.writer import LearnedRule, write_pyproject, write_rule_file

        path = Path(self.rule_path())
        if not line or not path.is_file():
            _say(f"no rule file to write '{line}' to: allowed for this run only")
            return False
        if self._watch is not None and not self._watch.unchanged(str(path)):
            _say(
                f"{path} was changed while the program ran: '{line}' is not written to it "
                "(the reviewed version is set back at exit); allowed for this run only"
            )
            return False
        now = datetime.now()
        note = f"allowed at a prompt, {now:%Y-%m-%d}"
        rules = [LearnedRule(r.block, r.line, note, r.group) for r in learned]
        try:
            if path.name == "pyproject.toml":
                write_pyproject(path, rules, now=now)
            else:
                write_rule_file(path, rules, now=now)
        except (OSError, ValueError) as exc:
            _say(f"'{line}' could not be written to {path} ({exc}): allowed for this run only")
            return False
        if self._watch is not None:
            self._watch.wrote(str(path))  # the rule file's reviewed version, at exit too
        return True

    def _record(self, ask: Ask, decision: Decision, rule: str) -> None:
        if self._log is None:
            return
        from pysandboxes._wire.decisions import Decision as Logged

        target = f"tcp:{ask.resource}:{ask.port}" if ask.kind == "net" else ask.resource
        if ask.target:
            target = f"{ask.resource} -> {ask.target}"
        text = f"answered {decision.name} at a prompt"
        allowed = decision is not Decision.DENY
        fix = "" if allowed else rule
        entry = Logged(ask.kind, target, ask.operation, allowed, "prompt", text, ask.where, fix=fix)
        self._log.write([entry])


if TYPE_CHECKING:
    from pysandboxes._policy.globs import IgnoreMatcher
    from pysandboxes._policy.writer import LearnedRule


def _say(message: str) -> None:
    print(f"pysandboxes: {message}", file=sys.stderr)
