"""Opening hours read as a schedule: a claim's "open from 11 am to 10 pm, Monday through
Sunday" against the ``hours`` of structured evidence (``readable`` renders them
``- hours — Monday: 11:00-20:00 (11:00 AM to 8:00 PM); ...``).

The bundled NLI model reads such a line as a bag of times and days: it neither confirms nor
refutes a range, and a claim of "seven days a week" against five listed days goes through.
RAGTruth's data-to-text answers get the hours wrong often (a closing time, a day the data
does not list, "0:00-0:00", which its annotators read as closed), so the schedule is read
here instead:

- ``field_hours``: the claim gives a time range ("from 7 am to 2 pm", "11:00 AM - 10:00 PM")
  to days ("Monday through Friday", "weekdays", "on Saturdays and Sundays", "seven days a
  week") and the data's hours for one of those days differ; or the claim says the place is
  open every day ("seven days a week", "open daily", "Monday to Sunday") and the data does
  not list a day. A range goes with the days written right after it ("... to 10 pm on
  weekdays", "..., Monday through Sunday") or else right before it ("Monday to Friday from
  ...", "On Saturdays, they open from ..."); days the sentence names for something else are
  exceptions ("... Monday through Sunday, with extended hours until 10 pm on Fridays"), and
  "every day" with a range of its own days only says the place opens daily. A partial range
  ("until 11 pm on weekends") is read for its closing time. A day at 0:00-0:00 is not read
  (RAGTruth's annotators read it as closed in one answer and as open all day in another).

A finding is a located contradiction (kind ``date``). It carries a replacement in two cases,
else none (flagged, not rewritten):

- a time: every day of the range has the same hours and one end of the claim's range differs;
  the data's time, written as the claim writes times ("10pm" -> "8pm");
- a day: the days are written as one span "A through B" (not a list, not "seven days a week"),
  exactly one day has other hours, it is A or B, and the span without it keeps at least two
  days, each at exactly the claim's hours. The finding is that day's word, and the
  replacement the next day in, written alike ("from Monday to Saturday from 17:00-21:00"
  against a Monday of 17:30-23:00: "Monday" -> "Tuesday"; "Saturdays" -> "Fridays", "Sat"
  -> "Fri"). A day the data does not list or gives 0:00-0:00 is not moved.

``swaps_hours`` is the edit gate's check of either swap: the edit is the finding's own
replacement (or the part of it that differs), read against the schedule line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from middleware.pipeline.verifiers.base import Mismatch, passages_from_texts
from middleware.types import Passage

HOURS_RULES = {
    "field_hours": "a time range or an every-day opening the claim gives days that the evidence's structured "
    "opening hours state otherwise",
}
DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_DAY = r"(?:mon(?:day)?|tue(?:s(?:day)?)?|wed(?:nesday)?|thu(?:rs(?:day)?)?|fri(?:day)?|sat(?:urday)?|sun(?:day)?)s?"
_SCHEDULE = re.compile(r"^(?:- )?hours — (.+)$", re.MULTILINE | re.IGNORECASE)
_DAY_HOURS = re.compile(r"\b(" + "|".join(DAYS) + r"): (\d{1,2}):(\d{2})-(\d{1,2}):(\d{2})", re.IGNORECASE)
_TIME = r"(?:(\d{1,2})(?::(\d{2}))?\s*([ap])(?:\.\s*m\.|\s*m\b)|(\d{1,2}):(\d{2})(?!\s*[ap]\.?\s*m\b)|(noon|midnight))"
_RANGE = re.compile(rf"(?P<from>{_TIME}|\d{{1,2}}(?::\d{{2}})?)\s*(?:to|until|till|-|–|—)\s*(?P<to>{_TIME})",
                    re.IGNORECASE)  # fmt: skip
_UNTIL = re.compile(rf"\b(?:until|till|closes? at|closing at)\s+(?P<to>{_TIME})", re.IGNORECASE)
_SPAN = re.compile(rf"\b(?P<a>{_DAY})\s*(?:through|thru|to|until|till|-|–)\s*(?P<b>{_DAY})\b", re.IGNORECASE)
_SINGLE = re.compile(rf"\b{_DAY}\b", re.IGNORECASE)
_WEEK = re.compile(r"\b(?:seven|7) days a week\b|\bevery day\b|\b(?:open|opens|operates?|operating)\s+daily\b|"
                   r"\ball week\b|\b24/7\b", re.IGNORECASE)  # fmt: skip
_AFTER = re.compile(r"\s*,?\s*(?:on|from|every|each|\()?\s*", re.IGNORECASE)
"""What may stand between a range and the days written after it ("to 10 pm on weekdays")."""
_BEFORE = re.compile(r"\s*,?\s*(?:(?:it|they|we|the \w+)\s+)?(?:is\s+|are\s+)?(?:open|opens|operates?|operating)?\s*"
                     r"(?:from|:|\()?\s*", re.IGNORECASE)  # fmt: skip
"""What may stand between days and the range written after them ("Monday to Friday from",
"On Saturdays, they open from")."""
_PARTS = re.compile(r"\b(weekdays|weekends?)\b", re.IGNORECASE)
_OPENING = re.compile(r"\b(?:open|opens|opened|operat\w*|hours|serv\w*|closed?|closes)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Schedule:
    """A record's opening hours: minutes from midnight (open, close) per day; a day at
    0:00-0:00 is unknown (None)."""

    hours: dict[str, tuple[int, int] | None]
    passage_index: int
    start: int
    end: int

    def on(self, day: str) -> tuple[int, int] | None:
        return self.hours.get(day)

    def lists(self, day: str) -> bool:
        return day in self.hours


def schedules(evidence: Sequence[Passage]) -> list[Schedule]:
    """The ``hours`` line of each passage's structured data."""
    out = []
    for index, passage in enumerate(evidence):
        for line in _SCHEDULE.finditer(passage.text):
            hours: dict[str, tuple[int, int] | None] = {}
            for match in _DAY_HOURS.finditer(line.group(1)):
                h1, m1, h2, m2 = (int(g) for g in match.groups()[1:])
                opening, closing = h1 * 60 + m1, h2 * 60 + m2
                hours[match.group(1).lower()] = None if opening == closing == 0 else (opening, closing or 24 * 60)
            if hours:
                out.append(Schedule(hours, index, line.start(1), line.end(1)))
    return out


