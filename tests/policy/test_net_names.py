"""Names matched as names: ``net=ALLOW|tcp|*.githubusercontent.com|443|OUT`` covers the
names below it, whole labels only, and nothing else; exact names ignore case and one
final dot. A name that merely ends with the suffix (``evilgithubusercontent.com``), or
the suffix itself, is not covered: a pattern is a list of names, never a substring."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysandboxes._policy.model import NetRule
from pysandboxes._policy.netjudge import NetJudge
from pysandboxes._policy.netnames import NameIndex, matches, normalise
from pysandboxes._policy.parser import parse_policy
from pysandboxes.errors import ConfigSyntaxError

LABEL = st.text(alphabet="abcXYZ019-_", min_size=1, max_size=10).filter(
    lambda label: not label.startswith("-")
)
SUFFIX = st.lists(LABEL, min_size=2, max_size=4).map(".".join)
NAME = st.lists(LABEL, min_size=1, max_size=5).map(".".join)


def rules(*lines: str) -> tuple[NetRule, ...]:
    def documentation(host: str) -> list[str]:
        return ["192.0.2.10"]  # every exact name pins there: no resolver is asked

    return parse_policy(
        None, extra_rules=list(lines), cwd="/", env={}, resolve_host=documentation
    ).net


def reference(pattern: str, name: str) -> bool:
    """The pattern as the rule format states it, by regular expression."""
    suffix = re.escape(normalise(pattern)[2:])
    return re.fullmatch(rf"(?:[^.]+\.)+{suffix}", normalise(name)) is not None


@settings(max_examples=500)
@given(SUFFIX, NAME, st.booleans(), st.booleans())
def test_a_pattern_matches_exactly_the_names_below_its_suffix(
    suffix: str, name: str, upper: bool, final_dot: bool
) -> None:
    pattern = normalise(f"*.{suffix}")
    candidates = [name, f"{name}.{suffix}", suffix, f"{name}{suffix}", f"{suffix}.{name}"]
    for candidate in candidates:
        asked = (candidate.upper() if upper else candidate) + ("." if final_dot else "")
        expected = reference(pattern, asked)
        assert matches(pattern, normalise(asked)) == expected, (pattern, asked)
        index = NameIndex(rules(f"net=ALLOW|tcp|*.{suffix}|443|OUT"))
        assert bool(index.rules(asked)) == expected, (pattern, asked)
    assert matches(pattern, normalise(f"{name}.{suffix}"))


@settings(max_examples=300)
@given(NAME, st.booleans(), st.booleans())
def test_an_exact_name_ignores_case_and_one_final_dot(
    name: str, upper: bool, final_dot: bool
) -> None:
    name += ".test"  # "0.0" would be an address (inet_aton's spellings)
    index = NameIndex(rules(f"net=ALLOW|tcp|{name}|443|OUT"))
    asked = (name.upper() if upper else name) + ("." if final_dot else "")
    assert index.find("tcp", asked, 443, "OUT") is not None
    assert index.find("tcp", "x" + asked, 443, "OUT") is None
    assert index.find("tcp", "sub." + asked, 443, "OUT") is None
    assert index.find("tcp", asked, 80, "OUT") is None
    assert index.find("udp", asked, 443, "OUT") is None


def test_cant_reach_a_look_alike_of_an_allowed_suffix() -> None:
    judge = NetJudge(rules("net=ALLOW|tcp|*.githubusercontent.com|443|OUT"))
    public = "192.0.2.10"
    assert judge.judge("tcp", public, 443, "OUT", name="raw.githubusercontent.com").allowed
    assert judge.judge("tcp", public, 443, "OUT", name="a.b.GitHubUserContent.com.").allowed
    lookalikes = ("githubusercontent.com", "evilgithubusercontent.com", "githubusercontent.com.x")
    for name in lookalikes:
        verdict = judge.judge("tcp", public, 443, "OUT", name=name)
        assert not verdict.allowed, name
        assert verdict.fix == f"net=ALLOW|tcp|{name}|443|OUT"
    # Without a name, the pattern covers no address at all.
    assert not judge.judge("tcp", public, 443, "OUT").allowed


def test_a_wildcard_name_never_reaches_a_defaulted_address() -> None:
    judge = NetJudge(rules("net=ALLOW|tcp|*.example.test|443|OUT"))
    assert judge.judge("tcp", "192.0.2.10", 443, "OUT", name="api.example.test").allowed
    for address in ("127.0.0.1", "169.254.169.254", "::ffff:10.0.0.1", "fd00:ec2::254"):
        verdict = judge.judge("tcp", address, 443, "OUT", name="api.example.test")
        assert verdict.address_class is not None, address


def test_a_denied_pattern_wins_over_an_allowed_name() -> None:
    judge = NetJudge(rules("net=ALLOW|tcp|*|443|OUT", "net=DENY|tcp|*.tracker.example.test|*|OUT"))
    verdict = judge.judge("tcp", "192.0.2.10", 443, "OUT", name="a.tracker.example.test")
    assert not verdict.allowed
    assert verdict.rule is not None
    assert judge.judge("tcp", "192.0.2.10", 443, "OUT", name="tracker.example.test").allowed


def test_a_pattern_is_parsed_unpinned() -> None:
    (rule,) = rules("net=ALLOW|tcp|*.GitHubUserContent.com.|443|OUT")
    assert (rule.host, rule.networks) == ("*.githubusercontent.com", ())
    (everything,) = rules("net=ALLOW|tcp|*|443|OUT")
    assert everything.host is None
    assert len(everything.networks) == 2


@pytest.mark.parametrize(
    "network", ["api.*.com", "a*.example.com", "*.com", "**.example.com", "*example.com", "*."]
)
def test_bad_patterns_are_errors(network: str) -> None:
    with pytest.raises(ConfigSyntaxError, match="wildcard"):
        rules(f"net=ALLOW|tcp|{network}|443|OUT")
