"""Complete and partial mode, the trusted side: the rules read once, and the plan of a run.

``build_spec`` takes a ``LaunchRequest`` (what the command line, or ``sandboxes()``,
asked for) and decides everything the sandbox is started with, in one place: the rules
(``load_rules``: discovery, parser), the provider that can run here, the environment, the
start-up checks, the places the sandbox may not write, the learning run, and the files
the waiter keeps an eye on. The result is a ``LaunchSpec`` (``_wire.spec``), a frozen
record, and the child's environment; ``launch.spawn`` starts it. Nothing below the host
side reads a rule file.
"""

from __future__ import annotations

import os
import sys

from pysandboxes._host.learning.plan import LearnRun, learning_output
from pysandboxes._host.learning.plan import start as start_learning
from pysandboxes._host.preparing import implicit_exposures, make_private_dir, pycache_prefixes
from pysandboxes._host.rulewatch import for_run
from pysandboxes._host.select import say_what_is_missing, select
from pysandboxes._host.startup import (
    refuse_planted_code,
    refuse_replaceable_rule_links,
    startup_flags,
)
from pysandboxes._host.waiter import remove_tree
from pysandboxes._policy.discover import discover
from pysandboxes._policy.envres import resolve_env
from pysandboxes._policy.lines import display_name
from pysandboxes._policy.links import links_on_the_way
from pysandboxes._policy.parser import parse_policy
from pysandboxes._record import record
from pysandboxes._wire.spec import KERNEL_LAYERED, PYCACHE_OPTION, LaunchSpec, Program, deferred
from pysandboxes.errors import ConfigIssue, ConfigRefusedError, ConfigSyntaxError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from pysandboxes._policy.discover import Discovery
    from pysandboxes._policy.model import Policy

    #: The rules of a run, as ``load_rules`` finds and parses them.
    Rules = tuple[Policy, Discovery]


@record
class LaunchRequest:
    """A ``python-sb`` run, as the command line gave it.

    Attributes:
        program: what to run.
        python_flags: CPython options for the sandboxed interpreter (``-u``, ``-X dev``...).
        config: ``--pysandboxes-config``, or ``None``.
        extra_rules: ``--key=value`` rules, as ``key=value`` lines.
        learn: ``--learn[=FILE]``: ``None`` when absent, ``""`` for the rule file in use.
        summary: ``module:function`` that prints a learning run's summary (the front end's
            own rendering); plain text when empty. The waiter imports it by name.
        first_run: with no rule file and no rule given, learn (``python-sb``'s first run,
            once the user said yes); when false, refuse to start instead, saying how to
            learn: nothing learns unasked.
        learn_start: what a new rule file starts with (``template`` or ``rules``); by
            default the template, or the rules alone for ``--learn=FILE``.
    """

    program: Program
    python_flags: tuple[str, ...] = ()
    config: str | None = None
    extra_rules: tuple[str, ...] = ()
    learn: str | None = None
    summary: str = ""
    first_run: bool = True
    learn_start: str = ""


_NO_RULES_CLI = (
    "no rule file was found (a new one would be {0}), and no terminal is here to ask whether "
    "to learn the rules: nothing was run. To learn them, run the program once with "
    "python-sb --learn (nothing is refused while learning; review the file it writes). To "
    "write them, start from python-sb --template > .py-sandboxes"
)
_NO_RULES = (
    "no rule file was found (a new one would be {0}): the sandbox would have no rules. Pass "
    "sandboxes_config='path/to/.py-sandboxes', rules as keywords (expose_ro='./data'), or "
    "learn='.py-sandboxes' to write the rules the calls need"
)


def learns_unasked(
    request: LaunchRequest, cwd: str, env: Mapping[str, str], rules: Rules | None = None
) -> str | None:
    """The rule file a run of ``request`` would learn into because there is none yet and
    nothing asked to learn; ``None`` when the run enforces rules or was asked to learn.
    ``rules``: what ``load_rules`` gave for ``request``, if the caller has it.

    Raises:
        ConfigSyntaxError: the rules cannot be used.
    """
    if request.learn is not None:
        return None
    policy, found = rules or load_rules(request, cwd, env)
    if found.path is not None or policy.learn is not None:
        return None
    return learning_output(None, policy, found, cwd, given=bool(request.extra_rules))


def without_rule_file(
    request: LaunchRequest, cwd: str, env: Mapping[str, str], rules: Rules | None = None
) -> bool:
    """Whether a run of ``request`` finds no rule file and is not asked to learn (rules
    given on the command line may be there: they are not a file). ``rules``: as for
    ``learns_unasked``.

    Raises:
        ConfigSyntaxError: the rules cannot be used.
    """
    if request.learn is not None:
        return False
    policy, found = rules or load_rules(request, cwd, env)
    return found.path is None and policy.learn is None


