"""Table-driven tests of date normalisation: dates of different granularity parsed and compared;
relative dates do not parse."""

from __future__ import annotations

import pytest

from middleware.pipeline.dates import dates_match, format_date, parse_date


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("7 November 1867", "1867-11-07"), ("November 7, 1867", "1867-11-07"), ("1867-11-07", "1867-11-07"),
        ("July 2019", "2019-07"), ("1867", "1867"), ("around 1600", "1600"), ("500 BC", "-500"),
        ("the 1970s", "1970..1979"), ("the 1800s", "1800..1899"), ("the 19th century", "1801..1900"),
        ("the nineteenth century", "1801..1900"), ("2005-06", "2005..2006"), ("1901 to 1913", "1901..1913"),
        ("7 November", "--11-07"),
    ],
)  # fmt: skip
def test_parse_date(text: str, normal: str) -> None:
    parsed = parse_date(text)
    assert parsed is not None and format_date(parsed) == normal


@pytest.mark.parametrize("text", ["last year", "two years ago", "the same year", "12 years", "yesterday"])
def test_relative_dates_do_not_parse(text: str) -> None:
    assert parse_date(text) is None


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("1867", "7 November 1867", True),  # coarser granularity agrees
        ("1867", "1868", False),
        ("the 1970s", "1976", True),
        ("the 1970s", "1981", False),
        ("the 19th century", "1867", True),
        ("the 19th century", "1905", False),
        ("July 2019", "12 July 2019", True),
        ("July 2019", "August 2019", False),
        ("7 November", "7 November 1867", True),
        ("7 November", "8 November 1867", False),
        ("July", "1867", None),  # nothing to compare
        ("1901 to 1913", "1910", True),
    ],
)
def test_dates_match(a: str, b: str, expected: bool | None) -> None:
    pa, pb = parse_date(a), parse_date(b)
    assert pa is not None and pb is not None
    assert dates_match(pa, pb) is expected
