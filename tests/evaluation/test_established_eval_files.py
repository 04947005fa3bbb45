"""Rule files written for the established format (pysandboxes 0.7.0) keep their verdicts.

There, calls, attribute access and keyword arguments are always part of the evaluated
language; ``eval-call=`` and ``eval-attribute=`` say which. Each file below is run under
``python-sb`` with the program's own ``eval``/``exec``, and the budgets still hold with
the calls allowed: the catch-all retrying recursion, the generator that would run 10¹⁰
times, and the one C call (``sum(range(10**12))``) that plain Python runs for hours.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest

from pysandboxes import EvalInterrupted, EvalSyntaxRejected, guarded_eval

if TYPE_CHECKING:
    from pathlib import Path

    from runner import Runner

ARITH_SUM = "eval-syntax=arith\neval-call=sum, range\neval-timeout=1s\n"
FUNCTIONS = "eval-syntax=func, exception, arith\neval-call=Exception, f, g\n"
GENERATOR = "eval-syntax=comprehension, arith\neval-call=sum, range\n"
RETRYING = (
    "def f(n):\n"
    "    try:\n"
    "        return f(n + 1)\n"
    "    except Exception:\n"
    "        return f(n + 1)\n"
    "f(0)\n"
)
TWO_FUNCTIONS = "def g(x):\n    return x * 2\ndef f(n):\n    return g(n) + 1\nf(2)"
PROGRAM = """
import sys
import pysandboxes
try:
    if sys.argv[1] == "exec":
        exec(sys.argv[2])
        print("GOT done")
    else:
        print("GOT", eval(sys.argv[2]))
except pysandboxes.EvalInterrupted as stop:
    print("STOPPED", stop)
except SyntaxError as refused:
    print("REFUSED", refused)
