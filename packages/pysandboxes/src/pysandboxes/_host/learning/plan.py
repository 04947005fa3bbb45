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
import sys

from pysandboxes._policy.expand import runtime_variables
from pysandboxes._policy.globs import name_matches
from pysandboxes._record import record
from pysandboxes._wire.spec import LearnSpec
from pysandboxes.errors import ConfigIssue, ConfigRefusedError, ConfigSyntaxError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pysandboxes._policy.discover import Discovery
    from pysandboxes._policy.model import Policy


_PATH_VARIABLES = ("VIRTUAL_ENV", "CONDA_PREFIX", "PYENV_ROOT")


@record
class Plan:
    """A learning run, as the launcher decided it.

    Attributes:
        fd: the read end of the event pipe.
        output: the file the rules go to (a rule file or a ``pyproject.toml``).
        cwd: the program's working directory.
        home: the home directory, ``""`` when unknown.
        variables: ``(name, value)`` of path variables rules may be written with.
        host_names: the names of the host's variables.
        rule_files: the rule files of the run (never granted).
        relaxed: why the kernel layer was left off for this run, ``""`` if it was not.
        advice: what to do after reviewing, ``""`` when nothing (a ``learn=`` line to drop).
        digest: the output file's SHA-256 before the program started, ``""`` if missing.
        path: ``sys.path`` of the launcher: the writer needs ``tomlkit``, the summary ``rich``.
        commands: the directories of ``PATH``: what is written there runs as the user,
            outside the sandbox, so nothing there is learned for writing.
        renderer: ``module:function`` that prints the summary (see ``conclude.show``).
        start: what a new rule file starts with: ``template`` (every key, commented),
            ``rules`` (the rules alone, to include from another file).
        speaker: who speaks in the summary: ``python-sb``, or ``pysandboxes`` (the
            library, in partial mode).
    """

    fd: int
    output: str
    cwd: str
    home: str
    variables: tuple[tuple[str, str], ...]
    host_names: tuple[str, ...]
    rule_files: tuple[str, ...]
    relaxed: str
    path: tuple[str, ...]
    advice: str = ""
    digest: str = ""
    commands: tuple[str, ...] = ()
    renderer: str = ""
    start: str = "template"
    speaker: str = "python-sb"


def make_plan(
    fd: int,
    output: str,
    cwd: str,
    env: Mapping[str, str],
    rule_files: Sequence[str],
    relaxed: str,
    advice: str = "",
    digest: str = "",
    renderer: str = "",
    start: str = "template",
    speaker: str = "python-sb",
) -> Plan:
    """The plan of a learning run, from the launcher's knowledge of the host."""
    # The runtime's own first: they always mean this interpreter's trees, for anyone.
    runtime = sorted(runtime_variables().items(), key=lambda pair: -len(pair[1]))
    host = [(n, env[n]) for n in _PATH_VARIABLES if env.get(n, "").startswith("/")]
    variables = tuple([*runtime, *host])
    home = env.get("HOME", "")
    return Plan(
        fd,
        output,
        cwd,
        home if home.startswith("/") else "",
        variables,
        tuple(sorted(env)),
        tuple(rule_files),
        relaxed,
        tuple(p for p in sys.path if p),
        advice,
        digest,
        tuple(p for p in env.get("PATH", "").split(os.pathsep) if p.startswith("/")),
        renderer,
        start,
        speaker,
    )


def plan_argument(plan: Plan) -> str:
    """The plan as one command-line argument of the waiter."""
    names = ("fd", "output", "cwd", "home", "variables", "host_names", "rule_files")
    more = ("relaxed", "path", "advice", "digest", "commands", "renderer", "start", "speaker")
    fields = {name: getattr(plan, name) for name in (*names, *more)}
    import json  # only when learning: every start of python-sb imports this module

    return json.dumps(fields)


def parse_plan(argument: str) -> Plan:
    """Read ``plan_argument``'s output (it comes from the launcher, the trusted side)."""
    import json

    fields = json.loads(argument)
    fields["variables"] = tuple(tuple(pair) for pair in fields["variables"])
    for name in ("host_names", "rule_files", "path", "commands"):
        fields[name] = tuple(fields[name])
    return Plan(**fields)


@record
class LearnRun:
    """A learning run being started: the event pipe and where the rules go.

    Attributes:
        output: the file the learned rules are written to.
        read_fd: the trusted side's end of the event pipe.
        spec: what the child is told (its end of the pipe).
        provider: the kernel provider the rules ask for, relaxed while learning.
        digest: the output file's digest before the program started (see ``digest``).
        start: what a new rule file starts with (see ``Plan.start``).
    """

    output: str
    read_fd: int
    spec: LearnSpec
    provider: str = "subprocess"
    digest: str = ""
    start: str = "template"

    def close_child_end(self) -> None:
        """After the spawn: only the child may hold the write end, so its end is ours."""
        try:
            os.close(self.spec.event_fd)
        except OSError:
            pass

    def plan(
        self,
        cwd: str,
        env: Mapping[str, str],
        policy: Policy,
        protected: Sequence[str] = (),
        renderer: str = "",
        *,
        partial: bool = False,
    ) -> Plan:
        """What the waiter needs to conclude (see ``session.Plan``). ``protected``: the
        files the run protects as rule files, besides the policy's (the places the rule
        file search looks at): their directories are never learned writable either."""
        advice = ""
        relaxed = _relaxed_note(self.provider)
        if policy.learn is not None:
            advice = f"remove {policy.learn.origin.text!r} ({policy.learn.origin.where}) to "
            advice += "enforce the rules: while it is there, every run learns"
        elif self.start == "rules" and policy.rule_files and self.output not in policy.rule_files:
            name = os.path.basename(self.output)  # --learn=FILE: no rule reads it yet
            advice = f'add include "{name}" to your rule file for the next run to enforce them'
            relaxed = ""  # the next run does not enforce them on its own
        elif self.start == "rules" and not policy.rule_files:
            # No other rule file: the next run reads this one if it finds or is told it.
            name = os.path.basename(self.output)
            if name not in (".py-sandboxes", "pyproject.toml"):
                way = "sandboxes_config=" if partial else "--pysandboxes-config="
                advice = f"the next run reads {name} when told: {way}{name!r}"
                relaxed = ""
        return make_plan(
            self.read_fd,
            self.output,
            cwd,
            env,
            tuple(dict.fromkeys((*policy.rule_files, *protected))),
            relaxed,
            advice,
            self.digest,
            renderer,
            self.start,
            "pysandboxes" if partial else "python-sb",
        )


def learning_output(
    learn: str | None, policy: Policy, found: Discovery, cwd: str, *, given: bool = False
) -> str | None:
    """The file a run's learned rules go to, or ``None`` when the run does not learn.

    ``given``: rules came from the command line. With no rule file they are the whole
    rule set, deliberately: such a run enforces them rather than learning.

    Raises:
        ConfigRefusedError: ``--learn`` under a ``learn=false`` lock.
        ConfigSyntaxError: ``--learn`` into a directory that does not exist.
    """
    lock = policy.learn_lock
    if learn is not None:
        if lock is not None:
            message = f"learning is locked by learn=false, but requested by --learn={learn}"
            raise ConfigRefusedError([ConfigIssue(lock.source, lock.line, message)])
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
    start: str = "template",
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
    return LearnRun(output, read_fd, spec, provider, digest(output), start), env


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
