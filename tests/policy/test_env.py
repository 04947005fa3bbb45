"""The sandbox environment: exactly what env= / unenv= produce from the host."""

from __future__ import annotations

import pytest

from conftest import Parse
from pysandboxes import ConfigSyntaxError
from pysandboxes._policy.envres import resolve_env

HOST = {
    "HOME": "/home/u",
    "OPENAI_API_KEY": "sk-openai",
    "ANTHROPIC_API_KEY": "sk-anthropic",
    "X_A": "1",
    "X_B": "2",
    "A_B": "ab",
    "EMPTY": "",
}

ENV_CASES = [
    ("", {}),  # no rule: no variable at all
    ("env=USER=sandbox", {"USER": "sandbox"}),
    ("env=SPACED=a b c", {"SPACED": "a b c"}),
    ('env=Q="a # b"', {"Q": '"a # b"'}),  # quotes kept, # inside them is not a comment
    ("env=EMPTYVAL=", {"EMPTYVAL": ""}),  # an empty literal exists
    ("env=H=${HOME}", {"H": "/home/u"}),
    ("env=ABSENT=${NOPE}", {}),  # empty expansion: absent, so getenv defaults work
    ("env=ABSENT=${EMPTY}", {}),
    ("env=D=${NOPE:-fallback}", {"D": "fallback"}),
    ("env=X_*=set-${X_*}", {"X_A": "set-1", "X_B": "set-2"}),
    (
        "env=*_API_KEY=${*_API_KEY}",
        {"OPENAI_API_KEY": "sk-openai", "ANTHROPIC_API_KEY": "sk-anthropic"},
    ),
    ("env=*_KEY=fixed", {"OPENAI_API_KEY": "fixed", "ANTHROPIC_API_KEY": "fixed"}),
    # an exact name beats any pattern, whatever the order
    (
        "env=OPENAI_API_KEY=override\nenv=*_API_KEY=${*_API_KEY}",
        {"OPENAI_API_KEY": "override", "ANTHROPIC_API_KEY": "sk-anthropic"},
    ),
    # the pattern with more fixed characters wins
    (
        "env=*_KEY=short\nenv=*_API_KEY=long",
        {"OPENAI_API_KEY": "long", "ANTHROPIC_API_KEY": "long"},
    ),
    # unenv wins over everything, wherever the line is
    ("unenv=OPENAI_API_KEY\nenv=*_API_KEY=${*_API_KEY}", {"ANTHROPIC_API_KEY": "sk-anthropic"}),
    ("env=H=${HOME}\nunenv=H", {}),
    ("env=*=${*}\nunenv=*_API_KEY\nunenv=X_*", {"HOME": "/home/u", "A_B": "ab"}),
]


@pytest.mark.parametrize(("rules", "expected"), ENV_CASES)
def test_env_resolution(parse: Parse, rules: str, expected: dict[str, str]) -> None:
    assert resolve_env(parse(rules + "\n"), HOST) == expected


def test_equally_specific_patterns_with_different_values_are_an_error(parse: Parse) -> None:
    policy = parse("env=*_B=two\nenv=A_*=one\n")
    with pytest.raises(ConfigSyntaxError) as caught:
        resolve_env(policy, HOST)
    (issue,) = caught.value.errors
    assert "give A_B different values and are as specific" in issue.message
    assert "add env=A_B=..." in issue.message
    # no such host variable: no conflict
    assert resolve_env(policy, {"HOME": "/h"}) == {}


def test_env_values_come_from_the_host_at_resolution_not_parse(parse: Parse) -> None:
    policy = parse("env=TOKEN=${TOKEN}\n")
    assert resolve_env(policy, {"TOKEN": "a"}) == {"TOKEN": "a"}
    assert resolve_env(policy, {"TOKEN": "b"}) == {"TOKEN": "b"}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("env=NOEQUAL", "missing '=' in 'env=NOEQUAL'"),
        ("env==value", "the variable name is empty"),
        ("env=X=${A:B}", "invalid variable reference"),
        ("env=X=${UNCLOSED:-x", "unclosed variable reference"),
        ("unenv=", "expected unenv=NAME"),
    ],
)
def test_bad_env_rules(parse: Parse, line: str, message: str) -> None:
    with pytest.raises(ConfigSyntaxError, match=message.replace("$", r"\$").replace("{", r"\{")):
        parse(line + "\n")
