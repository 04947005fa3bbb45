"""``guarded_eval``: evaluate a string under a named ``eval-*`` profile."""

from __future__ import annotations

from pysandboxes._inside.evaluation import inforce
from pysandboxes._mode import is_in_sandbox

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from pysandboxes._policy.evaluation import EvalProfile

_parsed: dict[str, dict[str, EvalProfile]] = {}


def _profiles_of(rules: str | None) -> Mapping[str, EvalProfile]:
    if rules is None:
        return {}
    found = _parsed.get(rules)
    if found is None:
        from pysandboxes._policy.evaluation import profiles
        from pysandboxes._policy.parser import parse_policy

        lines = [line for line in rules.splitlines() if line.strip()]
        found = _parsed[rules] = profiles(parse_policy(None, extra_rules=lines).eval)
    return found


def guarded_eval(
    source: str,
    profile: str = "",
    names: Mapping[str, object] | None = None,
    mode: str = "eval",
    *,
    rules: str | None = None,
) -> object:
    """Evaluate ``source`` under the ``eval-*`` profile ``profile`` (``""``: the default).

    The source is checked against the profile's sub-language (every violation reported
    at once, ``EvalSyntaxRejected``), then run under its budgets (``EvalInterrupted``) in a
    namespace of the ``eval-call`` builtins and ``names``. ``mode="exec"`` runs
    statements and returns ``None``. Inside a sandbox the profiles are the rule file's;
    elsewhere pass the ``eval-*`` lines as ``rules``.

    Raises:
        ValueError: the profile is not configured, or ``mode`` is not eval or exec.
    """
    if mode not in ("eval", "exec"):
        raise ValueError(f"mode must be 'eval' or 'exec', not {mode!r}")
    if is_in_sandbox():
        if rules is not None:
            raise ValueError("inside a sandbox the rule file decides: guarded_eval takes no rules=")
        in_force = inforce.evaluator()
        if in_force is not None:
            return in_force(profile, source, mode, names)
    configured = _profiles_of(rules)
    chosen = configured.get(profile)
    if chosen is None:
        raise ValueError(f"unknown eval profile {profile!r}, configured: {sorted(configured)}")
    # Imported when first used: `import pysandboxes` stays cheap for every start.
    from pysandboxes._inside.evaluation.runner import evaluate

    return evaluate(chosen, source, mode, names)