def is_time_of_day(text: str) -> bool:
    """``text`` is one time of day as people write it ("10pm", "11:00 AM", "noon", "21:30")."""
    return re.fullmatch(rf"\s*{_TIME}\s*\.?\s*", text, re.IGNORECASE) is not None


def times_of_day(text: str) -> list[int]:
    """Every time of day ``text`` writes, in minutes from midnight."""
    found = (_minutes(m.groups()) for m in re.finditer(_TIME, text, re.IGNORECASE))
    return [m for m in found if m is not None]


def _minutes(groups: Sequence[str | None]) -> int | None:
    """A time of ``_TIME``'s groups in minutes from midnight (closing at midnight: 24:00)."""
    hour, minute, half, hour24, minute24, word = groups
    if word:
        return 12 * 60 if word.lower() == "noon" else 24 * 60
    if hour24 is not None:
        return int(hour24) * 60 + int(minute24 or 0)
    if hour is None or int(hour) > 12:
        return None
    value = (int(hour) % 12) * 60 + int(minute or 0)
    return value + (12 * 60 if (half or "").lower() == "p" else 0)


def _time_groups(match: re.Match[str], name: str) -> tuple[str | None, ...]:
    """The six ``_TIME`` groups inside the named group ``name``."""
    first = match.re.groupindex[name] + 1
    return match.groups()[first - 1 : first + 5]


@dataclass(frozen=True)
class _Range:
    start: int
    end: int
    opening: int | None  # None: a partial range ("until 11 pm")
    closing: int
    closing_span: tuple[int, int]
    opening_span: tuple[int, int] | None


