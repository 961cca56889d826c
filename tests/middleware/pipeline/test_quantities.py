"""Table-driven tests of quantity normalisation: numbers in words and digits, quantities with
units, and when two quantities match."""

from __future__ import annotations

import pytest

from middleware.pipeline.quantities import parse_number, parse_quantity, quantities_match


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1,200", 1200), ("1.2 million", 1_200_000), ("twelve", 12), ("two hundred and fifty", 250),
        ("one thousand two hundred", 1200), ("half a million", 500_000), ("a dozen", 12), ("4.5bn", 4.5e9),
        ("3 billion", 3e9), ("2,148,271", 2_148_271), ("0.5", 0.5),
    ],
)  # fmt: skip
def test_parse_number(text: str, value: float) -> None:
    parsed = parse_number(text)
    assert parsed is not None and parsed[0] == pytest.approx(value)


@pytest.mark.parametrize(
    ("text", "label", "value", "dimension"),
    [
        ("330 metres", None, 330, "length"), ("1,083 feet", None, 330.1, "length"), ("1.2 miles", None, 1931.2, "length"),
        ("6,650 km", None, 6_650_000, "length"), ("45 °C", None, 45, "temperature"), ("212 °F", None, 100, "temperature"),
        ("100 degrees Celsius", "QUANTITY", 100, "temperature"), ("5 kg", None, 5, "mass"),
        ("10 pounds", "MONEY", 10, "currency:GBP"), ("10 pounds", None, 4.536, "mass"), ("$4.5bn", "MONEY", 4.5e9, "currency:USD"),
        ("3 billion dollars", "MONEY", 3e9, "currency:USD"), ("40%", "PERCENT", 40, "percent"),
        ("15 percent", "PERCENT", 15, "percent"), ("twelve years", "DATE", 12 * 31_556_952, "time"),
        ("about 5,000", "CARDINAL", 5000, None), ("first", "ORDINAL", 1, "ordinal"), ("19th", "ORDINAL", 19, "ordinal"),
    ],
)  # fmt: skip
def test_parse_quantity(text: str, label: str | None, value: float, dimension: str | None) -> None:
    q = parse_quantity(text, label)
    assert q is not None
    assert q.value == pytest.approx(value, rel=1e-3)
    assert q.dimension == dimension


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("330 metres", "1,083 feet", True),  # unit conversion
        ("330 metres", "330 m", True),
        ("330 metres", "324 m", False),  # beyond the written precision
        ("330 metres", "328 m", True),  # 328 rounds to 330
        ("about 2.1 million", "2,148,271", True),
        ("2.1 million", "2.5 million", False),
        ("100 degrees Celsius", "212 °F", True),
        ("100 degrees Celsius", "90 degrees Celsius", False),
        ("over 1,200", "1,250", True),
        ("over 1,200", "1,000", False),
        ("less than 50", "45", True),
        ("1,200", "1200", True),
        ("174,456", "174,465", False),  # whole numbers written to the unit match exactly
        ("8,849 m", "8,848.86 m", True),  # a decimal still matches its rounding
        ("about 174,456", "174,465", True),  # an approximate one does not
        ("twelve", "12", True),
        ("twelve", "13", False),
        ("$1,200", "1,200 dollars", True),
        ("40%", "45 percent", False),
        ("5 kg", "5 km", None),  # different dimensions do not compare
        ("$5", "€5", None),  # currencies are not converted
    ],
)
def test_quantities_match(a: str, b: str, expected: bool | None) -> None:
    qa, qb = parse_quantity(a), parse_quantity(b)
    assert qa is not None and qb is not None
    assert quantities_match(qa, qb) is expected
