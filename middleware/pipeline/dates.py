"""Dates in claims, normalised to intervals so that different granularities compare:
"1867" agrees with "7 November 1867", "the 1970s" with "1976", "the 19th century" with
"1867"; "1867" disagrees with "1868". Relative dates ("last year") do not parse."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from middleware.pipeline.quantities import parse_ordinal

Granularity = Literal["day", "month", "season", "year", "decade", "century", "range"]

_MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4, "apr": 4, "may": 5,
    "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8, "september": 9, "sep": 9, "sept": 9,
    "october": 10, "oct": 10, "november": 11, "nov": 11, "december": 12, "dec": 12,
}  # fmt: skip
_MONTH = r"(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_YEAR = r"(\d{3,4})(?:\s*(ad|ce|bc|bce|b\.c\.|a\.d\.))?"
_QUARTERS = {"q1": (1, 3), "q2": (4, 6), "q3": (7, 9), "q4": (10, 12)}
_SEASONS = {"spring": (3, 5), "summer": (6, 8), "autumn": (9, 11), "fall": (9, 11), "winter": (12, 14)}
_PART = {"early": (0.0, 0.4), "mid": (0.3, 0.7), "middle": (0.3, 0.7), "late": (0.6, 1.0)}


@dataclass(frozen=True)
class DateValue:
    """A closed interval of days, [lo, hi], counted as year*372 + month*31 + day (a
    monotone key, not a calendar), with the granularity it was written at. ``year`` is
    None for month/day-only dates ("7 November"), which compare only with each other."""

    lo: int
    hi: int
    granularity: Granularity
    year: int | None = None
    month: int | None = None
    day: int | None = None


def _key(year: int, month: int = 1, day: int = 1) -> int:
    return year * 372 + (month - 1) * 31 + (day - 1)


def _year_span(first: int, last: int, granularity: Granularity) -> DateValue:
    return DateValue(_key(first), _key(last, 12, 31), granularity, year=first if first == last else None)


def _era(year: int, era: str | None) -> int:
    return -year if era and era.replace(".", "").startswith("b") else year


def parse_date(text: str) -> DateValue | None:
    """Parse an absolute date written in English; None for relative or vague dates."""
    t = re.sub(r"\s+", " ", re.sub(r"--|[–—−]", "-", text.lower())).strip()
    t = re.sub(r"^(?:in|on|during|around|circa|c\.|about|the|of|since|by|from|until|before|after)\s+", "", t)
    for parser in (_iso, _day_month_year, _month_year, _quarter, _range, _century, _decade, _decade_word,
                   _year, _day_month):  # fmt: skip
        value = parser(t)
        if value is not None:
            return value
    return None


_DECADE_WORDS = {"twenties": 20, "thirties": 30, "forties": 40, "fifties": 50, "sixties": 60, "seventies": 70,
                 "eighties": 80, "nineties": 90}  # fmt: skip


def _decade_word(t: str) -> DateValue | None:
    """'the fifties' -> 1950..1959 (the 20th century is assumed)."""
    m = re.search(r"\b(?:(early|mid|middle|late)[- ])?(" + "|".join(_DECADE_WORDS) + r")\b", t)
    if not m:
        return None
    first = 1900 + _DECADE_WORDS[m.group(2)]
    return _part(first, first + 9, m.group(1), "decade")


def _iso(t: str) -> DateValue | None:
    m = re.search(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b", t)
    if not m:
        return None
    y, mo, d = (int(g) for g in m.groups())
    return (
        DateValue(_key(y, mo, d), _key(y, mo, d), "day", y, mo, d) if 1 <= mo <= 12 and 1 <= d <= 31 else None
    )


def _day_month_year(t: str) -> DateValue | None:
    m = re.search(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?(?: of)? {_MONTH},? {_YEAR}\b", t)
    if m:
        day, month, year, era = int(m.group(1)), _MONTHS[m.group(2)], int(m.group(3)), m.group(4)
    else:
        m = re.search(rf"\b{_MONTH} (\d{{1,2}})(?:st|nd|rd|th)?,? {_YEAR}\b", t)
        if not m:
            return None
        month, day, year, era = _MONTHS[m.group(1)], int(m.group(2)), int(m.group(3)), m.group(4)
    year = _era(year, era)
    return (
        DateValue(_key(year, month, day), _key(year, month, day), "day", year, month, day)
        if day <= 31
        else None
    )


def _month_year(t: str) -> DateValue | None:
    m = re.search(rf"\b{_MONTH},? {_YEAR}\b", t)
    if m:
        month, year = _MONTHS[m.group(1)], _era(int(m.group(2)), m.group(3))
        return DateValue(_key(year, month), _key(year, month, 31), "month", year, month)
    m = re.search(r"\b(spring|summer|autumn|fall|winter) (?:of )?(\d{4})\b", t)
    if m:
        first, last = _SEASONS[m.group(1)]
        year = int(m.group(2))
        return DateValue(_key(year, first), _key(year, last, 31), "season", year)
    return None


def _quarter(t: str) -> DateValue | None:
    m = re.search(r"\b(q[1-4]) (\d{4})\b", t)
    if not m:
        return None
    first, last = _QUARTERS[m.group(1)]
    year = int(m.group(2))
    return DateValue(_key(year, first), _key(year, last, 31), "season", year)


def _range(t: str) -> DateValue | None:
    m = re.search(r"\b(\d{4}) ?(?:-|to|until|and|through) ?(\d{2}|\d{4})\b", t)
    if not m:
        return None
    first, last_text = int(m.group(1)), m.group(2)
    last = int(last_text) if len(last_text) == 4 else first // 100 * 100 + int(last_text)
    return _year_span(first, last, "range") if last >= first else None


def _century(t: str) -> DateValue | None:
    m = re.search(r"\b(?:(early|mid|middle|late)[- ])?(\S+) century(?: (bc|bce|ad|ce))?\b", t)
    if not m:
        return None
    number = parse_ordinal(m.group(2))
    if number is None or number < 1:
        return None
    first, last = (number - 1) * 100 + 1, number * 100
    if m.group(3) and m.group(3).startswith("b"):
        first, last = -number * 100, -(number - 1) * 100 - 1
    return _part(first, last, m.group(1), "century")


def _decade(t: str) -> DateValue | None:
    m = re.search(r"\b(?:(early|mid|middle|late)[- ])?(\d{3}0)'?s\b", t)
    if not m:
        return None
    first = int(m.group(2))
    span = 99 if first % 100 == 0 else 9  # "the 1800s" usually means the century
    return _part(first, first + span, m.group(1), "decade")


def _part(first: int, last: int, part: str | None, granularity: Granularity) -> DateValue:
    if part:
        lo, hi = _PART[part]
        width = last - first + 1
        first, last = first + int(width * lo), first + int(width * hi) - (0 if hi < 1 else 1)
    return _year_span(first, last, granularity)


def _year(t: str) -> DateValue | None:
    m = re.search(rf"(?<![\d,.]){_YEAR}(?![\d,])", t)
    if not m:
        return None
    year = _era(int(m.group(1)), m.group(2))
    if not m.group(2) and not 1000 <= year <= 2100:
        return None
    return DateValue(_key(year), _key(year, 12, 31), "year", year)


def _day_month(t: str) -> DateValue | None:
    m = re.search(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?(?: of)? {_MONTH}\b", t) or re.search(
        rf"\b{_MONTH} (\d{{1,2}})(?:st|nd|rd|th)?\b", t
    )
    if not m:
        m = re.search(rf"^{_MONTH}$", t)
        if not m:
            return None
        month = _MONTHS[m.group(1)]
        return DateValue(_key(0, month), _key(0, month, 31), "month", None, month)
    groups = m.groups()
    day, month = (
        (int(groups[0]), _MONTHS[groups[1]]) if groups[0].isdigit() else (int(groups[1]), _MONTHS[groups[0]])
    )
    return DateValue(_key(0, month, day), _key(0, month, day), "day", None, month, day)


def dates_match(a: DateValue, b: DateValue) -> bool | None:
    """True if the dates are compatible at the coarser granularity (intervals overlap),
    False if they conflict, None if they cannot be compared (one has no year)."""
    if _yearless(a) or _yearless(b):
        if a.month is None or b.month is None:
            return None
        if a.month != b.month:
            return False
        return a.day == b.day if a.day and b.day else True
    return a.lo <= b.hi and b.lo <= a.hi


def _yearless(d: DateValue) -> bool:
    return d.year is None and d.granularity in ("day", "month")


def format_date(d: DateValue) -> str:
    """Readable normal form: '1867-11-07', '1867-11', '1867', '1860..1869'."""
    if d.year is not None and d.granularity == "day":
        return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"
    if d.year is not None and d.granularity == "month":
        return f"{d.year:04d}-{d.month:02d}"
    if d.year is not None and d.granularity == "year":
        return str(d.year)
    if d.year is None and d.granularity in ("day", "month"):
        return f"--{d.month:02d}" + (f"-{d.day:02d}" if d.day else "")
    return f"{d.lo // 372}..{d.hi // 372}"