def _ranges(claim: str) -> list[_Range]:
    out = []
    for match in _RANGE.finditer(claim):
        closing = _minutes(_time_groups(match, "to"))
        head = re.fullmatch(_TIME, match.group("from"), re.IGNORECASE)
        if head is not None:
            opening = _minutes(head.groups())
        else:  # '7 to 2 pm', '11-10pm': the hour takes the other end's half of the day
            bare = re.match(r"(\d{1,2})(?::(\d{2}))?", match.group("from"))
            assert bare is not None
            hour, minute = int(bare.group(1)), int(bare.group(2) or 0)
            opening = None if hour > 12 else (hour % 12) * 60 + minute
            if opening is not None and closing is not None and opening + 12 * 60 < closing:
                opening += 12 * 60
        if opening is None or closing is None:
            continue
        closing = closing or 24 * 60
        out.append(_Range(match.start(), match.end(), opening, closing, match.span("to"), match.span("from")))
    taken = [(r.start, r.end) for r in out]
    for match in _UNTIL.finditer(claim):
        if any(s <= match.start("to") < e for s, e in taken) or (closing := _minutes(_time_groups(match, "to"))) is None:
            continue
        out.append(_Range(match.start(), match.end(), None, closing or 24 * 60, match.span("to"), None))
    return sorted(out, key=lambda r: r.start)


def _day(word: str) -> str:
    word = word.lower().rstrip("s") if word.lower() not in ("tues", "thurs") else word.lower()
    return next(d for d in DAYS if d.startswith(word[:3]))


@dataclass(frozen=True)
class _Days:
    start: int
    end: int
    days: frozenset[str]
    every: bool  # "seven days a week", "daily": the place opens every day
    ends: tuple[tuple[int, int], tuple[int, int]] | None = None  # a span "A through B": where A and B are written


def _day_sets(claim: str) -> list[_Days]:
    out: list[_Days] = []
    taken: list[tuple[int, int]] = []
    for match in _SPAN.finditer(claim):
        a, b = DAYS.index(_day(match.group("a"))), DAYS.index(_day(match.group("b")))
        days = DAYS[a : b + 1] if a <= b else DAYS[a:] + DAYS[: b + 1]
        out.append(_Days(match.start(), match.end(), frozenset(days), len(days) == 7, (match.span("a"), match.span("b"))))
        taken.append(match.span())
    for match in _SINGLE.finditer(claim):
        if not any(s <= match.start() < e for s, e in taken):
            out.append(_Days(match.start(), match.end(), frozenset({_day(match.group())}), False))
    for match in _PARTS.finditer(claim):
        days = DAYS[:5] if match.group(1).lower() == "weekdays" else DAYS[5:]
        out.append(_Days(match.start(), match.end(), frozenset(days), False))
    for match in _WEEK.finditer(claim):
        out.append(_Days(match.start(), match.end(), frozenset(DAYS), True))
    return _merged(claim, sorted(out, key=lambda d: d.start))


def _merged(claim: str, sets: list[_Days]) -> list[_Days]:
    """Days listed together ("Wednesday, Thursday, and Friday", "Saturdays and Sundays")
    are one set."""
    out: list[_Days] = []
    for item in sets:
        if out and not item.every and not out[-1].every and re.fullmatch(r"\s*(?:,|,?\s*and|&|or)?\s*",
                                                                          claim[out[-1].end : item.start]):  # fmt: skip
            last = out.pop()
            item = _Days(last.start, item.end, last.days | item.days, False)
        out.append(item)
    return out


def _days_of(claim: str, given: _Range, sets: list[_Days]) -> list[_Days]:
    """The days written right after the range, else those right before it."""
    after = [d for d in sets if d.start >= given.end and _AFTER.fullmatch(claim[given.end : d.start])]
    if after:
        return after[:1]
    before = [d for d in sets if d.end <= given.start and _BEFORE.fullmatch(claim[d.end : given.start])]
    return before[-1:]


@dataclass(frozen=True)
class _Given:
    """A time range with the days the claim gives it, and the day span ("Monday to
    Saturday") those days are written as, where they are one span and all of it."""

    range: _Range
    days: frozenset[str]
    span: _Days | None


