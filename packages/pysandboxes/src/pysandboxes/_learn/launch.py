"""Whether a ``python-sb`` run learns, and how the trusted side prepares it.

A run learns when ``--learn[=FILE]`` asks for it, when the rules say ``learn=FILE``, or
when no rule file exists and no rule is given on the command line. A ``learn=false``
lock refuses the first two (the parser refuses ``learn=`` in a file; ``--learn`` is
refused here), naming the lock's line. A missing file cannot hold a lock.

While learning, the sandbox receives the host's environment minus the ``unenv=`` names,
with the rules' own values on top: the program must see what it would see unsandboxed,
and a variable it reads becomes ``env=NAME=${NAME}``. The process chain still holds no
more than the sandbox: the waiter runs with an empty environment.
"""

from __future__ import annotations

import os

from pysandboxes._policy.globs import name_matches
from pysandboxes._record import record
from pysandboxes._spec import LearnSpec
from pysandboxes.errors import ConfigIssue, ConfigSyntaxError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pysandboxes._policy.discover import Discovery
    from pysandboxes._policy.model import Policy

    from .session import Plan


@record
class LearnRun:
    """A learning run being started: the event pipe and where the rules go.

    Attributes:
        output: the file the learned rules are written to.
        read_fd: the trusted side's end of the event pipe.
        spec: what the child is told (its end of the pipe).
        provider: the kernel provider the rules ask for, relaxed while learning.
        digest: the output file's digest before the program started (see ``digest``).
    """

    output: str
    read_fd: int
    spec: LearnSpec
    provider: str = "subprocess"
    digest: str = ""

    def close_child_end(self) -> None:
        """After the spawn: only the child may hold the write end, so its end is ours."""
        try:
            os.close(self.spec.event_fd)
        except OSError:
            pass

    def plan(
        self, cwd: str, env: Mapping[str, str], policy: Policy, protected: Sequence[str] = ()
    ) -> Plan:
        """What the waiter needs to conclude (see ``session.Plan``). ``protected``: the
        files the run protects as rule files, besides the policy's (the places the rule
        file search looks at): their directories are never learned writable either."""
        from .session import make_plan

        advice = ""
        if policy.learn is not None:
            advice = f"remove {policy.learn.origin.text!r} ({policy.learn.origin.where}) to "
            advice += "enforce the rules: while it is there, every run learns"
        return make_plan(
            self.read_fd,
            self.output,
            cwd,
            env,
            tuple(dict.fromkeys((*policy.rule_files, *protected))),
            _relaxed_note(self.provider),
            advice,
            self.digest,
        )


def learning_output(
    learn: str | None, policy: Policy, found: Discovery, cwd: str, *, given: bool = False
) -> str | None:
    """The file a run's learned rules go to, or ``None`` when the run does not learn.

    ``given``: rules came from the command line. With no rule file they are the whole
    rule set, deliberately: such a run enforces them rather than learning.

    Raises:
        ConfigSyntaxError: ``--learn`` under a ``learn=false`` lock, or into a directory
            that does not exist.
    """
    lock = policy.learn_lock
    if learn is not None:
        if lock is not None:
            message = f"learning is locked by learn=false, but requested by --learn={learn}"
            raise ConfigSyntaxError([ConfigIssue(lock.source, lock.line, message)])
        if not learn:
            return found.path or found.default
        path = os.path.normpath(os.path.join(cwd, os.path.expanduser(learn)))
        if not os.path.isdir(os.path.dirname(path)):
            message = f"--learn={learn}: the directory of '{path}' must exist"
            raise ConfigSyntaxError([ConfigIssue("<arg>", 0, message)])
        return path
    if policy.learn is not None:
        return policy.learn.value
    return found.default if found.path is None and not given else None


def start(
    output: str,
    policy: Policy,
    host: Mapping[str, str],
    child_env: dict[str, str],
    provider: str = "subprocess",
) -> tuple[LearnRun, dict[str, str]]:
    """Open the event pipe; return the run and the environment the child gets."""
    removed = [rule.pattern for rule in policy.unenv]
    env = {
        name: value
        for name, value in host.items()
        if not any(name_matches(pattern, name) for pattern in removed)
    }
    env.update(child_env)
    # Reads of these are no news: the rules give them, or unenv= keeps them out for good.
    known = frozenset(child_env) | frozenset(host.keys() - env.keys())
    read_fd, write_fd = os.pipe()
    os.set_inheritable(write_fd, True)
    spec = LearnSpec(write_fd, known)
    return LearnRun(output, read_fd, spec, provider, digest(output)), env


def digest(path: str) -> str:
    """The SHA-256 of a file's bytes, ``""`` when it is missing or unreadable.

    Taken before the program starts and again before writing: a learning run lets the
    program do anything outside the Python layer (a shell can rewrite the rule file), so
    a file that changed meanwhile is not built upon.
    """
    import hashlib

    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return ""


def _relaxed_note(provider: str) -> str:
    if provider in ("subprocess", "none"):
        return ""
    return (
        f"the kernel layer ({provider}) was relaxed for this learning run only; "
        "the next run enforces the learned rules with it"
    )
