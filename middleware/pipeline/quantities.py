"""Numbers and quantities in claims: parse what people write ("1,200", "1.2 million",
"twelve", "about 5,000", "$4.5bn", "330 metres", "45 °C") into comparable values, and
compare two of them with a tolerance that follows the precision the text was written with.

Values are converted to one base unit per dimension (metre, kilogram, second, ...), so
"1,083 feet" matches "330 metres". Currencies are a dimension each and never converted.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

Bound = Literal["eq", "gt", "lt"]

_WORD_NUMBERS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
    "a": 1, "an": 1, "half": 0.5,
}  # fmt: skip
_SCALES = {
    "dozen": 12, "hundred": 1e2, "thousand": 1e3, "k": 1e3, "million": 1e6, "mn": 1e6, "mln": 1e6, "m": 1e6,
    "billion": 1e9, "bn": 1e9, "b": 1e9, "trillion": 1e12, "tn": 1e12, "lakh": 1e5, "crore": 1e7,
}  # fmt: skip
_ORDINAL_WORDS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
    "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13, "fourteenth": 14,
    "fifteenth": 15, "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19,
    "twentieth": 20, "twenty-first": 21, "last": -1,
}  # fmt: skip

# unit surface form -> (dimension, factor to the base unit, offset added after scaling)
_UNITS: dict[str, tuple[str, float, float]] = {}


def _units(dimension: str, factor: float, *names: str, offset: float = 0.0) -> None:
    for name in names:
        _UNITS[name] = (dimension, factor, offset)


_units("length", 1.0, "m", "metre", "metres", "meter", "meters")
_units("length", 1000.0, "km", "kilometre", "kilometres", "kilometer", "kilometers")
_units("length", 0.01, "cm", "centimetre", "centimetres", "centimeter", "centimeters")
_units("length", 0.001, "mm", "millimetre", "millimetres", "millimeter", "millimeters")
_units("length", 1609.344, "mi", "mile", "miles")
_units("length", 1852.0, "nautical mile", "nautical miles", "nmi")
_units("length", 0.3048, "ft", "foot", "feet")
_units("length", 0.0254, "inch", "inches")
_units("length", 0.9144, "yd", "yard", "yards")
_units("mass", 1.0, "kg", "kilogram", "kilograms", "kilo", "kilos")
_units("mass", 0.001, "g", "gram", "grams", "gramme", "grammes")
_units("mass", 1e-6, "mg", "milligram", "milligrams")
_units("mass", 1000.0, "t", "tonne", "tonnes", "ton", "tons", "metric ton", "metric tons")
_units("mass", 0.45359237, "lb", "lbs", "pound", "pounds")
_units("mass", 0.028349523, "oz", "ounce", "ounces")
_units("temperature", 1.0, "°c", "° c", "degrees celsius", "degree celsius", "celsius", "degrees c", "ºc")
_units("temperature", 5 / 9, "°f", "° f", "degrees fahrenheit", "fahrenheit", "degrees f", offset=-32 * 5 / 9)
_units("temperature", 1.0, "kelvin", offset=-273.15)
_units("area", 1e6, "km2", "km²", "sq km", "square kilometre", "square kilometres", "square kilometers")
_units("area", 1.0, "m2", "m²", "square metre", "square metres", "square meter", "square meters")
_units("area", 2_589_988.11, "sq mi", "square mile", "square miles")
_units("area", 0.09290304, "sq ft", "square foot", "square feet")
_units("area", 1e4, "ha", "hectare", "hectares")
_units("area", 4046.8564, "acre", "acres")
_units("volume", 0.001, "l", "litre", "litres", "liter", "liters")
_units("volume", 1e-6, "ml", "millilitre", "millilitres", "milliliter", "milliliters")
_units("volume", 1.0, "m3", "m³", "cubic metre", "cubic metres", "cubic meter", "cubic meters")
_units("volume", 0.003785411784, "gallon", "gallons", "gal")
_units("time", 1.0, "s", "sec", "second", "seconds")
_units("time", 60.0, "min", "minute", "minutes")
_units("time", 3600.0, "h", "hr", "hour", "hours")
_units("time", 86400.0, "day", "days")
_units("time", 604800.0, "week", "weeks")
_units("time", 2_629_746.0, "month", "months")
_units("time", 31_556_952.0, "year", "years", "yr", "yrs")
_units("time", 315_569_520.0, "decade", "decades")
_units("time", 3_155_695_200.0, "century", "centuries")
_units("speed", 1 / 3.6, "km/h", "kph", "kmh", "kilometres per hour", "kilometers per hour")
_units("speed", 0.44704, "mph", "miles per hour")
_units("speed", 1.0, "m/s", "metres per second", "meters per second")
_units("speed", 0.514444, "knot", "knots", "kn")
_units("power", 1.0, "w", "watt", "watts")
_units("power", 1e3, "kw", "kilowatt", "kilowatts")
_units("power", 1e6, "mw", "megawatt", "megawatts")
_units("power", 1e9, "gw", "gigawatt", "gigawatts")
_units("energy", 3.6e6, "kwh", "kilowatt-hour", "kilowatt-hours", "kilowatt hours")
_units("percent", 1.0, "%", "percent", "per cent", "pct", "percentage points", "percentage point")

_CURRENCY_SYMBOLS = {
    "$": "USD",
    "us$": "USD",
    "€": "EUR",
    "£": "GBP",
    "¥": "JPY",
    "₹": "INR",
    "a$": "AUD",
    "c$": "CAD",
}
_CURRENCY_WORDS = {
    "dollar": "USD", "dollars": "USD", "usd": "USD", "euro": "EUR", "euros": "EUR", "eur": "EUR",
    "pound": "GBP", "pounds": "GBP", "pounds sterling": "GBP", "gbp": "GBP", "yen": "JPY", "jpy": "JPY",
    "rupee": "INR", "rupees": "INR", "yuan": "CNY", "renminbi": "CNY", "francs": "CHF", "franc": "CHF",
}  # fmt: skip
_UNIT_NAMES = sorted([*_UNITS, *_CURRENCY_WORDS], key=len, reverse=True)
_APPROX = (
    "about",
    "around",
    "approximately",
    "roughly",
    "nearly",
    "almost",
    "some",
    "circa",
    "c.",
    "ca.",
    "~",
)
_LOWER = ("over", "more than", "at least", "above", "upwards of", "in excess of", "exceeding", "beyond")
_UPPER = ("under", "less than", "fewer than", "at most", "below", "up to", "no more than")

_NUMERAL = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class Quantity:
    """A number as written, normalised. ``value`` is in the dimension's base unit;
    ``raw`` is the number as written (before unit conversion); ``step`` is the
    resolution it was written with, in base units (``330`` -> 10, ``2.1 million`` -> 1e5)."""

    value: float
    raw: float
    dimension: str | None = None  # length, mass, ..., "currency:USD", "percent", "ordinal", None (bare)
    unit: str | None = None
    step: float = 1.0
    approx: bool = False
    bound: Bound = "eq"


def _numeral_step(integer: str, fraction: str | None) -> float:
    """The resolution a numeral was written with: '330' -> 10, '1,200' -> 100, '2.15' -> 0.01."""
    if fraction:
        return 10.0 ** -len(fraction)
    digits = integer.replace(",", "")
    if len(digits) <= 1 or set(digits) == {"0"}:
        return 1.0
    trailing = len(digits) - len(digits.rstrip("0"))
    return 10.0**trailing


def parse_number(text: str) -> tuple[float, float] | None:
    """Parse the first number in ``text`` into (value, step); scale words apply
    ("1.2 million" -> (1.2e6, 1e5)). Word numbers up to the thousands work
    ("two hundred and fifty"). Returns None when there is no number."""
    lowered = text.lower().replace("\u2009", "").replace("\xa0", " ")
    match = _NUMERAL.search(lowered)
    if match:
        value = float(match.group(1).replace(",", "") + ("." + match.group(2) if match.group(2) else ""))
        step = _numeral_step(match.group(1), match.group(2))
        rest = lowered[match.end() :].lstrip()
        scale_word = re.match(r"([a-z]+)\b", rest)
        if not scale_word:  # "4.5bn" is written without a space
            scale_word = re.match(r"(bn|mn|tn|k)\b", rest)
        if scale_word and scale_word.group(1) in _SCALES and scale_word.group(1) not in ("m", "b"):
            scale = _SCALES[scale_word.group(1)]
            return value * scale, step * scale
        return value, step
    return _parse_word_number(lowered)


def _parse_word_number(lowered: str) -> tuple[float, float] | None:
    total, current, seen = 0.0, 0.0, False
    step = 1.0
    for word in re.findall(r"[a-z]+", lowered.replace("-", " ")):
        if word in _WORD_NUMBERS and not (word in ("a", "an") and seen):
            current += _WORD_NUMBERS[word]
            seen = True
        elif word in _SCALES and word not in ("k", "m", "b", "mn", "bn", "tn", "mln") and seen:
            scale = _SCALES[word]
            if scale >= 1000:
                total += (current or 1) * scale
                step = scale
                current = 0.0
            else:
                current = (current or 1) * scale
        elif word in ("and", "a", "an") and seen:
            continue
        elif seen:
            break
    if not seen or (total == 0 and current in (1,) and re.fullmatch(r"\s*an?\s*", lowered)):
        return None
    value = total + current
    if value == 0 and "zero" not in lowered:
        return None
    return value, (step if current == 0 else 1.0)


def parse_ordinal(text: str) -> int | None:
    """'first' -> 1, '19th' -> 19, 'twenty-first' -> 21."""
    lowered = text.lower().strip()
    match = re.search(r"(\d+)(?:st|nd|rd|th)\b", lowered)
    if match:
        return int(match.group(1))
    for word in re.findall(r"[a-z]+(?:-[a-z]+)?", lowered):
        if word in _ORDINAL_WORDS:
            return _ORDINAL_WORDS[word]
    return None


def find_unit(after: str, money: bool = False) -> tuple[str, str] | None:
    """The unit written right after a number (``after`` is the text following it; scale
    words are skipped): returns (unit name, dimension). Currencies give ``currency:XXX``."""
    rest = re.sub(r"\s+", " ", after.lower()).strip()
    rest = re.sub(r"^(?:(?:hundred|thousand|million|billion|trillion|bn|mn|tn|k)\b\s*)+", "", rest)
    for name in _UNIT_NAMES:
        if rest.startswith(name) and (len(rest) == len(name) or not rest[len(name)].isalnum()):
            if name in _CURRENCY_WORDS and (money or name not in _UNITS):
                return name, f"currency:{_CURRENCY_WORDS[name]}"
            return name, _UNITS[name][0]
    return None


def _currency_symbol(text: str) -> tuple[str, str] | None:
    for symbol in sorted(_CURRENCY_SYMBOLS, key=len, reverse=True):
        if symbol in text:
            return symbol, f"currency:{_CURRENCY_SYMBOLS[symbol]}"
    return None


def parse_quantity(text: str, label: str | None = None) -> Quantity | None:
    """Parse a number with its unit, qualifier (about/over/under) and resolution.
    ``label`` is the spaCy entity label when known (MONEY makes 'm' mean million)."""
    lowered = text.lower().strip()
    if label == "ORDINAL":
        ordinal = parse_ordinal(lowered)
        return None if ordinal is None else Quantity(float(ordinal), float(ordinal), "ordinal")
    money = label == "MONEY" or any(s in lowered for s in _CURRENCY_SYMBOLS)
    parsed = parse_number(lowered)
    if parsed is None:
        return None
    value, step = parsed
    if money:
        scale = re.search(r"\d\s*(m|b|bn|mn|k|tn)\b", lowered)
        if scale and scale.group(1) in ("m", "b"):
            value, step = value * _SCALES[scale.group(1)], step * _SCALES[scale.group(1)]
    number_match = _NUMERAL.search(lowered)
    after = lowered[number_match.end() :] if number_match else _after_word_number(lowered)
    unit = _currency_symbol(lowered) or find_unit(after, money)
    dimension, unit_name, base_value, base_step = None, None, value, step
    if unit is not None:
        unit_name, dimension = unit
        if unit_name in _UNITS and not dimension.startswith("currency"):
            _, factor, offset = _UNITS[unit_name]
            base_value, base_step = value * factor + offset, step * factor
    elif label == "PERCENT":
        dimension = "percent"
    return Quantity(
        value=base_value,
        raw=value,
        dimension=dimension,
        unit=unit_name,
        step=base_step,
        approx=any(_starts_with(lowered, word) for word in _APPROX),
        bound="gt" if any(_starts_with(lowered, w) for w in _LOWER) else
        "lt" if any(_starts_with(lowered, w) for w in _UPPER) else "eq",
    )  # fmt: skip


def _after_word_number(lowered: str) -> str:
    """The text after the last number word ('twelve years' -> ' years')."""
    words = list(re.finditer(r"[a-z]+", lowered))
    last = None
    for match in words:
        if match.group() in _WORD_NUMBERS or match.group() in _SCALES or match.group() == "and":
            last = match
        elif last is not None:
            break
    return lowered[last.end() :] if last else lowered


def _starts_with(text: str, word: str) -> bool:
    return text.startswith(word) and (len(text) == len(word) or not text[len(word)].isalpha())


def quantities_match(a: Quantity, b: Quantity) -> bool | None:
    """True if the two quantities agree within the precision they were written with,
    False if they disagree, None if they cannot be compared (different dimensions).
    A bare number compares with a unit-bearing one by its written value."""
    if a.dimension is not None and b.dimension is not None:
        if a.dimension != b.dimension:
            return None
        x, y = a.value, b.value
        converted = a.unit != b.unit
        step = max(a.step, b.step)
    else:
        if "ordinal" in (a.dimension, b.dimension) and a.dimension != b.dimension:
            return None
        x, y = a.raw, b.raw
        converted = False
        step = max(_raw_step(a), _raw_step(b))
    # half the written resolution, but a round number ("100", "1,000") is not read as +-50%;
    # two whole numbers written to the unit in the same unit ('patent 174,456') match exactly
    exact = not converted and all(_raw_step(q) <= 1 and q.raw.is_integer() and not q.approx for q in (a, b))
    floor = 0.0 if exact else 0.015 if converted else 0.005
    tolerance = max(min(step / 2, abs(x) * 0.05), abs(x) * floor, 1e-9)
    if a.approx or b.approx:
        tolerance = max(tolerance * 2, abs(x) * 0.05)
    if a.bound == "gt" or b.bound == "gt" or a.bound == "lt" or b.bound == "lt":
        return _bounds_agree(a, x, b, y, tolerance)
    return abs(x - y) <= tolerance


def _raw_step(q: Quantity) -> float:
    if q.dimension is None or q.dimension in ("ordinal", "percent") or q.dimension.startswith("currency"):
        return q.step
    _, factor, _ = _UNITS.get(q.unit or "", (None, 1.0, 0.0))
    return q.step / factor if factor else q.step


def _bounds_agree(a: Quantity, x: float, b: Quantity, y: float, tolerance: float) -> bool:
    """'over 1,200' agrees with 1,250 and with 'over 1,000'; disagrees with 1,000."""
    if a.bound == b.bound:
        return True if a.bound != "eq" else abs(x - y) <= tolerance
    lo_a, hi_a = _interval(a.bound, x)
    lo_b, hi_b = _interval(b.bound, y)
    return lo_a <= hi_b + tolerance and lo_b <= hi_a + tolerance


def _interval(bound: Bound, value: float) -> tuple[float, float]:
    if bound == "gt":
        return value, math.inf
    if bound == "lt":
        return -math.inf, value
    return value, value


def format_quantity(q: Quantity) -> str:
    """A short human form for reports ('330 metres', '1200')."""
    number = f"{q.raw:,.10g}"
    return f"{number} {q.unit}" if q.unit else number