def _readings(claim: str, schedule: Schedule) -> tuple[list[_Days], list[_Given]]:
    """The claim's day sets, and each time range with the days it is given."""
    ranges, sets = _ranges(claim), _day_sets(claim)
    groups = [(given, _days_of(claim, given, sets)) for given in ranges]
    named = frozenset().union(*(d.days for d in sets if not d.every))
    out = []
    for given, claimed in groups:
        specific = [d for d in claimed if not d.every]
        own = frozenset().union(*(d.days for d in specific)) if specific else frozenset()
        if not own and claimed:  # "every day" from 8 to 5: every day but those named apart
            own = frozenset(DAYS) - named
        # a day a more specific range of the sentence gives its own hours is an exception
        others = [frozenset().union(*(d.days for d in c)) for g, c in groups if g is not given and c]
        days = frozenset(d for d in own if not any(d in o and len(o) < len(own) for o in others))
        span = claimed[0] if len(claimed) == 1 and claimed[0].ends is not None and claimed[0].days == days else None
        if days:
            out.append(_Given(given, days, span))
    return sets, out


def _one_schedule(claim: str, evidence: Sequence[Passage]) -> Schedule | None:
    found = schedules(evidence)
    return found[0] if len(found) == 1 and _OPENING.search(claim) else None


@dataclass(frozen=True)
class HoursReading:
    """What the schedule says of the claim's hours: the mismatches (``field_hours``) and the
    ranges it gives every one of their days (stated by the data)."""

    mismatches: list[Mismatch]
    held: list[tuple[int, int]]


def read_hours(claim: str, evidence: Sequence[Passage]) -> HoursReading:
    """The claim's hours against the data's one schedule, read once for both the rule and support."""
    schedule = _one_schedule(claim, evidence)
    if schedule is None:
        return HoursReading([], [])
    sets, given = _readings(claim, schedule)
    out = [_mismatch(claim, (d.start, d.end), None, schedule) for d in sets
           if d.every and any(not schedule.lists(day) for day in DAYS)]  # fmt: skip
    held = []
    for reading in given:
        found = _range_mismatches(claim, reading, schedule)
        out += found
        if not found:
            held.append((reading.range.start, reading.range.end))
    return HoursReading(_unique(out), held)


def hours_mismatches(claim: str, evidence: Sequence[Passage]) -> list[Mismatch]:
    """What the claim says of the hours that the data's schedule states otherwise (``field_hours``)."""
    return read_hours(claim, evidence).mismatches


def _range_mismatches(claim: str, reading: _Given, schedule: Schedule) -> list[Mismatch]:
    """The claim's range against each of its days' hours."""
    given, days = reading.range, reading.days
    stated = {d: schedule.on(d) for d in days if schedule.on(d) is not None or not schedule.lists(d)}
    wrong = {d: h for d, h in stated.items() if h is None or h[1] != given.closing
             or (given.opening is not None and h[0] != given.opening)}  # fmt: skip
    if not wrong:
        return []
    if (end_day := _end_day_moved_in(claim, reading, frozenset(wrong), schedule)) is not None:
        return [end_day]
    known = {h for h in stated.values() if h is not None}
    replacement, span = None, (given.start, given.end)
    if len(known) == 1 and all(h is not None for h in stated.values()):
        opening, closing = next(iter(known))
        if given.opening is not None and opening != given.opening and closing == given.closing and given.opening_span:
            span, replacement = given.opening_span, _fix(claim[slice(*given.opening_span)], given.opening, opening)
        elif closing != given.closing and (given.opening is None or opening == given.opening):
            span, replacement = given.closing_span, _fix(claim[slice(*given.closing_span)], given.closing, closing)
        if replacement is None:
            span = (given.start, given.end)
    return [_mismatch(claim, span, replacement, schedule)]


def _end_day_moved_in(claim: str, reading: _Given, wrong: frozenset[str], schedule: Schedule) -> Mismatch | None:
    """The one day of a span "A through B" whose hours differ, where it is A or B and the
    span without it still has at least two days, every one at exactly the claim's hours: that
    end moved one day in ("from Monday to Saturday from 17:00-21:00" against a Monday of
    17:30-23:00 -> "Tuesday"). None for a list of days, "seven days a week", a day inside the
    span, two days differing, a day the data does not list or gives 0:00-0:00 (unknown), or a
    partial range ("until 9 pm")."""
    given, span = reading.range, reading.span
    if span is None or span.ends is None or given.opening is None or len(wrong) != 1:
        return None
    (day,) = wrong
    rest = reading.days - {day}
    if schedule.on(day) is None or len(rest) < 2 or any(schedule.on(d) != (given.opening, given.closing) for d in rest):
        return None
    at = DAYS.index(day)
    for (start, end), step in zip(span.ends, (1, -1), strict=True):
        written = claim[start:end]
        if _day(written) == day:
            return _mismatch(claim, (start, end), _day_written_like(written, DAYS[(at + step) % 7]), schedule)
    return None


