"""Table-driven tests of slot normalisation: numbers with units, dates of different
granularity, names with aliases."""

from __future__ import annotations

import pytest

from middleware.pipeline.dates import dates_match, format_date, parse_date
from middleware.pipeline.names import mentions, names_match
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


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("Marie Curie", "Curie", True),  # surname only
        ("Marie Curie", "M. Curie", True),  # initials
        ("J. R. R. Tolkien", "John Ronald Reuel Tolkien", True),
        ("Marie Curie", "Maria Skłodowska-Curie", True),
        ("Marie Curie", "Pierre Curie", False),
        ("the United States", "USA", True),  # aliases and "the"
        ("NASA", "National Aeronautics and Space Administration", True),  # acronym
        ("Harvard", "Harvard University", True),
        ("The Beatles", "Beatles", True),
        ("Penélope Cruz", "Penelope Cruz", True),  # accents
        ("Paris", "Paris Hilton", False),
        ("Warsaw", "Paris", False),
        ("Austria", "Australia", False),
        ("Bombay", "Mumbai", True),
        ("Apple Inc.", "Apple", True),
    ],
)
def test_names_match(a: str, b: str, expected: bool) -> None:
    assert names_match(a, b) is expected
    assert names_match(b, a) is expected


def test_mentions_finds_surname_and_alias() -> None:
    assert mentions("Cruz has modelled for Mango.", "Penélope Cruz")
    assert mentions("He moved to the US in 1933.", "United States")
    assert not mentions("He moved to Canada.", "United States")


def test_mentions_a_generic_head_only_on_its_own() -> None:
    # 'College' of another college, 'Company' of another company, a lowercase verb: no mention
    assert not mentions("Darwin studied at Christ's College, Cambridge.", "Trinity College")
    assert not mentions("It merged with the Thomson-Houston Company in 1892.", "Westinghouse Electric Company")
    # a firm's name without 'Company' ends in no surname; a one-word firm is its word
    assert not mentions("Edison General Electric merged with another firm.", "Westinghouse Electric Company")
    assert mentions("Apple makes phones.", "Apple Inc.")
    assert mentions("Westinghouse Electric merged with it.", "Westinghouse Electric Company")
    assert not mentions("It was built to house the tomb of his wife.", "Sandringham House")
    assert mentions("He taught at the College for ten years.", "Trinity College")
    # a surname after another first name still names a Curie (the pronoun resolution picks which)
    assert mentions("It was named after Poland, Marie Curie's native country.", "Pierre Curie's")
    assert mentions("The physicist Curie shared the prize.", "Marie Curie")
    assert mentions("The canal is about 193 kilometres long.", "Suez Canal")
