import pytest
from pkg.calc import add, mean


def test_add() -> None:
    assert add(2, 3) == 5


@pytest.mark.parametrize(("values", "expected"), [([1.0, 3.0], 2.0), ([4.0], 4.0)])
def test_mean(values: list[float], expected: float) -> None:
    assert mean(values) == expected