def _day_written_like(text: str, day: str) -> str:
    """``day`` written as ``text`` writes a day: 'Monday' -> 'Tuesday', 'Saturdays' ->
    'Fridays', 'Mon' -> 'Tue', 'SAT' -> 'FRI'."""
    plural = text.lower().endswith("s") and text.lower() not in ("tues", "thurs")
    stem = text[:-1] if plural else text
    if stem.lower() in DAYS:
        word = day
    elif len(stem) > 3:  # 'Tues', 'Thurs'
        word = {"tuesday": "tues", "thursday": "thurs"}.get(day, day[:3])
    else:
        word = day[:3]
    if len(stem) > 1 and stem.isupper():
        word = word.upper()
    elif stem[:1].isupper():
        word = word.capitalize()
    return word + ("s" if plural else "")


def _fix(text: str, claimed: int, stated: int) -> str | None:
    """The data's time written as the claim writes its time; None where the two differ only
    in the half of the day ('2:00 PM' against a closing at 2:00): the data may be on a
    12-hour clock, so which is meant is not known."""
    if (claimed - stated) % (12 * 60) == 0:
        return None
    return _written_like(text, stated)


def _written_like(text: str, minutes: int) -> str:
    """``minutes`` written as ``text`` writes a time: '10pm' -> '8pm', '10:00 PM' -> '8:00 PM',
    '22:00' -> '20:00'."""
    hour, minute = divmod(minutes % (24 * 60), 60)
    if re.fullmatch(r"\d{1,2}:\d{2}", text.strip()):
        return f"{hour}:{minute:02d}"
    half = re.search(r"([ap])(\.?)\s*m\.?", text, re.IGNORECASE)
    clock = f"{(hour % 12) or 12}" + (f":{minute:02d}" if ":" in text or minute else "")
    if half is None:
        return clock
    letter = ("a" if hour < 12 else "p")
    letter = letter.upper() if half.group(1).isupper() else letter
    gap = " " if re.search(r"\d\s+[ap]", text, re.IGNORECASE) else ""
    suffix = text[half.start() + 1 :]
    return f"{clock}{gap}{letter}{suffix}"


def _mismatch(claim: str, span: tuple[int, int], replacement: str | None, schedule: Schedule) -> Mismatch:
    return Mismatch(kind="date", span=span, text=claim[span[0] : span[1]], replacement=replacement,
                    evidence_index=schedule.passage_index, evidence_span=(schedule.start, schedule.end),
                    rule="field_hours")  # fmt: skip


def _unique(found: list[Mismatch]) -> list[Mismatch]:
    seen, out = set(), []
    for m in found:
        if m.span not in seen:
            seen.add(m.span)
            out.append(m)
    return out


def swaps_hours(original: str, edits: Sequence[tuple[int, int, str]], schedule_line: str) -> bool:
    """Every edit (start, end, replacement; offsets into ``original``) is the time
    ``field_hours`` finds wrong, replaced by the schedule's own (its ``replacement``)."""
    proposed = [(m.span, m.replacement) for m in hours_mismatches(original, passages_from_texts([schedule_line]))
                if m.replacement is not None]  # fmt: skip
    return bool(edits) and all(any(is_part_of(original, edit, span, new) for span, new in proposed) for edit in edits)


def is_part_of(original: str, edit: tuple[int, int, str], span: tuple[int, int], replacement: str) -> bool:
    """``edit`` (start, end, new text) is the swap of ``original[span]`` for ``replacement``,
    or the part of it where the two differ ('11' -> '9' of '11:00 PM' -> '9:00 PM')."""
    start, end, new = edit
    if not span[0] <= start <= end <= span[1]:
        return False
    return original[span[0] : start] + new + original[end : span[1]] == replacement
