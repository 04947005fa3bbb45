"""A ``net=`` rule's host name is checked by hand (reading rules must not import ``re``):
the check must accept exactly what the rule format's grammar accepts, or a rule could
name something the resolver and the matcher read differently."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from pysandboxes._policy.netrules import is_host_name

#: The grammar as the rule format states it.
GRAMMAR = re.compile(r"(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_-]{1,63})*\.?")

LABEL = st.text(alphabet="aZ09_-é\n .", min_size=0, max_size=70)


@settings(max_examples=600)
@given(st.lists(LABEL, min_size=1, max_size=6), st.booleans())
def test_host_name_check_accepts_exactly_the_grammar(labels: list[str], final_dot: bool) -> None:
    text = ".".join(labels) + ("." if final_dot else "")
    assert is_host_name(text) == (GRAMMAR.fullmatch(text) is not None)


@settings(max_examples=200)
@given(st.integers(min_value=1, max_value=5), st.integers(min_value=240, max_value=260))
def test_host_name_length_limit_is_the_grammars(parts: int, length: int) -> None:
    label = "a" * max(1, length // parts - 1)
    text = ".".join([label] * parts)[:length].rstrip(".") or "a"
    assert is_host_name(text) == (GRAMMAR.fullmatch(text) is not None)


def test_ordinary_names_are_host_names() -> None:
    for name in ("api.github.com", "localhost", "a", "x-1.example.", "_srv.example.test"):
        assert is_host_name(name)
    for name in ("", ".", "-a.com", "a..b", "a b", "a.com..", "ä.com", "a\n"):
        assert not is_host_name(name)