def load_rules(request: LaunchRequest, cwd: str, env: Mapping[str, str]) -> Rules:
    """Find and parse the rules of a run. Raises ``ConfigSyntaxError``.

    They depend on the request's rule options and program, not on whether it learns: a
    caller may load them once and hand them to each step of one run (``rules=``), which
    then sees one reading of the files."""
    program = request.program
    found = discover(
        request.config,
        script=program.target if program.kind == "script" else None,
        module=program.target if program.kind == "module" else None,
        cwd=cwd,
        search_path=[cwd],
    )
    policy = parse_policy(found.path, extra_rules=request.extra_rules, cwd=cwd, env=env)
    return policy, found


def build_spec(
    request: LaunchRequest, cwd: str, env: Mapping[str, str], rules: Rules | None = None
) -> tuple[LaunchSpec, dict[str, str], LearnRun | None, bytes]:
    """The child's spec and environment, the learning run if the run learns, and what the
    waiter checks at exit (``rulewatch``). The caller owns ``spec.tempdir`` and the
    learning pipe, and removes them. ``rules``: as for ``learns_unasked``."""
    policy, found = rules or load_rules(request, cwd, env)
    for warning in policy.warnings:  # problems that do not stop the run: shown at start
        print(f"python-sb: warning: {warning}", file=sys.stderr)
    selection = select(policy, env)  # OSLayerUnavailable: never a silent downgrade
    for provider, why in selection.passed_over:
        print(
            f"python-sb: os-sandbox '{provider}' cannot run here ({why}); "
            f"'{selection.provider}', next in {selection.source}, is used instead.",
            file=sys.stderr,
        )
    if selection.provider in ("landlock", "unshare", "bwrap"):
        refuse_replaceable_rule_links(policy)
    child_env = resolve_env(policy, env)
    output = learning_output(request.learn, policy, found, cwd, given=bool(request.extra_rules))
    unasked = output is not None and found.path is None and request.learn is None
    if unasked and not request.first_run:
        partial = request.program.kind == "serve"
        where, text = ("<sandboxes()>", _NO_RULES) if partial else ("<python-sb>", _NO_RULES_CLI)
        raise ConfigRefusedError([ConfigIssue(where, 0, text.format(found.default))])
    learning = None
    if output is not None:
        start = request.learn_start or ("rules" if request.learn else "template")
        learning, child_env = start_learning(
            output, policy, env, child_env, selection.provider, start
        )
    if request.program.kind == "repl" and "TERM" in env and "TERM" not in child_env:
        # The interactive session draws on the terminal; TERM says how, nothing more.
        child_env["TERM"] = env["TERM"]
    rule_path = found.path or found.default
    protected = list(policy.rule_files)
    # Every link on the way to a rule file is part of it: retargeting one (a "current"
    # link of a release directory) would change the next run's rules.
    protected += [link for path in policy.rule_files for link in links_on_the_way(path)]
    # The places the search looks at before the rule file: a file planted there, even
    # under a name given to --pysandboxes-config (the judge knows only .py-sandboxes),
    # would rule the next run.
    searched = list(found.searched)
    if rule_path in searched:
        searched = searched[: searched.index(rule_path) + 1]
    protected += [p for p in searched if os.path.basename(p) != "pyproject.toml"]
    if policy.learn is not None:
        protected.append(policy.learn.value)
    if output is not None:
        protected.append(output)
    if policy.audit_log is not None and policy.python_layer:
        protected.append(policy.audit_log.value)  # the decision log: the trusted side's
    # The walls: a kernel layer, or the Python layer unless py-sandbox=false turns it off.
    layers = selection.provider in KERNEL_LAYERED or (
        policy.python_layer and selection.provider != "none"
    )
    walls = learning is None and layers
    tempdir = make_private_dir()
    try:
        refuse_planted_code(
            policy,
            child_env,
            tempdir,
            cwd,
            sandboxed=walls,
            partial=request.program.kind == "serve",
            # Only the Python layer keeps a rule file read-only inside a writable exposure.
            rule_files=protected if not policy.python_layer else (),
        )
    except ConfigSyntaxError:
        remove_tree(tempdir)
        raise
    provider = "subprocess" if learning is not None else selection.provider
    watch = b"" if provider == "none" else for_run(policy, found, provider, output, request.config)
    if learning is None:  # once the run is sure to start
        say_what_is_missing(policy, selection.provider, selection.source, layers)
    spec = LaunchSpec(
        policy=policy,
        program=request.program,
        rule_file=display_name(rule_path, cwd),
        rule_dir=os.path.dirname(rule_path),
        protected=tuple(protected),
        implicit=implicit_exposures(tempdir),
        tempdir=tempdir,
        learning=learning.spec if learning is not None else None,
        # A learning run lets everything through: the kernel layer is relaxed for it alone.
        provider=provider,
        deferred_env=tuple((k, child_env.pop(k)) for k in sorted(child_env) if deferred(k))
        + tuple((PYCACHE_OPTION, value) for value in pycache_prefixes(request.python_flags)),
        startup_flags=startup_flags(request.python_flags, policy, child_env, tempdir),
    )
    return spec, child_env, learning, watch
