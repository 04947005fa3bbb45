"""eval-* lines folded into profiles, and the start-up warnings they give."""

from __future__ import annotations

from conftest import Parse
from pysandboxes._policy.evaluation import CORE, method_groups, profiles


def test_each_suffix_is_a_complete_profile_that_inherits_nothing(parse: Parse) -> None:
    found = profiles(
        parse(
            "eval-syntax=arith, Call\neval-call=len\neval-timeout=500ms\n"
            "eval-syntax:llm=loop\neval-max-iterations:llm=100\n"
        ).eval
    )
    assert sorted(found) == ["", "llm"]
    default, llm = found[""], found["llm"]
    assert default.syntax == CORE | {"BinOp", "UnaryOp", "Call"}
    assert default.call.allows("len")
    assert not llm.call.allows("len")
    assert (default.timeout, llm.timeout) == (0.5, 5.0)
    assert (default.max_iterations, llm.max_iterations) == (1_000_000, 100)
    assert llm.syntax == CORE | {"For", "While", "Break", "Continue"}
    assert llm.key("call") == "eval-call:llm"
    assert llm.label == "<eval:llm>"


def test_deny_always_wins_over_groups_and_patterns(parse: Parse) -> None:
    profile = profiles(
        parse(
            "eval-attribute=str-methods\neval-attribute=DENY:encode\n"
            "eval-call=s*\neval-call=DENY:setattr\neval-syntax=arith\neval-syntax=DENY:UnaryOp\n"
        ).eval
    )[""]
    assert profile.attribute.allows("upper")
    assert not profile.attribute.allows("encode")
    assert profile.call.allows("sorted")
    assert not profile.call.allows("setattr")
    assert "BinOp" in profile.syntax
    assert "UnaryOp" not in profile.syntax


def test_method_groups_come_from_the_running_interpreter_without_formatters() -> None:
    groups = method_groups()
    assert set(groups["str-methods"]) == {n for n in dir(str) if not n.startswith("_")} - {
        "format",
        "format_map",
    }
    assert "append" in groups["list-methods"]
    assert "isoformat" in groups["date-methods"]


def test_a_wide_pattern_warns_with_how_many_names_it_expands_to(parse: Parse) -> None:
    policy = parse("eval-call=s*\neval-attribute=is*\n")
    assert len(policy.warnings) == 2
    assert "'s*' in 'eval-call=s*' is a wide pattern: it expands to" in policy.warnings[0]
    count = int(policy.warnings[0].split("expands to ")[1].split()[0])
    assert count > 5


def test_granting_a_formatter_or_a_capability_builtin_warns(parse: Parse) -> None:
    policy = parse("eval-attribute=format\neval-call=getattr, len\neval-namespace=caller\n")
    text = "\n".join(policy.warnings)
    assert "eval-attribute=format lets evaluated code call str.format" in text
    assert "eval-call=getattr adds the capability builtin 'getattr'" in text
    assert "len" not in text
    assert "'eval-namespace=caller' hands evaluated code the caller's own namespace" in text
