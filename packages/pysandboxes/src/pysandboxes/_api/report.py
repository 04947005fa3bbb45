"""The layer report: which layer enforces each rule on this host (``enforcement_report``)."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pysandboxes._host.launchplan import LaunchRequest
    from pysandboxes._host.report import LayerReport


def layer_report(request: LaunchRequest, cwd: str, env: Mapping[str, str]) -> LayerReport:
    """Which layer enforces each rule of ``request`` on this host.

    Raises:
        ConfigSyntaxError: the rules cannot be used.
        OSLayerUnavailable: the provider the rules ask for cannot run here.
    """
    from pysandboxes._host.launchplan import learns_unasked, load_rules
    from pysandboxes._host.report import LayerReport, build
    from pysandboxes._host.select import select
    from pysandboxes._kernel import landlock

    unasked = learns_unasked(request, cwd, env)
    if unasked is not None:  # the run would enforce nothing: describe that run
        detail = (
            f"no rule file: a run would ask at a terminal whether to learn one into "
            f"{os.path.relpath(unasked, cwd)} (nothing is refused while learning), and "
            "stop without a terminal; no rule is enforced"
        )
        return LayerReport("none", "no rule file", detail, (), ())
    policy, _ = load_rules(request, cwd, env)
    selection = select(policy, env)
    return build(policy, selection, landlock.abi_version())


def enforcement_report(
    rule_file: str | None = None, *, rules: Sequence[str] = (), cwd: str | None = None
) -> dict[str, object]:
    """For the rules a ``python-sb`` run in ``cwd`` would use, which layer enforces each
    rule on this host: the Python layer, Landlock, namespaces; what a kernel layer cannot
    enforce is said in the rule's ``note``.

    Args:
        rule_file: the rule file to read instead of the one ``python-sb`` would find.
        rules: more rules as ``key=value`` lines, as ``--key=value`` options give them.
        cwd: the directory the run would start in (default: the current one).

    Returns:
        ``{"provider", "source", "detail", "passed_over", "rules": [{"place", "rule",
        "python", "kernel", "note"}, ...]}``, ready for ``json.dumps``.

    Raises:
        ConfigSyntaxError: the rules cannot be used.
        OSLayerUnavailable: the provider the rules ask for cannot run here.
    """
    from pysandboxes._host.launchplan import LaunchRequest
    from pysandboxes._wire.spec import Program

    request = LaunchRequest(Program("repl"), config=rule_file, extra_rules=tuple(rules))
    where = os.path.abspath(cwd or os.getcwd())
    return layer_report(request, where, os.environ).as_dict()
