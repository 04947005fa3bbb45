"""eval-* keys: parsed and validated (the eval guard, _inside/evaluation, enforces them)."""

from __future__ import annotations

import pytest

from conftest import Parse
from pysandboxes import ConfigSyntaxError


def test_list_and_scalar_keys(parse: Parse) -> None:
    policy = parse(
        "eval-syntax=arith, compare, Constant\n"
        "eval-call=len, range\n"
        "eval-attribute=DENY:encode, format\n"
        "eval-timeout=500ms\n"
        "eval-max-alloc=50MB\n"
        "eval-max-iterations=100_000\n"
        "eval-namespace=closed\n"
        "eval-syntax:llm=loop\n"
    )
    found = {(r.key, r.profile, r.deny, r.values) for r in policy.eval}
    assert found == {
        ("syntax", "", False, ("arith", "compare", "Constant")),
        ("call", "", False, ("len", "range")),
        ("attribute", "", True, ("encode", "format")),
        ("timeout", "", False, (0.5,)),
        ("max-alloc", "", False, (50_000_000,)),
        ("max-iterations", "", False, (100_000,)),
        ("namespace", "", False, ("closed",)),
        ("syntax", "llm", False, ("loop",)),
    }


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("eval-syntax=lop", "unknown syntax token 'lop', closest known token is 'loop'"),
        ("eval-syntax=Num", "'Num' is a deprecated ast node"),
        ("eval-syntax=ari*", "eval-syntax takes no pattern"),
        ("eval-call=len, DENY:eval", "DENY: applies to a whole line"),
        ("eval-timeout=10MB", "expected a duration"),
        ("eval-max-alloc=ten", "expected a size"),
        ("eval-max-depth=-1", "expected a whole number"),
        ("eval-namespace=open", "expected adaptive | closed | caller"),
        ("eval-timeout=DENY:5", "takes one value"),
        ("eval-sintax=arith", "did you mean 'eval-syntax'?"),
    ],
)
def test_bad_eval_lines(parse: Parse, line: str, message: str) -> None:
    with pytest.raises(ConfigSyntaxError) as caught:
        parse(line + "\n")
    assert message in str(caught.value)


def test_scalar_twice_in_one_profile(parse: Parse) -> None:
    with pytest.raises(ConfigSyntaxError, match="set twice in this profile"):
        parse("eval-timeout=1s\neval-timeout=2s\n")
    parse("eval-timeout=1s\neval-timeout:llm=2s\n")  # another profile: fine


def test_raw_dynamic_code_grant_voids_eval_lines(parse: Parse) -> None:
    with pytest.raises(ConfigSyntaxError) as caught:
        parse("python-api=ALLOW:dynamic-code\neval-syntax=arith\neval-call=len\n")
    assert len(caught.value.errors) == 2
    assert "is never applied" in caught.value.errors[0].message
