"""The shapes of standard-library generated code, matched without regular expressions.

The dynamic-code guard lets ``collections.namedtuple``, ``unittest.mock`` and
``rlcompleter`` compile only source of the exact shape they generate (see
``test_code_generation``). The guard matches those shapes by hand, so that its modules do
not load ``re`` at every start: a matcher looser than the pattern it stands for would let
a program's own source through as generated code. Each matcher is checked against the
regular expression it replaces, on generated texts close to the shape and far from it.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from pysandboxes._inside.guards import codeshapes

PATTERNS = {
    "namedtuple": (
        re.compile(r"lambda _cls, [\w, ]*: _tuple_new\(_cls, \([\w, ]*\)\)"),
        codeshapes._namedtuple_shape,  # pyright: ignore[reportPrivateUsage]
        [
            "lambda _cls, a, b: _tuple_new(_cls, (a, b))",
            "lambda _cls, : _tuple_new(_cls, ())",
        ],
    ),
    "mock": (
        re.compile(
            r"(async )?def \w+\(\*args, \*\*kwargs\):\n    _checksig_\(\*args, \*\*kwargs\)\n"
            r"    return (await )?mock\(\*args, \*\*kwargs\)"
        ),
        codeshapes._mock_signature_shape,  # pyright: ignore[reportPrivateUsage]
        [
            "def f(*args, **kwargs):\n    _checksig_(*args, **kwargs)\n"
            "    return mock(*args, **kwargs)",
            "async def é(*args, **kwargs):\n    _checksig_(*args, **kwargs)\n"
            "    return await mock(*args, **kwargs)",
        ],
    ),
    "dotted": (
        re.compile(r"\w+(\.\w+)*"),
        codeshapes._dotted_name_shape,  # pyright: ignore[reportPrivateUsage]
        ["os.path", "a", "x_1.ß.٣"],
    ),
}

# Characters the shapes are made of, word characters of several scripts, and a few that
# a smuggled statement needs.
PIECES = st.sampled_from(
    [
        *"abc_Z09,. ():*\n;=é٣ß\u00b2\u2160\t'\"",
        "lambda _cls, ",
        ": _tuple_new(_cls, (",
        "))",
        "async ",
        "def ",
        "(*args, **kwargs):\n    _checksig_(*args, **kwargs)\n    return ",
        "await ",
        "mock(*args, **kwargs)",
        "print('RAN')",
    ]
)


@st.composite
def near_shapes(draw: st.DrawFn) -> str:
    """A known-good text with pieces inserted, replaced or cut: near the shape."""
    name = draw(st.sampled_from(sorted(PATTERNS)))
    text = draw(st.sampled_from(PATTERNS[name][2]))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 3))
        text = text[:at] + draw(st.lists(PIECES, max_size=2).map("".join)) + text[at + cut :]
    return text


def test_the_known_generated_texts_pass() -> None:
    for name, (_, shape, texts) in PATTERNS.items():
        for text in texts:
            assert shape(text), (name, text)


@settings(max_examples=400, deadline=None)
@given(st.one_of(near_shapes(), st.lists(PIECES, max_size=12).map("".join)))
def test_no_program_source_passes_as_generated_code_the_pattern_refuses(text: str) -> None:
    for name, (pattern, shape, _) in PATTERNS.items():
        assert shape(text) == (pattern.fullmatch(text) is not None), (name, text)