"""


def _run(sb: Runner, project: Path, rules: str, mode: str, source: str) -> str:
    (project / ".py-sandboxes").write_text(rules + "python-import=pysandboxes\n")
    (project / "app.py").write_text(PROGRAM)
    result = sb("app.py", mode, source)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.parametrize(
    ("rules", "mode", "source", "expected"),
    [
        (ARITH_SUM, "eval", "sum(range(10))", "GOT 45"),
        (FUNCTIONS, "exec", TWO_FUNCTIONS, "GOT done"),
        (GENERATOR, "eval", "sum(1 for _ in range(10))", "GOT 10"),
        (ARITH_SUM, "eval", "sum(range(10), start=5)", "GOT 50"),
    ],
    ids=["arith-sum-range", "func-exception", "comprehension", "keyword-argument"],
)
def test_an_established_rule_file_allows_the_calls_it_names(
    sb: Runner, project: Path, rules: str, mode: str, source: str, expected: str
) -> None:
    assert _run(sb, project, rules, mode, source).strip() == expected


def test_an_established_rule_file_still_refuses_a_call_it_does_not_name(
    sb: Runner, project: Path
) -> None:
    out = _run(sb, project, ARITH_SUM, "eval", "open('/etc/passwd').read()")
    assert out.startswith("REFUSED 2 rules violated"), out
    assert "add: eval-call=open" in out
    assert "add: eval-attribute=read" in out
    assert "eval-syntax=Call" not in out


def test_a_call_through_an_expression_still_needs_the_call_node(sb: Runner, project: Path) -> None:
    # [sum][0](...) would call past eval-call's names: the node must be granted itself.
    rules = ARITH_SUM + "eval-syntax=subscript\n"
    out = _run(sb, project, rules, "eval", "[sum][0](range(3))")
    assert "REFUSED 1 rule violated" in out, out
    assert "add: eval-syntax=Call" in out
    out = _run(sb, project, rules + "eval-syntax=Call\n", "eval", "[sum][0](range(3))")
    assert out.strip() == "GOT 3"


def test_a_denied_call_node_refuses_every_call() -> None:
    with pytest.raises(EvalSyntaxRejected, match="add: eval-syntax=Call"):
        guarded_eval("sum(range(3))", rules="eval-syntax=DENY:Call\neval-call=sum, range")


def test_catch_all_retrying_recursion_ends_with_the_call_depth_budget(
    sb: Runner, project: Path, victims: list[subprocess.Popen[bytes]]
) -> None:
    # Plain Python retries each failed level twice: 2**1000 calls, it never ends.
    plain = subprocess.Popen([sys.executable, "-c", RETRYING])
    victims.append(plain)
    rules = FUNCTIONS + "eval-max-call-depth=20\n"
    start = time.monotonic()
    out = _run(sb, project, rules, "exec", RETRYING)
    assert time.monotonic() - start < 10
    assert out.strip() == (
        "STOPPED evaluation interrupted: eval-max-call-depth=20 (set at .py-sandboxes(3))"
    )
    assert plain.poll() is None


def test_the_call_depth_budget_is_not_caught_by_except_exception() -> None:
    rules = FUNCTIONS + "eval-max-call-depth=20\neval-syntax=assign"
    inner = RETRYING.replace("\n", "\n    ")
    source = f"caught = 0\ntry:\n    {inner}\nexcept Exception:\n    caught = 1"
    with pytest.raises(EvalInterrupted) as stop:
        guarded_eval(source, mode="exec", rules=rules)
    assert stop.value.reason == "eval-max-call-depth=20"
    assert stop.value.where == "set at <arg>(3)"
    assert not isinstance(stop.value, Exception)
    again = pickle.loads(pickle.dumps(stop.value))
    assert (again.reason, again.where) == (stop.value.reason, stop.value.where)


def test_a_generator_of_ten_billion_items_is_stopped_by_the_iteration_budget(
    sb: Runner, project: Path
) -> None:
    rules = GENERATOR + "eval-max-iterations=100_000\n"
    start = time.monotonic()
    out = _run(sb, project, rules, "eval", "sum(1 for _ in range(10**10))")
    assert time.monotonic() - start < 10
    assert out.strip() == (
        "STOPPED evaluation interrupted: eval-max-iterations=100000 (set at .py-sandboxes(3))"
    )


def test_one_long_c_call_is_stopped_by_the_timeout(victims: list[subprocess.Popen[bytes]]) -> None:
    plain = subprocess.Popen([sys.executable, "-c", "sum(range(10**12))"])
    victims.append(plain)
    rules = ARITH_SUM + "eval-max-iterations=1_000_000_000_000"  # the timeout alone stops it
    start = time.monotonic()
    with pytest.raises(EvalInterrupted) as stop:
        guarded_eval("sum(range(10**12))", rules=rules)
    elapsed = time.monotonic() - start
    assert elapsed < 2.5, elapsed
    assert stop.value.reason == "eval-timeout=1s"
    assert stop.value.where == "set at <arg>(3)"
    assert plain.poll() is None  # plain Python is still adding


def test_one_long_c_call_under_python_sb_is_stopped_by_the_timeout(
    sb: Runner, project: Path
) -> None:
    rules = ARITH_SUM + "eval-max-iterations=1_000_000_000_000\n"
    (project / ".py-sandboxes").write_text(rules + "python-import=pysandboxes, time\n")
    (project / "app.py").write_text(
        "import time, pysandboxes\nstart = time.monotonic()\ntry:\n"
        "    eval('sum(range(10**12))')\nexcept pysandboxes.EvalInterrupted as stop:\n"
        "    print('STOPPED', stop, time.monotonic() - start < 2.5)\n"
    )
    result = sb("app.py")
    assert result.stdout.strip() == (
        "STOPPED evaluation interrupted: eval-timeout=1s (set at .py-sandboxes(3)) True"
    ), result.stdout + result.stderr


def test_a_default_budget_says_it_is_the_default() -> None:
    with pytest.raises(EvalInterrupted) as stop:
        rules = "eval-syntax=arith\neval-call=sum, range\neval-max-iterations=1000"
        guarded_eval("sum(range(10**12))", rules=rules)
    assert str(stop.value) == "evaluation interrupted: eval-max-iterations=1000 (set at <arg>(3))"
    source = "def f(n):\n    return f(n + 1)\nf(0)"
    with pytest.raises(EvalInterrupted) as stop:
        guarded_eval(source, mode="exec", rules="eval-syntax=func, arith")
    assert stop.value.where == "the default; a line 'eval-max-call-depth=...' changes it"


def test_a_grant_never_honoured_here_is_named_at_start_up(sb: Runner, project: Path) -> None:
    (project / ".py-sandboxes").write_text(
        "eval-syntax=arith\neval-magic=__class__, __subclasses__\neval-attribute=f_back\n"
    )
    result = sb("-c", "print(eval('1 + 1'))")
    assert result.stdout == "2\n", result.stderr
    walk = "'__subclasses__' in 'eval-magic=__class__, __subclasses__' is never allowed here"
    assert f".py-sandboxes(2): {walk}" in result.stderr
    assert ".py-sandboxes(3): 'f_back' in 'eval-attribute=f_back' is never allowed" in result.stderr


@pytest.mark.parametrize(
    ("source", "mode"),
    [
        ("[*range(10**5)]", "eval"),
        ("{*range(10**5)}", "eval"),
        ("(*range(10**5),)", "eval"),
        ("max(*range(10**5))", "eval"),
        ("first, *rest = range(10**5)", "exec"),
        ("for first, *rest in [range(10**5)]:\n    pass", "exec"),
        ("[len(rest) for first, *rest in [range(10**5)]]", "eval"),
        ("(first, *rest), last = range(10**5), 1", "exec"),
        ("x, (y, (first, *rest)) = 1, (2, range(10**5))", "exec"),
        ("for (first, *rest), last in [(range(10**5), 1)]:\n    pass", "exec"),
        ("[len(rest) for (first, *rest), last in [(range(10**5), 1)]]", "eval"),
        ("{last: 0 for x, (first, *rest), last in [(0, range(10**5), 1)] if rest}", "eval"),
    ],
)
def test_an_unpacking_run_in_c_is_metered(source: str, mode: str) -> None:
    # Plain CPython unpacks in one C loop: [*range(10**12)] would fill the memory first.
    plain: dict[str, object] = {}
    assert (eval if mode == "eval" else exec)(source, plain) is not None or "rest" in plain
    rules = "eval-syntax=subscript, arith, assign, loop, comprehension\neval-call=max, range, len"
    rules += "\neval-max-iterations=1000"
    with pytest.raises(EvalInterrupted) as stop:
        guarded_eval(source, mode=mode, rules=rules)
    assert stop.value.reason == "eval-max-iterations=1000"
    assert guarded_eval("[*range(3)]", rules=rules) == [0, 1, 2]


def test_a_nested_starred_target_unpacks_as_plain_python_does() -> None:
    source = (
        "(a, *b), c = range(5), 1\n"
        "x, (y, (z, *w)) = 1, (2, (3, range(4)))\n"
        "for (p, *q), r in [([1, 2, 3], 4)]:\n"
        "    t = q\n"
        "[m, *(n, *o)] = range(6)\n"
        "u = [(e, f, g) for (e, *f), g in [((1, 2), 3), ((4,), 5)] if f]\n"
        "out.append((a, b, c, x, y, z, w, p, q, r, m, n, o, u))"
    )
    rules = "eval-syntax=subscript, assign, loop, comprehension\neval-call=range"
    rules += "\neval-attribute=append"
    guarded: list[object] = []
    guarded_eval(source, mode="exec", rules=rules, names={"out": guarded})
    plain: list[object] = []
    exec(source, {"out": plain})
    assert guarded == plain


def test_a_nested_starred_target_leaves_no_name_of_the_sandbox_behind(
    sb: Runner, project: Path
) -> None:
    (project / ".py-sandboxes").write_text("eval-syntax=assign, subscript\neval-call=range\n")
    code = (
        "g = {}\nexec('(a, *b), c = range(3), 1', g)\nexec('d = a', g)\n"
        "print(sorted(k for k in g if k != '__builtins__'))"
    )
    result = sb("-c", code)
    assert result.stdout == "['a', 'b', 'c', 'd']\n", result.stderr
