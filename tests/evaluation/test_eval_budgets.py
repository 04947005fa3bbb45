"""Budgets that stop evaluated code and leave the caller able to go on.

Each test shows plain Python running past the budget (a smaller instance it completes,
or a process still running once the guarded run has stopped, then killed), then the
guarded run stopped by the budget, then the caller evaluating again.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from pysandboxes import EvalInterrupted, RuleEvalPermissionError, guarded_eval

RULES = "\n".join(
    [
        "eval-syntax=arith, compare, conditional, loop, func, assign, exception, Call",
        "eval-syntax=Attribute",
        "eval-call=sum, range, sorted, list, len, str, dict, zip, map, abs",
        "eval-attribute=join, fromkeys",
    ]
)


def _still_running_in_plain_python(source: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", source])


def _caller_goes_on() -> None:
    assert guarded_eval("1 + 1", rules=RULES) == 2


@pytest.mark.parametrize(
    "source",
    [
        "sum(range(10**12))",
        "len(sorted(range(10**9)))",
        "len(dict.fromkeys(range(10**9)))",
        "len(dict(zip(range(10**9), range(10**9))))",
        "sum(map(abs, range(10**12)))",
    ],
)
def test_c_level_loop_is_stopped_by_the_iteration_budget(source: str) -> None:
    plain = _still_running_in_plain_python(f"print({source})")
    try:
        # The iteration budget, or the timeout on a loaded machine: either stops it.
        with pytest.raises(EvalInterrupted, match=r"eval-max-iterations=1000000|eval-timeout=5s"):
            guarded_eval(source, rules=RULES)
        assert plain.poll() is None  # plain Python is still at it
    finally:
        plain.kill()
        plain.wait()
    _caller_goes_on()


def test_endless_loop_is_stopped_by_the_timeout_even_when_it_catches() -> None:
    source = "while True:\n    try:\n        x = 1\n    except BaseException:\n        pass"
    plain = _still_running_in_plain_python(source)
    rules = RULES + "\neval-timeout=100ms\neval-max-iterations=10_000_000_000"
    try:
        with pytest.raises(EvalInterrupted, match=r"eval-timeout=0\.1s"):
            guarded_eval(source, mode="exec", rules=rules)
        assert plain.poll() is None
    finally:
        plain.kill()
        plain.wait()
    _caller_goes_on()


def test_deep_recursion_is_stopped_by_the_call_depth_budget() -> None:
    source = "def f(n):\n    return n if n >= 100 else f(n + 1)\nresult = f(0)"
    plain: dict[str, object] = {}
    exec(source, plain)
    assert plain["result"] == 100
    with pytest.raises(EvalInterrupted, match="eval-max-call-depth=20"):
        guarded_eval(source, mode="exec", rules=RULES)
    _caller_goes_on()


@pytest.mark.parametrize(
    ("small", "big"),
    [
        ("10 ** 10 ** 5", "10 ** 10 ** 8"),
        ("'x' * 10**5", "'x' * 10**10"),
        ("'%0*d' % (10**5, 1)", "'%0*d' % (10**10, 1)"),
        ("('x' * 10**5).join(['ab'] * 20)", "('x' * 10**6).join(['ab'] * 20)"),
        ("2 << 10**6", "2 << 10**9"),
    ],
)
def test_huge_results_are_refused_before_they_are_computed(small: str, big: str) -> None:
    assert eval(small)  # plain Python builds the smaller one, and would build the big one
    with pytest.raises(
        RuleEvalPermissionError, match=r"eval-max-alloc=10000000.*Add 'eval-max-alloc="
    ):
        guarded_eval(big, rules=RULES)
    _caller_goes_on()


def test_a_smaller_allocation_budget_refuses_what_plain_python_builds() -> None:
    assert len("%0*d" % (10**5, 1)) == 10**5  # noqa: UP031 - the threat is %-padding
    with pytest.raises(RuleEvalPermissionError, match="eval-max-alloc=10000"):
        guarded_eval("'%0*d' % (10**5, 1)", rules=RULES + "\neval-max-alloc=10KB")


def test_a_huge_source_is_stopped_by_the_node_budget() -> None:
    source = "[" + ", ".join(["1"] * 6000) + "]"
    assert len(eval(source)) == 6000
    with pytest.raises(EvalInterrupted, match="eval-max-nodes=5000"):
        guarded_eval(source, rules=RULES)
    _caller_goes_on()


def test_a_deeply_nested_source_is_stopped_by_the_depth_budget() -> None:
    source = "-" * 30 + "1"
    assert eval(source) == 1
    with pytest.raises(EvalInterrupted, match="eval-max-depth=20"):
        guarded_eval(source, rules=RULES)
    _caller_goes_on()


def test_interruption_is_a_base_exception_only() -> None:
    assert not issubclass(EvalInterrupted, Exception)
    assert EvalInterrupted("eval-timeout=1s").reason == "eval-timeout=1s"
