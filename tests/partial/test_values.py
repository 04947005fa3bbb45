"""Values cross both ways with their exact types: drawn by hypothesis from the whole
value list of design §6, nested (dict keys and set members too), sent as arguments and
returned as results of a real tools module (``valuetools``), under rules that grant the
tools module and its own imports only, and with no refusal. The application's own
objects cross as arguments; as results they need ``remote-result-mode=objects``.

The calls run in this test process, as an application makes them."""

from __future__ import annotations

import datetime
import decimal
import fractions
import ipaddress
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import valuetools  # type: ignore[import-not-found]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pysandboxes import sandboxes
from pysandboxes.errors import RuleResultRefusedError

RULES = valuetools.RULES

_zones = st.builds(
    datetime.timezone,
    st.timedeltas(min_value=datetime.timedelta(hours=-23), max_value=datetime.timedelta(hours=23)),
)
_hashable_atoms = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(allow_nan=False),
    st.complex_numbers(allow_nan=False),
    st.text(max_size=20),
    st.binary(max_size=20),
    st.dates(),
    st.times(timezones=st.none() | _zones),
    st.datetimes(timezones=st.none() | _zones),
    st.timedeltas(),
    _zones,
    st.decimals(allow_nan=False),
    st.fractions(),
    st.uuids(),
    st.ip_addresses(),
    st.ip_addresses(v=4).map(lambda a: ipaddress.ip_network(f"{a}/32")),
    st.ip_addresses(v=6).map(lambda a: ipaddress.ip_interface(f"{a}/64")),
    st.builds(range, st.integers(-50, 50), st.integers(-50, 50), st.integers(1, 5)),
    st.text("abc/._-", min_size=1, max_size=12).map(Path),
    st.text("xyz/", min_size=1, max_size=8).map(PurePosixPath),
)
_atoms = _hashable_atoms | st.binary(max_size=20).map(bytearray)
_hashables = st.recursive(
    _hashable_atoms,
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=6,
)
VALUES = st.recursive(
    _atoms,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(_hashables, inner, max_size=4),
        st.sets(_hashables, max_size=4),
        st.frozensets(_hashables, max_size=4),
    ),
    max_leaves=12,
)
APP_OBJECTS = st.one_of(
    st.builds(valuetools.Point, st.integers(), _hashable_atoms),
    st.builds(valuetools.Plain, _atoms),
    st.sampled_from(list(valuetools.Color)),
    st.builds(valuetools.Pair, _hashable_atoms, _hashable_atoms),
)


def same(sent: Any, back: Any) -> bool:
    """Equal, and of the same type at every level (``1 == 1.0 == True`` is not enough)."""
    if type(sent) is not type(back):
        return False
    if isinstance(sent, list | tuple):
        return len(sent) == len(back) and all(map(same, sent, back))
    if isinstance(sent, dict):
        keys = {k: k for k in back}
        return sent.keys() == back.keys() and all(
            same(k, keys[k]) and same(v, back[k]) for k, v in sent.items()
        )
    if isinstance(sent, set | frozenset):
        return sent == back and sorted(map(repr, map(type, sent))) == sorted(
            map(repr, map(type, back))
        )
    return bool(sent == back)


_SETTINGS = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_SETTINGS
@given(value=VALUES)
def test_values_round_trip_as_argument_and_result(sandboxed: sandboxes, value: Any) -> None:
    back = valuetools.echo(value)
    assert same(value, back), (value, back)
    # In a dict key and a set, too (where hashable).
    try:
        hash(value)
    except TypeError:
        return
    assert same({value: [value]}, valuetools.echo({value: [value]}))
    assert same(frozenset({value}), valuetools.echo(frozenset({value})))


@_SETTINGS
@given(value=APP_OBJECTS, around=st.sampled_from(["alone", "in a list", "as a dict value"]))
def test_the_applications_own_objects_cross_as_arguments(
    sandboxed: sandboxes, value: Any, around: str
) -> None:
    sent: Any = {"alone": value, "in a list": [value], "as a dict value": {"k": value}}[around]
    name, shown = valuetools.seen(sent)
    assert (name, shown) == (type(sent).__qualname__, repr(sent))


def test_a_bound_method_and_a_value_of_each_kind_work_as_the_usage_page_says(
    sandboxed: sandboxes,
) -> None:
    plain = valuetools.Plain(uuid.UUID(int=7))
    assert valuetools.Plain.doubled(plain, 2) == [uuid.UUID(int=7)] * 2
    assert valuetools.Plain(decimal.Decimal("1.5")).doubled(3) == [decimal.Decimal("1.5")] * 3
    for value in (
        datetime.datetime(2024, 2, 29, 12, tzinfo=datetime.UTC),
        decimal.Decimal("3.14"),
        fractions.Fraction(1, 3),
        uuid.uuid4(),
        ipaddress.IPv4Network("10.0.0.0/8"),
        range(3),
        complex(1, 2),
    ):
        assert same(value, valuetools.echo(value))


def test_a_path_argument_reaches_a_file_the_rules_expose(tmp_path: Path) -> None:
    data = tmp_path / "data.txt"
    data.write_text("hello")
    rules = tmp_path / "rules"
    rules.write_text(RULES + f"expose-ro={tmp_path}\n")
    with sandboxes(sandboxes_config=rules):
        assert valuetools.size(data) == 5


def test_the_applications_objects_as_results_need_objects_mode(
    sandboxed: sandboxes, tmp_path: Path
) -> None:
    point = valuetools.Point(1, "y")
    with pytest.raises(RuleResultRefusedError, match="remote-result-mode=objects"):
        valuetools.echo(point)
    rules = tmp_path / "objects"
    rules.write_text(RULES + "remote-result-mode=objects\n")
    with sandboxes(sandboxes_config=rules, profile=None):
        for value in (point, valuetools.Color.GREEN, valuetools.Pair(1, 2)):
            assert same(value, valuetools.echo(value))


def test_learning_gives_the_same_values_and_learns_no_decoding(tmp_path: Path) -> None:
    learned = tmp_path / "learned.py-sandboxes"
    rules = tmp_path / "rules"
    rules.write_text(RULES)
    with sandboxes(sandboxes_config=rules, learn=str(learned)):
        path = Path("x.txt")
        assert same(path, valuetools.echo(path))
        assert same([datetime.date(2020, 1, 1)], valuetools.echo([datetime.date(2020, 1, 1)]))
        assert valuetools.seen(valuetools.Point(1, 2)) == ("Point", "Point(x=1, y=2)")
        with pytest.raises(valuetools.AppError) as raised:
            valuetools.fail("app")
        assert raised.value.code == 3
    text = learned.read_text() if learned.exists() else ""
    assert "pickle" not in text
    assert "deserialization" not in text


def test_the_decoding_of_arguments_is_not_the_functions_deserialization(tmp_path: Path) -> None:
    import json
    import pickle

    from pysandboxes import RuleApiPermissionError

    rules = tmp_path / "rules"
    rules.write_text(RULES + "python-import=pickle\n")
    log = tmp_path / "audit.jsonl"
    payload = pickle.dumps(Path("x"))
    with sandboxes(sandboxes_config=rules, audit_log=str(log)):
        # Arguments that name classes cross with no deserialization rule...
        assert same(Path("x"), valuetools.echo(Path("x")))
        # ...while the function's own pickle.loads is refused, as the rules say.
        with pytest.raises(RuleApiPermissionError, match="deserialization"):
            valuetools.unpickle(payload)
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    pickled = [e for e in entries if "pickle" in json.dumps(e)]
    assert len(pickled) == 1, pickled  # the function's call, and nothing of the framework's
