"""``python-sb --explain RESOURCE``: the verdict the rules give one resource, and why.

A resource is a path, ``env:NAME``, ``net:HOST:PORT`` (``net:udp:HOST:PORT``),
``import:MODULE``, ``api:NAME`` or ``eval:EXPR``. The verdict comes from the judges the
guards use (``_host.replay.Judges``, over ``_policy.judge``) and, for an evaluated
expression, from the checker of the ``eval-*`` sub-language: nothing is re-implemented
here, and no program runs. The layers come from the report ``--show-layers`` draws.
"""

from __future__ import annotations

import os

from pysandboxes._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from pysandboxes._host.launchplan import LaunchRequest
    from pysandboxes._host.report import LayerReport
    from pysandboxes._policy.model import Origin, Policy

KINDS = ("env", "net", "import", "api", "eval")
#: For a refusal no line decides: the standing row of the layer report that enforces it.
_STANDING = {"net": "no net= rule allows anything", "call": "no program may be started"}
_KEYS = {"file": "expose-", "net": "net=", "import": "python-import=", "call": "python-api="}
_ONLY = {
    "env": "the sandbox is started without the variable",
    "import": "imports are enforced by the Python layer only",
    "call": "sensitive calls are enforced by the Python layer only",
    "eval": "the eval-* sub-language is enforced by the Python layer only",
}


@record
class Verdict:
    """One access of the resource, judged.

    Attributes:
        what: the access (``read /data/x``, ``import json``).
        allowed: the verdict.
        decided_by: ``file(line): rule`` of the deciding line, or ``""`` when none did.
        fix: for a refusal no line decided, the line that would allow it (or why none).
        python, kernel, note: the layers that enforce it here, as ``--show-layers`` says.
    """

    what: str
    allowed: bool
    decided_by: str
    fix: str
    python: str
    kernel: str
    note: str


def explain(
    request: LaunchRequest, cwd: str, env: Mapping[str, str], resource: str
) -> tuple[Verdict, ...]:
    """The verdicts on ``resource`` (a path gives two: read and write; else one).

    Raises:
        ConfigSyntaxError: the rules cannot be used.
        OSLayerUnavailable: the provider the rules ask for cannot run here.
        ValueError: ``resource`` is not one of the forms above.
    """
    from pysandboxes._api.report import layer_report
    from pysandboxes._host.launchplan import load_rules
    from pysandboxes._host.replay import Judges, fix_for
    from pysandboxes._wire.decisions import Decision

    policy, _ = load_rules(request, cwd, env)
    report = layer_report(request, cwd, env)
    kind, _, rest = resource.partition(":")
    if kind == "eval":
        return (_eval(policy, report, rest),)
    if kind not in KINDS:
        path = os.path.normpath(os.path.join(cwd, os.path.expanduser(resource)))
        asked = [Decision("file", path, "read", False), Decision("file", path, "write", False)]
    elif kind == "net":
        proto, _, address = (
            rest.partition(":") if rest[:4] in ("tcp:", "udp:") else ("tcp", "", rest)
        )
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"'{resource}': expected net:HOST:PORT (or net:udp:HOST:PORT)")
        asked = [Decision("net", f"{proto}:{host.strip('[]')}:{port}", "OUT", False)]
    elif not rest:
        raise ValueError(f"'{resource}': expected {kind}:NAME")
    else:
        asked = [Decision({"api": "call"}.get(kind, kind), rest, _access(kind), False)]
    judges = Judges(policy)
    found: list[Verdict] = []
    for decision in asked:
        judged = judges.judge(decision)
        allowed, origin = judged if judged is not None else (False, None)
        fix = "" if allowed or origin else fix_for(decision) or "no rule allows it"
        what = f"{decision.access} {decision.target}" if decision.kind == "file" else resource
        found.append(_verdict(report, decision.kind, what, allowed, origin, fix))
    return tuple(found)


def _access(kind: str) -> str:
    return {"import": "module", "env": "read"}.get(kind, "")


def _verdict(
    report: LayerReport, kind: str, what: str, allowed: bool, origin: Origin | None, fix: str
) -> Verdict:
    decided = f"{origin.where}: {origin.text}" if origin is not None else ""
    place = origin.where if origin is not None else None
    row = next((r for r in report.rows if place is not None and r.place == place), None)
    if row is None and kind in _STANDING:
        row = next((r for r in report.rows if r.rule == _STANDING[kind]), None)
    if row is None:  # a line of the same kind says which layers hold that kind here
        key = _KEYS.get(kind, "")
        row = next((r for r in report.rows if key and r.rule.startswith(key)), None)
    if row is not None:
        return Verdict(what, allowed, decided, fix, row.python, row.kernel, row.note)
    if report.source == "no rule file":  # a run would offer to learn: say so
        return Verdict(what, allowed, decided, fix, "", "", report.detail)
    python = "" if report.provider == "none" else "Python"
    if kind == "env":
        python = "environment filter"
    return Verdict(what, allowed, decided, fix, python, "", _ONLY.get(kind, ""))


def _eval(policy: Policy, report: LayerReport, source: str) -> Verdict:
    """An expression handed to the program's ``eval()``: checked against the default
    profile, never run."""
    import ast

    from pysandboxes._host.replay import Judges
    from pysandboxes._inside.evaluation.checker import check
    from pysandboxes._policy.evaluation import profiles
    from pysandboxes.errors import EvalInterrupted, EvalSyntaxRejected

    what = f"eval({source!r})"
    default = profiles(policy.eval).get("")
    if default is None:  # no eval-* line: the API guard decides, raw or refused
        from pysandboxes._wire.decisions import Decision

        allowed, origin = Judges(policy).judge(Decision("call", "builtins.eval", "", False)) or (
            False,
            None,
        )
        fix = "" if allowed else "an eval-* line (eval-syntax=arith) would allow it, guarded"
        return _verdict(report, "eval", what, allowed, origin, fix)
    lines = [r.origin for r in policy.eval if not r.profile]
    decided = ", ".join(f"{o.where}: {o.text}" for o in lines)
    try:
        check(default, ast.parse(source, "<explain>", "eval"), source)
    except EvalSyntaxRejected as refused:
        fixes = [v.strip() for v in str(refused).splitlines() if v.strip().startswith("add:")]
        fix = "; ".join(f.removeprefix("add: ") for f in dict.fromkeys(fixes))
        return _verdict(report, "eval", what, False, None, fix or "no rule allows it")
    except EvalInterrupted as stop:
        return _verdict(report, "eval", what, False, None, f"{stop.reason} ({stop.where})")
    except SyntaxError as error:
        raise ValueError(f"'eval:{source}' is not an expression: {error.msg}") from None
    verdict = _verdict(report, "eval", what, True, lines[0], "")
    from pysandboxes._record import replace

    return replace(verdict, decided_by=decided)
